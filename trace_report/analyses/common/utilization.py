"""GPU utilisation and launch-bound: thin readers of the views that define them.

Each number has one definition, in one SQL view (``store/sql/views_step_numbers.sql``,
docs/analysis.md "Definitions"); the report headline, ``advise`` and the notebooks read it here:

- GPU utilisation (view ``gpu_utilization``): busy time of GPU operations (kernels + memcpy +
  memset, union of their intervals) / ProfilerStep wall time, per step and rank; traces without
  ProfilerStep use their first-to-last GPU operation span (``basis = 'gpu_span'``, HTA's
  temporal-breakdown denominator).
- Step time (view ``step_time``, ``store/sql/views_step_time.sql``): per ProfilerStep its CPU span,
  the GPU's step period (the work launched in the step, by correlation id, as HTA and
  torch-tb-profiler assign it) and ``step_us``, the longer of the two: the denominator of every
  "% of step time".
- Launch-bound (view ``launch_bound``): GPU operations (kernels + memcpy + memset) launched inside
  ProfilerSteps that ran shorter than the CPU call that launched them (HTA
  ``get_cuda_kernel_launch_stats``, ``include_memory_events=True``).

:func:`gpu_timeline` gives the whole-trace figures of HTA's temporal breakdown (span, busy, idle).
"""

from __future__ import annotations

import pandas as pd

from trace_report.analyses.common.intervals import BusyTime
from trace_report.analyses.common.selection import selected_traces, trace_ids
from trace_report.store.tracedb import TraceDB

UTILIZATION_COLUMNS = ["rank", "trace_id", "step", "basis", "wall_us", "busy_us", "gpu_util_pct"]
RANK_COLUMNS = ["rank", "basis", "steps", "wall_us", "busy_us", "gpu_util_pct"]
STEP_TIME_COLUMNS = ["rank", "trace_id", "step", "window_id", "cpu_start_us", "cpu_end_us", "cpu_us", "gpu_start_us",
                     "gpu_end_us", "gpu_us", "step_us", "bound_by", "gpu_ops", "gpu_busy_us"]


def gpu_utilization(db: TraceDB, rank: int | None = None, *, by_step: bool = False) -> pd.DataFrame:
    """GPU utilisation per rank (:data:`RANK_COLUMNS`: sum of busy µs / sum of step wall µs over
    the rank's steps), or per step with ``by_step`` (:data:`UTILIZATION_COLUMNS`). ``basis`` is
    ``ProfilerStep`` or ``gpu_span``; ``gpu_util_pct`` is NULL without GPU operations.
    Source: views ``gpu_utilization`` and ``gpu_utilization_by_rank``."""
    db.check_rank(rank)
    if by_step:
        return db.con.execute(
            f"SELECT {', '.join(UTILIZATION_COLUMNS)} FROM gpu_utilization WHERE $rank IS NULL OR rank = $rank "
            "ORDER BY rank, trace_id, ts_us", {"rank": rank}).df()
    return db.con.execute(
        f"SELECT {', '.join(RANK_COLUMNS)} FROM gpu_utilization_by_rank WHERE $rank IS NULL OR rank = $rank "
        "ORDER BY rank", {"rank": rank}).df()


def step_times(db: TraceDB, rank: int | None = None) -> pd.DataFrame:
    """One row per ProfilerStep (:data:`STEP_TIME_COLUMNS`, µs) in start order: its CPU span, the
    GPU's step period, ``step_us`` (the longer), ``bound_by`` (``cpu``/``gpu``) and the GPU busy
    time inside the GPU's period; traces without ProfilerStep have no row. Source: view
    ``step_time`` (the rule and its sources are in its SQL)."""
    db.check_rank(rank)
    return db.con.execute(
        f"SELECT {', '.join(STEP_TIME_COLUMNS)} FROM step_time WHERE $rank IS NULL OR rank = $rank "
        "ORDER BY rank, trace_id, cpu_start_us, window_id", {"rank": rank}).df()


def step_overlap_note(db: TraceDB, rank: int | None = None) -> str | None:
    """A note when ProfilerSteps of a trace overlap, or None: how many were counted from the end
    of the earlier ones and how many, wholly inside earlier ones, were left out of summed step
    time (view ``step_overlap_counts``; the rule: view ``step_wall_windows``)."""
    row = db.con.execute(
        "SELECT count(*), sum(clipped), sum(nested), sum(overlap_us) FROM step_overlap_counts "
        "WHERE $rank IS NULL OR rank = $rank", {"rank": rank}).fetchone()
    if not row or not row[0]:
        return None
    traces, clipped, nested, overlap_us = row
    return (f"ProfilerSteps overlap in {traces} trace(s): {int(clipped)} step(s) start before an earlier one "
            f"ends (counted from its end), {int(nested)} lie inside earlier ones (left out of step time); "
            f"{overlap_us:,.1f} us of step time not counted twice")


def launch_stats(db: TraceDB, trace_ids: list[int]) -> pd.DataFrame:
    """Per trace (view ``launch_bound``): ``gpu_ops`` launched inside ProfilerSteps, ``steps``,
    ``shorter_than_launch`` (GPU duration < launch call duration), ``shorter_pct``,
    ``median_gpu_us``, ``median_launch_us``, all over the operations not replayed from a CUDA/HIP
    graph, and ``graph_ops`` (those replayed: one ``cudaGraphLaunch`` serves them all)."""
    return db.con.execute("SELECT * FROM launch_bound WHERE list_contains($ids, trace_id) ORDER BY trace_id",
                          {"ids": trace_ids}).df()


def gpu_timeline(db: TraceDB, rank: int | None = None) -> pd.DataFrame:
    """Per trace: GPU span, busy and idle µs, HTA-style.

    Columns: ``trace_id``, ``rank``, ``span_us`` (first GPU op start to last GPU op end, kernels +
    memcpy + memset), ``busy_us`` (union of their intervals), ``idle_us`` (= span - busy, what
    HTA's ``get_temporal_breakdown`` reports as ``idle_time(us)``), ``kernel_us`` (sum of kernel
    durations), ``gpu_ops``, ``utilization_pct`` (100 * busy / span). Traces without GPU activity
    have NULL times.
    """
    con = db.con
    traces = selected_traces(con, rank)
    ops = con.execute(
        "SELECT trace_id, cat, ts_us, ts_us + dur_us AS end_us, dur_us FROM gpu_ops "
        "WHERE list_contains($ids, trace_id)", {"ids": trace_ids(traces)}).df()
    rows = []
    for tr in traces.itertuples(index=False):
        g = ops[ops["trace_id"] == tr.trace_id]
        row = {"trace_id": tr.trace_id, "rank": tr.rank, "span_us": None, "busy_us": None, "idle_us": None,
               "kernel_us": None, "gpu_ops": len(g), "utilization_pct": None}
        if len(g):
            busy = BusyTime(g["ts_us"].to_numpy(), g["end_us"].to_numpy())
            span = float(g["end_us"].max() - g["ts_us"].min())
            row.update(span_us=span, busy_us=busy.total, idle_us=span - busy.total,
                       kernel_us=float(g.loc[g["cat"] == "kernel", "dur_us"].sum()),
                       utilization_pct=100.0 * busy.total / span if span > 0 else None)
        rows.append(row)
    return pd.DataFrame(rows)
