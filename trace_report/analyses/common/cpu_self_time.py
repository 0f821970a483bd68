"""CPU operators ranked by self time: what ``top-kernels`` shows for traces without any GPU
operation (its declaration: :mod:`trace_report.analyses.top_kernels`) and what ``compare`` diffs
when neither side ran GPU work; with the Ray task that computes it per partition
(:mod:`trace_report.analyses.common.distributed`). Loads pandas and numpy only when called: a
GPU trace's ``top-kernels`` never does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pandas as pd

    from trace_report.store.tracedb import TraceDB

CPU_COLUMNS = ["name", "count", "total_us", "mean_us", "min_us", "max_us", "pct_of_cpu_self_time", "kind"]


def _self_times(ts: np.ndarray, end: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Self time of each interval in one thread: its duration minus its direct children's.

    Intervals must be sorted by start, then by longer first. A stack holds the open
    ancestors; each interval is charged to its innermost enclosing one.
    """
    import numpy as np  # only the CPU-only fallback needs numpy
    self_t = dur.copy()
    stack: list[int] = []
    for i in range(len(ts)):
        while stack and end[stack[-1]] <= ts[i]:
            stack.pop()
        if stack:
            self_t[stack[-1]] -= min(dur[i], end[stack[-1]] - ts[i])
        stack.append(i)
    return np.maximum(self_t, 0.0)


def cpu_self_time_table(con: duckdb.DuckDBPyConnection, rank: int | None = None, by_rank: bool = False,
                        limit: int | None = None, trace_ids: tuple[int, ...] | None = None) -> pd.DataFrame:
    """CPU operators of the traces of ``rank`` (None = all) among ``trace_ids`` (None = all)
    ranked by total self time (µs): ``rank`` (NULL without ``by_rank``), then :data:`CPU_COLUMNS`,
    ``kind='cpu_op'``; ``limit`` rows per rank (None = all).

    Self time = ``dur`` minus the time of directly nested ``cpu_op``/``user_annotation`` events
    on the same pid/tid (what ``torch.profiler``'s ``self_cpu_time_total`` reports).
    """
    import pandas as pd  # only the CPU-only fallback builds frames; GPU traces never load pandas
    ev = con.execute(
        "SELECT t.rank, e.trace_id, e.pid, e.tid, e.cat, e.name, e.ts_us, e.dur_us "
        "FROM events e JOIN traces t USING (trace_id) "
        "WHERE e.cat IN ('cpu_op', 'user_annotation') AND ($rank IS NULL OR t.rank = $rank) "
        "  AND ($trace_ids IS NULL OR list_contains($trace_ids, e.trace_id)) "
        "ORDER BY e.trace_id, e.pid, e.tid, e.ts_us, e.dur_us DESC",
        {"rank": rank, "trace_ids": None if trace_ids is None else list(trace_ids)},
    ).df()
    if ev.empty:
        return pd.DataFrame(columns=["rank", *CPU_COLUMNS])
    parts = []
    for _, g in ev.groupby(["trace_id", "pid", "tid"], sort=False):
        ts, dur = g["ts_us"].to_numpy(float), g["dur_us"].to_numpy(float)
        parts.append(pd.Series(_self_times(ts, ts + dur, dur), index=g.index))
    ev["self_us"] = pd.concat(parts)
    ops = ev[ev["cat"] == "cpu_op"].copy()
    ops["rank"] = ops["rank"] if by_rank else None
    keys = ["rank", "name"] if by_rank else ["name"]
    agg = ops.groupby(keys, dropna=False).agg(
        count=("self_us", "size"), total_us=("self_us", "sum"), mean_us=("self_us", "mean"),
        min_us=("self_us", "min"), max_us=("self_us", "max"),
    ).reset_index()
    if not by_rank:
        agg["rank"] = None
    denom = agg.groupby("rank", dropna=False)["total_us"].transform("sum")
    agg["pct_of_cpu_self_time"] = 100.0 * agg["total_us"] / denom.where(denom > 0, 1.0)
    agg["kind"] = "cpu_op"
    agg = agg.sort_values(["rank", "total_us", "name"], ascending=[True, False, True])
    if limit is not None:
        agg = agg.groupby("rank", dropna=False, sort=False).head(limit)
    return agg.reset_index(drop=True)


def cpu_task(db: TraceDB, p: dict[str, Any]) -> pd.DataFrame:
    """The Ray task: per (rank, CPU operator) of the partition count/sum/min/max of self time
    (``p``: ``rank``, ``by_rank``; no limit)."""
    return cpu_self_time_table(db.con, p["rank"], p["by_rank"])
