"""``flags`` on Ray (``--engine ray``): ``kernel_flags.sql`` per partition
(:mod:`trace_report.analyses.common.distributed`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trace_report.analyses.common.distributed import map_partitions
from trace_report.analyses.common.kernel_classes import flag_rows
from trace_report.analyses.flags import FlagsOptions
from trace_report.analyses.flags.compute import FlagsResult, check_options, flags, flags_from_rows, shown
from trace_report.store.tracedb import TraceDB


def flags_task(db: TraceDB, p: dict[str, Any]) -> pd.DataFrame:
    """``kernel_flags.sql``'s rows: per (rank, trace, name, class, rule) count and sum, and the
    partition's GPU time per rank (rows without a name)."""
    return flag_rows(db.con, p["rank"], p["by_rank"], None)


def flags_ray(db: TraceDB, options: FlagsOptions | None = None) -> FlagsResult:
    """:func:`~trace_report.analyses.flags.flags` with one Ray task per partition: the
    per-name rows are the partitions' own; the GPU time of each rank (the denominator) is summed."""
    opts = options or FlagsOptions()
    known = check_options(db, opts)
    partials = map_partitions(db, flags_task, {"rank": opts.rank, "by_rank": opts.by_rank}, opts.rank, opts.trace_ids)
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


def flags_table_ray(db: TraceDB, options: FlagsOptions) -> FlagsResult:
    """:func:`flags_ray` as the command shows it (:func:`~trace_report.analyses.flags.compute.flags_table`)."""
    return shown(flags_ray(db, options), options)
