"""``top-kernels``, ``breakdown``, ``flags`` and ``compare`` on Ray (``--engine ray``; docs/scaling.md).

Map: the partitions of the database (:func:`~trace_report.store.partitions.event_partitions`: one
trace of a ``.duckdb`` database, one ``run_id=/rank=`` folder of an exported dataset; consecutive
ones joined into at most :data:`TASKS_PER_CPU` tasks per CPU of the cluster) are each opened by a
Ray task as its own in-memory DuckDB over its Parquet files, and the analysis' own SQL or
per-trace code runs there (``store/sql/top_kernels.sql``, ``kernel_flags.sql``, the region views
and :func:`~trace_report.analyses.regions.compute_region_parts`, :func:`~trace_report.analyses.compare.gpu_op_totals`,
:func:`~trace_report.analyses.top_kernels.cpu_self_time`). Reduce, on the driver: counts and sums
are summed, minima and maxima taken, and every mean and percentage is computed again from the
merged sums (never averaged); the same functions as the local engine then shape the rows. So the
output is the local engine's, up to the last bits of floating-point sums taken in another order
(as between two DuckDB runs on several threads).

The driver holds a :class:`~trace_report.store.tracedb.TraceDB` of the database (its small tables:
``traces``, ``event_files``) and never scans ``events``. The breakdown's rows kept beside a
database (:mod:`~trace_report.analyses.regions_kept`) are read there and only the other traces
go to tasks; their rows are kept in turn. Needs a Ray runtime
(:func:`~trace_report.ingest.engine_ray.ray_runtime`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from trace_report.analyses.compare import (
    CompareOptions,
    CompareResult,
    check_side,
    gpu_op_totals,
    kernels_diff,
    regions_diff,
    step_count,
)
from trace_report.analyses.kernel_classes import (
    FlagsOptions,
    FlagsResult,
    check_options,
    flag_rows,
    flags,
    flags_from_rows,
)
from trace_report.analyses.regions import (
    CODE_VERSION,
    BreakdownOptions,
    BreakdownResult,
    breakdown_from,
    breakdown_traces,
    compute_region_parts,
    merge_region_tables,
    selected_traces,
    step_spans,
    trace_ids,
)
from trace_report.analyses.regions_kept import RegionPart, empty_part, kept_region_parts
from trace_report.analyses.top_kernels import (
    CPU_COLUMNS,
    KERNEL_COLUMNS,
    NO_KERNELS_NOTE,
    STEPS_ONLY_NOTE,
    TopKernelsOptions,
    TopKernelsResult,
    _kernel_rows,
    cpu_self_time,
    rows_from_frame,
    top_kernels_sql,
)
from trace_report.errors import InputError
from trace_report.ingest.engine_ray import RayEngine, cluster_cpus, map_tasks
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.inputs import resolve
from trace_report.store.database import connect_existing
from trace_report.store.export import open_parquet_dataset
from trace_report.store.partitions import EventPartition, batches, event_partitions, open_partition
from trace_report.store.rows import Rows
from trace_report.store.tracedb import TraceDB

TASKS_PER_CPU = 4
"""Partitions are joined into at most this many tasks per CPU of the cluster: enough for balance,
few enough that opening DuckDB and its views (~0.1 s a task here) stays small."""

# ---------------------------------------------------------------- map: what a task computes


GPU_TIME_SQL = """
    SELECT CASE WHEN $by_rank THEN t.rank END AS rank, sum(s.dur_us) AS gpu_us
    FROM (SELECT trace_id, dur_us FROM gpu_ops WHERE NOT $steps_only
          UNION ALL SELECT trace_id, dur_us FROM steps_only_gpu_ops WHERE $steps_only) s
    JOIN traces t USING (trace_id)
    WHERE $rank IS NULL OR t.rank = $rank
    GROUP BY 1"""
"""The denominator of ``top_kernels.sql``'s ``pct_of_gpu_time`` (its ``tot``: GPU time of the
selection, per rank with ``$by_rank``), which a partition's rows do not carry."""


def _kernels(db: TraceDB, p: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (rank, kind, name) of GPU operation (kernel, memcpy, memset) count/sum/min/max of
    ``dur_us`` (``top_kernels.sql``, no limit) and the partition's GPU time per rank."""
    params = {"rank": p["rank"], "by_rank": p["by_rank"], "steps_only": p["steps_only"]}
    rows = db.con.execute(top_kernels_sql(p["steps_only"]),
                          {"rank": p["rank"], "by_rank": p["by_rank"], "limit": None, "trace_ids": None}).df()
    return rows, db.con.execute(GPU_TIME_SQL, params).df()


def _cpu(db: TraceDB, p: dict[str, Any]) -> pd.DataFrame:
    """Per (rank, CPU operator) count/sum/min/max of self time."""
    return cpu_self_time(db.con, TopKernelsOptions(limit=None, rank=p["rank"], by_rank=p["by_rank"]))


def _regions(db: TraceDB, p: dict[str, Any]) -> dict[int, RegionPart]:
    """Per trace of the partition: per (window, region) wall/GPU/idle/CPU µs and kernels, and the
    facts for the notes."""
    return compute_region_parts(db.con, trace_ids(selected_traces(db.con, None)))


def _flags(db: TraceDB, p: dict[str, Any]) -> pd.DataFrame:
    """``kernel_flags.sql``'s rows: per (rank, trace, name, class, rule) count and sum, and the
    partition's GPU time per rank (rows without a name)."""
    return flag_rows(db.con, p["rank"], p["by_rank"], None)


def _gpu_ops(db: TraceDB, p: dict[str, Any]) -> tuple[pd.DataFrame, int]:
    """Per GPU operation name count and sum, and the ProfilerStep windows."""
    return gpu_op_totals(db, p["rank"], steps_only=p["steps_only"]), step_count(db, p["rank"])


TASKS: dict[str, Callable[[TraceDB, dict[str, Any]], Any]] = {
    "kernels": _kernels, "cpu": _cpu, "regions": _regions, "flags": _flags, "gpu_ops": _gpu_ops,
}


def run_partition(kind: str, part: EventPartition, params: dict[str, Any]) -> Any:
    """The body of one Ray task: open the partition, run :data:`TASKS` ``[kind]`` on it."""
    with open_partition(part) as db:
        return TASKS[kind](db, params)


def _map(db: TraceDB, kind: str, params: dict[str, Any], rank: int | None = None,
         trace_ids: tuple[int, ...] | None = None) -> list[Any]:
    ids = [int(t) for (t,) in db.con.execute(
        "SELECT trace_id FROM traces WHERE $rank IS NULL OR rank = $rank ORDER BY trace_id", {"rank": rank}).fetchall()
        if trace_ids is None or int(t) in trace_ids]
    parts = batches(event_partitions(db, ids), TASKS_PER_CPU * cluster_cpus())
    return map_tasks(run_partition, [(kind, part, params) for part in parts], what=kind) if parts else []


# ---------------------------------------------------------------- reduce


def merge_stats(partials: list[pd.DataFrame], pct: str, denominators: pd.Series | None = None) -> pd.DataFrame:
    """Partial ``rank, kind, name, count, total_us, min_us, max_us`` rows merged per (rank, kind,
    name) (a memcpy and a kernel of one name stay two rows, as in ``top_kernels.sql``; per (rank,
    name) for partials without ``kind``): sums summed, min of minima, max of maxima,
    ``mean_us = total_us / count``, and the percentage column ``pct`` of ``denominators`` (summed
    partial denominators by rank), or, without them, of the rank's summed ``total_us`` (0 % when
    that is 0, as :func:`~trace_report.analyses.top_kernels.cpu_self_time`)."""
    frames = [f for f in partials if len(f)]
    if not frames:
        return pd.DataFrame(columns=["rank", "kind", "name", "count", "total_us", "mean_us", "min_us", "max_us", pct])
    rows = pd.concat(frames, ignore_index=True)
    keys = ["rank", "kind", "name"] if "kind" in rows.columns else ["rank", "name"]
    out = rows.groupby(keys, dropna=False, sort=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), min_us=("min_us", "min"),
        max_us=("max_us", "max")).reset_index()
    out["mean_us"] = out["total_us"] / out["count"]
    if denominators is None:
        denom = out.groupby("rank", dropna=False)["total_us"].transform("sum")
        out[pct] = 100.0 * out["total_us"] / denom.where(denom > 0, 1.0)
    else:
        by_rank = {(None if pd.isna(k) else k): v for k, v in denominators.items()}
        out[pct] = 100.0 * out["total_us"] / out["rank"].map(lambda r: by_rank.get(None if pd.isna(r) else r))
    return out


def _denominators(partials: list[pd.DataFrame]) -> pd.Series:
    frames = [f for f in partials if len(f)]
    if not frames:
        return pd.Series(dtype=float)
    return pd.concat(frames, ignore_index=True).groupby("rank", dropna=False)["gpu_us"].sum()


def _ranked(frame: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """``top_kernels.sql``'s order (rank first, then total time, name, kind) and ``limit`` rows per rank."""
    out = frame.sort_values(["rank", "total_us", "name", "kind"], ascending=[True, False, True, True],
                            na_position="first")
    if limit is not None:
        out = out.groupby("rank", dropna=False, sort=False).head(limit)
    return out.reset_index(drop=True)


def _with_rank(frame: pd.DataFrame, columns: list[str]) -> Rows:
    """:func:`~trace_report.analyses.top_kernels.rows_from_frame` with ``rank`` always there, as
    DuckDB gives it: an ``int`` or ``None`` (pandas' NaN of a missing rank, or of every row without
    ``by_rank``, is ``None``; a rank made float by a NaN beside it is an ``int`` again)."""
    rows = rows_from_frame(frame, True, columns)
    data = [(None if pd.isna(r[0]) else int(r[0]), *r[1:]) for r in rows.data]
    return Rows(rows.columns, rows.types, data)


def top_kernels_ray(db: TraceDB, options: TopKernelsOptions | None = None) -> TopKernelsResult:
    """:func:`~trace_report.analyses.top_kernels.top_kernels` with one Ray task per partition."""
    opts = options or TopKernelsOptions()
    db.check_rank(opts.rank)
    if opts.steps_only and not db.con.execute("SELECT count(*) FROM steps").fetchall()[0][0]:
        raise InputError("--steps-only needs ProfilerStep ranges, and these traces have none")
    params = {"rank": opts.rank, "by_rank": opts.by_rank, "steps_only": opts.steps_only}
    partials = _map(db, "kernels", params, opts.rank, opts.trace_ids)
    merged = merge_stats([r for r, _ in partials], "pct_of_gpu_time", _denominators([g for _, g in partials]))
    printed = (["rank"] if opts.by_rank else []) + KERNEL_COLUMNS
    if len(merged):
        # every GPU operation ranked (kernels_only: unlimited, then the local engine's filter, limit and note)
        rows = _with_rank(_ranked(merged, None if opts.kernels_only else opts.limit), KERNEL_COLUMNS)
        notes = [STEPS_ONLY_NOTE] if opts.steps_only else []
        if opts.kernels_only:
            rows, hidden = _kernel_rows(rows, opts.limit)
            notes += [hidden] if hidden else []
        return TopKernelsResult(rows.select(printed), "; ".join(notes) or None)
    merged = merge_stats(_map(db, "cpu", params, opts.rank, opts.trace_ids), "pct_of_cpu_self_time")
    return TopKernelsResult(rows_from_frame(_ranked(merged, opts.limit), opts.by_rank, CPU_COLUMNS),
                            NO_KERNELS_NOTE)


def breakdown_ray(db: TraceDB, options: BreakdownOptions | None = None) -> BreakdownResult:
    """:func:`~trace_report.analyses.regions.breakdown` with one Ray task per partition."""
    opts = options or BreakdownOptions()
    traces = breakdown_traces(db.con, opts)
    ids = trace_ids(traces)

    def in_tasks(missing: list[int]) -> dict[int, RegionPart]:
        got = {t: part for parts in _map(db, "regions", {}, trace_ids=tuple(missing)) for t, part in parts.items()}
        # a trace without events has no partition (an exported dataset holds no folder for it): its
        # part is what the local engine computes for it, no window and no GPU activity
        return {t: got.get(t) or empty_part(t) for t in missing}

    parts = kept_region_parts(db.con, ids, in_tasks, CODE_VERSION)  # only traces without kept rows go to Ray
    table, facts = merge_region_tables([parts[t] for t in ids])
    return breakdown_from(table, facts, traces, opts, step_spans(db.con, ids))


def flags_ray(db: TraceDB, options: FlagsOptions | None = None) -> FlagsResult:
    """:func:`~trace_report.analyses.kernel_classes.flags` with one Ray task per partition: the
    per-name rows are the partitions' own; the GPU time of each rank (the denominator) is summed."""
    opts = options or FlagsOptions()
    known = check_options(db, opts)
    partials = _map(db, "flags", {"rank": opts.rank, "by_rank": opts.by_rank}, opts.rank, opts.trace_ids)
    if not partials:  # no traces: nothing to distribute, the local answer is the empty one
        return flags(db, opts)
    long = pd.concat(partials, ignore_index=True)
    is_total = long["name"].isna()
    totals = long[is_total].groupby("rank", dropna=False, sort=True)["gpu_us"].sum().reset_index()
    rows = long[~is_total].drop(columns="gpu_us").merge(totals, on="rank", how="left")
    merged = pd.concat([rows, totals.reindex(columns=long.columns)], ignore_index=True)[list(long.columns)]
    merged["count"] = merged["count"].fillna(0).astype(long["count"].dtype)
    merged["total_us"] = merged["total_us"].fillna(0.0)
    return flags_from_rows(db, merged, opts, known)


def _gpu_totals(db: TraceDB, opts: CompareOptions) -> tuple[pd.DataFrame, int]:
    parts = _map(db, "gpu_ops", {"rank": opts.rank, "steps_only": opts.steps_only}, opts.rank)
    frames = [f for f, _ in parts if len(f)]
    steps = sum(n for _, n in parts)
    if not frames:
        return pd.DataFrame(columns=["name", "count", "total_us", "kind"]), steps
    totals = pd.concat(frames, ignore_index=True).groupby("name", sort=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), kind=("kind", "first")).reset_index()
    return totals, steps


def _cpu_totals(db: TraceDB, rank: int | None) -> pd.DataFrame:
    merged = merge_stats(_map(db, "cpu", {"rank": rank, "by_rank": False}, rank), "pct_of_cpu_self_time")
    return merged[["name", "count", "total_us"]].assign(kind="cpu_op")


def compare_ray(a: TraceDB, b: TraceDB, options: CompareOptions | None = None) -> CompareResult:
    """:func:`~trace_report.analyses.compare.compare` with one Ray task per partition of each side."""
    opts = options or CompareOptions()
    if opts.by not in ("kernel", "region"):
        raise InputError(f"unknown comparison level {opts.by!r} (levels: kernel, region)")
    if opts.by == "region":
        bopts = BreakdownOptions(rank=opts.rank)
        return regions_diff(breakdown_ray(a, bopts), breakdown_ray(b, bopts), opts)
    check_side(a.con, opts.rank, "A")
    check_side(b.con, opts.rank, "B")
    (ta, sa), (tb, sb) = _gpu_totals(a, opts), _gpu_totals(b, opts)
    cpu = ta.empty and tb.empty
    if cpu:
        ta, tb = _cpu_totals(a, opts.rank), _cpu_totals(b, opts.rank)
    return kernels_diff(ta, tb, sa, sb, opts, cpu=cpu)


# ---------------------------------------------------------------- opening inputs for the Ray engine


@contextmanager
def open_for_ray(paths: list[Path], *, workdir: Path | None = None) -> Iterator[TraceDB]:
    """A :class:`TraceDB` whose events are in Parquet files that Ray tasks can read: the database
    or exported dataset given, else the traces given ingested by Ray tasks into a temporary
    database in ``workdir`` (default: the system's temporary folder; on a cluster it must be a
    shared path, e.g. ``TMPDIR=/shared/tmp``), removed on exit. Needs a Ray runtime."""
    with resolve([Path(p) for p in paths]) as found:
        database, dataset = found.database, found.dataset
    if database is not None:
        with TraceDB(connect_existing(database)) as db:
            yield db
        return
    if dataset is not None:
        with open_parquet_dataset(dataset) as db:
            yield db
        return
    tmp = Path(tempfile.mkdtemp(prefix="trace-report-ray-", dir=workdir))
    try:
        db_path = tmp / "traces.duckdb"
        summary = ingest_to_database([Path(p) for p in paths], db_path, IngestOptions(), engine=RayEngine())
        if not summary.ingested:
            raise InputError(f"{', '.join(map(str, paths))}: no trace to analyse")
        with TraceDB(connect_existing(db_path), summary) as db:
            yield db
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
