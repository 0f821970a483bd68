"""``breakdown`` on Ray (``--engine ray``): the region rows of each partition's traces in Ray
tasks (:mod:`trace_report.analyses.common.breakdown_ray`), shown as the local engine shows them."""

from __future__ import annotations

from trace_report.analyses.breakdown import BreakdownOptions
from trace_report.analyses.breakdown.compute import BreakdownResult, breakdown_shown
from trace_report.analyses.common.breakdown_ray import breakdown_ray
from trace_report.analyses.common.result import Result
from trace_report.store.tracedb import TraceDB


def breakdown_table_ray(db: TraceDB, options: BreakdownOptions) -> BreakdownResult | Result:
    """:func:`~trace_report.analyses.breakdown.compute.breakdown_table` with
    :func:`~trace_report.analyses.common.breakdown_ray.breakdown_ray` (the step time per rank
    still read here)."""
    return breakdown_shown(db, options, breakdown_ray)
