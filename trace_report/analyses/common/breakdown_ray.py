"""The step breakdown on Ray (``--engine ray``): the region rows of each partition's traces
(:mod:`trace_report.analyses.common.distributed`). The rows kept beside a database
(:mod:`~trace_report.analyses.common.breakdown_kept`) are read on the driver and only the other
traces go to tasks; their rows are kept in turn. ``breakdown --engine ray`` and ``compare --by
region --engine ray`` read it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa

from trace_report.analyses.common.breakdown_kept import RegionPart, empty_part, parts_from_arrow, parts_to_arrow
from trace_report.analyses.common.breakdown_regions import (
    KEPT,
    BreakdownResult,
    BreakdownSelection,
    breakdown_from,
    breakdown_traces,
    compute_region_parts,
    merge_region_tables,
    step_spans,
)
from trace_report.analyses.common.distributed import map_partitions
from trace_report.analyses.common.selection import selected_traces, trace_ids
from trace_report.store.tracedb import TraceDB


def regions_task(db: TraceDB, p: dict[str, Any]) -> dict[int, RegionPart]:
    """Per trace of the partition: per (window, region) wall/GPU/idle/CPU µs and kernels, and the
    facts for the notes."""
    return compute_region_parts(db.con, trace_ids(selected_traces(db.con, None)))


def breakdown_ray(db: TraceDB, selection: BreakdownSelection | None = None) -> BreakdownResult:
    """:func:`~trace_report.analyses.common.breakdown_regions.step_breakdown` with one Ray task per
    partition."""
    opts = selection or BreakdownSelection()
    traces = breakdown_traces(db.con, opts)
    ids = trace_ids(traces)

    def in_tasks(_con: object, missing: list[int]) -> pa.Table:
        partials = map_partitions(db, regions_task, {}, trace_ids=tuple(missing))
        got = {t: part for parts in partials for t, part in parts.items()}
        # a trace without events has no partition (an exported dataset holds no folder for it): its
        # part is what the local engine computes for it, no window and no GPU activity
        return parts_to_arrow({t: got.get(t) or empty_part(t) for t in missing})

    # the same kind and key as the local engine's; only traces without kept rows go to Ray
    parts = parts_from_arrow(replace(KEPT, compute=in_tasks).rows(db.con, ids), ids)
    table, facts = merge_region_tables([parts[t] for t in ids])
    return breakdown_from(table, facts, traces, opts, step_spans(db.con, ids))
