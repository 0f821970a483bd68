"""``compare`` on Ray (``--engine ray``): each side's per-name totals per partition
(:mod:`trace_report.analyses.common.distributed`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trace_report.analyses.common.breakdown_ray import breakdown_ray
from trace_report.analyses.common.breakdown_sums import BreakdownSelection
from trace_report.analyses.common.cpu_self_time import cpu_task
from trace_report.analyses.common.distributed import map_partitions, merge_stats
from trace_report.analyses.compare import CompareOptions
from trace_report.analyses.compare.compute import (
    CompareResult,
    check_side,
    gpu_op_totals,
    kernels_diff,
    regions_diff,
    step_count,
)
from trace_report.analyses.compare.gate import Judged, judged
from trace_report.errors import InputError
from trace_report.store.tracedb import TraceDB


def gpu_ops_task(db: TraceDB, p: dict[str, Any]) -> tuple[pd.DataFrame, int]:
    """Per GPU operation name count and sum, and the ProfilerStep windows."""
    return gpu_op_totals(db, p["rank"], steps_only=p["steps_only"]), step_count(db, p["rank"])


def _gpu_totals(db: TraceDB, opts: CompareOptions) -> tuple[pd.DataFrame, int]:
    parts = map_partitions(db, gpu_ops_task, {"rank": opts.rank, "steps_only": opts.steps_only}, opts.rank)
    frames = [f for f, _ in parts if len(f)]
    steps = sum(n for _, n in parts)
    if not frames:
        return pd.DataFrame(columns=["name", "count", "total_us", "kind"]), steps
    totals = pd.concat(frames, ignore_index=True).groupby("name", sort=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), kind=("kind", "first")).reset_index()
    return totals, steps


def _cpu_totals(db: TraceDB, rank: int | None) -> pd.DataFrame:
    merged = merge_stats(map_partitions(db, cpu_task, {"rank": rank, "by_rank": False}, rank), "pct_of_cpu_self_time")
    return merged[["name", "count", "total_us"]].assign(kind="cpu_op")


def compare_ray(a: TraceDB, b: TraceDB, options: CompareOptions | None = None) -> CompareResult:
    """:func:`~trace_report.analyses.compare.compute.compare` with one Ray task per partition of each side."""
    opts = options or CompareOptions()
    if opts.by not in ("kernel", "region"):
        raise InputError(f"unknown comparison level {opts.by!r} (levels: kernel, region)")
    if opts.by == "region":
        bopts = BreakdownSelection(rank=opts.rank)
        return regions_diff(breakdown_ray(a, bopts), breakdown_ray(b, bopts), opts)
    check_side(a.con, opts.rank, "A")
    check_side(b.con, opts.rank, "B")
    (ta, sa), (tb, sb) = _gpu_totals(a, opts), _gpu_totals(b, opts)
    cpu = ta.empty and tb.empty
    if cpu:
        ta, tb = _cpu_totals(a, opts.rank), _cpu_totals(b, opts.rank)
    return kernels_diff(ta, tb, sa, sb, opts, cpu=cpu)


def judged_ray(a: TraceDB, b: TraceDB, options: CompareOptions | None = None) -> Judged:
    """:func:`~trace_report.analyses.compare.gate.judged` with :func:`compare_ray`."""
    return judged(a, b, options, compare_ray)
