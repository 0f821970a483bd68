"""The computation of ``breakdown`` (its declaration: the package's ``__init__``): the step
breakdown by region of :mod:`trace_report.analyses.common.breakdown_regions` (what the columns
mean and how time is attributed; ``advise`` and ``compare`` read it there), shown with the
command's options: the step time per rank instead with ``stragglers``, the spread between ranks
as notes with ``by_rank``."""

from __future__ import annotations

from collections.abc import Callable

from trace_report.analyses.breakdown import BreakdownOptions
from trace_report.analyses.common.breakdown_regions import (  # noqa: F401  (the names breakdown's callers import from here)
    BEFORE_FIRST_STEP,
    BREAKDOWN_COLUMNS,
    KEPT,
    REGIONS,
    STEP_SPAN_COLUMNS,
    BreakdownResult,
    BreakdownSelection,
    breakdown_from,
    breakdown_traces,
    compute_region_parts,
    keep_region_rows,
    kernel_regions,
    merge_region_tables,
    region_table,
    selected_traces,
    step_breakdown,
    step_spans,
    views_read,
)
from trace_report.analyses.common.result import Result
from trace_report.analyses.common.stragglers import StragglerOptions, stragglers
from trace_report.store.tracedb import TraceDB


def selection(options: BreakdownOptions) -> BreakdownSelection:
    """The traces and groups the options ask for (all but ``stragglers``)."""
    return BreakdownSelection(by_step=options.by_step, rank=options.rank, by_rank=options.by_rank,
                              trace_ids=options.trace_ids)


def breakdown(db: TraceDB, options: BreakdownOptions | None = None) -> BreakdownResult:
    """Wall, GPU-kernel, GPU-idle and CPU time per region:
    :func:`~trace_report.analyses.common.breakdown_regions.step_breakdown` of the options'
    selection (its docstring gives the columns and the errors)."""
    return step_breakdown(db, selection(options or BreakdownOptions()))


def breakdown_table(db: TraceDB, options: BreakdownOptions) -> BreakdownResult | Result:
    """``breakdown`` as the command shows it (the declaration's compute): :func:`breakdown_shown`
    with :func:`~trace_report.analyses.common.breakdown_regions.step_breakdown`."""
    return breakdown_shown(db, options, step_breakdown)


def breakdown_shown(db: TraceDB, options: BreakdownOptions,
                    regions: Callable[[TraceDB, BreakdownSelection], BreakdownResult]) -> BreakdownResult | Result:
    """With ``stragglers``: the step time per rank (:func:`~trace_report.analyses.common.stragglers.stragglers`);
    else the regions (``regions(db, selection(options))``), and with ``by_rank`` on several ranks
    the spread of step time between ranks as notes."""
    if options.stragglers:
        return stragglers(db, StragglerOptions(rank=options.rank))
    result = regions(db, selection(options))
    spread = stragglers(db, StragglerOptions()).notes if options.by_rank and len(db.ranks()) > 1 else []
    notes = [f"stragglers: {line} (--stragglers for every rank)" for line in spread if line.startswith("step ")]
    return BreakdownResult(result.frame, result.notes + notes)
