"""``top-kernels`` on Ray (``--engine ray``): the per-partition statistics and their merge
(:mod:`trace_report.analyses.common.distributed`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trace_report.analyses.common.cpu_self_time import CPU_COLUMNS, cpu_task
from trace_report.analyses.common.distributed import map_partitions, merge_stats
from trace_report.analyses.top_kernels import TopKernelsOptions
from trace_report.analyses.top_kernels.compute import (
    KERNEL_COLUMNS,
    NO_KERNELS_NOTE,
    STEPS_ONLY_NOTE,
    TopKernelsResult,
    TopKernelsTable,
    _kernel_rows,
    rows_from_frame,
    top_kernels_sql,
)
from trace_report.errors import InputError
from trace_report.store.rows import Rows
from trace_report.store.tracedb import TraceDB

GPU_TIME_SQL = """
    SELECT CASE WHEN $by_rank THEN t.rank END AS rank, sum(s.dur_us) AS gpu_us
    FROM (SELECT trace_id, dur_us FROM gpu_ops WHERE NOT $steps_only
          UNION ALL SELECT trace_id, dur_us FROM steps_only_gpu_ops WHERE $steps_only) s
    JOIN traces t USING (trace_id)
    WHERE $rank IS NULL OR t.rank = $rank
    GROUP BY 1"""
"""The denominator of ``top_kernels.sql``'s ``pct_of_gpu_time`` (its ``tot``: GPU time of the
selection, per rank with ``$by_rank``), which a partition's rows do not carry."""


def kernels_task(db: TraceDB, p: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (rank, kind, name) of GPU operation (kernel, memcpy, memset) count/sum/min/max of
    ``dur_us`` (``top_kernels.sql``, no limit) and the partition's GPU time per rank."""
    params = {"rank": p["rank"], "by_rank": p["by_rank"], "steps_only": p["steps_only"]}
    rows = db.con.execute(top_kernels_sql(p["steps_only"]),
                          {"rank": p["rank"], "by_rank": p["by_rank"], "limit": None, "trace_ids": None}).df()
    return rows, db.con.execute(GPU_TIME_SQL, params).df()


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
    partials = map_partitions(db, kernels_task, params, opts.rank, opts.trace_ids)
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
    merged = merge_stats(map_partitions(db, cpu_task, params, opts.rank, opts.trace_ids), "pct_of_cpu_self_time")
    return TopKernelsResult(rows_from_frame(_ranked(merged, opts.limit), opts.by_rank, CPU_COLUMNS),
                            NO_KERNELS_NOTE)


def top_kernels_table_ray(db: TraceDB, options: TopKernelsOptions) -> TopKernelsTable:
    """:func:`top_kernels_ray` as the command prints it (the declaration's compute on Ray)."""
    result = top_kernels_ray(db, options)
    return TopKernelsTable(result.rows, [result.note] if result.note else [])
