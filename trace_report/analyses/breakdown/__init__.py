"""Step breakdown by region: forward, loss, backward, optimizer_step, data_loading, other.

``trace-report breakdown``; what the columns mean and how time is attributed:
:mod:`trace_report.analyses.common.breakdown_regions` (``advise`` and ``compare`` read it there too).

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method and
docs/cli.md are made from it (:mod:`trace_report.declare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import BY_RANK, RANK, Command, Opt, computed


@dataclass(frozen=True)
class BreakdownOptions:
    """``by_step``: one group of rows per step (else summed over steps); ``rank``: only that rank;
    ``by_rank``: one group per rank (else summed over ranks); ``stragglers``: the step time per
    rank instead (:mod:`trace_report.analyses.common.stragglers`); ``trace_ids``: only these traces
    (one run of several)."""

    by_step: Annotated[bool, Opt("One group of rows per ProfilerStep.", ("--by-step",))] = False
    rank: Annotated[int | None, RANK] = None
    by_rank: Annotated[bool, BY_RANK] = False
    stragglers: Annotated[bool, Opt("Step time per rank instead: behind the fastest rank, slowest rank per step.",
                                    ("--stragglers",))] = False
    trace_ids: Annotated[tuple[int, ...] | None, Opt("Only these traces (one run of several).", cli=False)] = None


COMMAND = Command(
    name="breakdown",
    options=BreakdownOptions,
    compute="compute:breakdown_table",
    title="Step breakdown by region",
    help="Wall, GPU-kernel, GPU-idle and CPU time per region (forward, loss, backward, optimizer_step,\n"
         "data_loading, other) of each ProfilerStep; kernels belong to the region of their launch.\n"
         "With --by-rank, the spread of step time between ranks is noted; --stragglers lists it per rank.\n"
         "With --engine ray the regions of each trace are computed in a Ray task and summed here\n"
         "(--stragglers and the spread note still read the database on this machine).\n"
         "On a database, each trace's rows are kept beside it (DB.events/derived/, safe to delete) by\n"
         "the ingest of a trace of 1,000,000 events or more, else by the first run, and later runs read\n"
         "them; a re-ingested trace or another version computes them again.",
    examples=("trace-report breakdown traces/ddp-run/ --stragglers",
              "trace-report breakdown runs.duckdb --engine ray"),
    ray="ray:breakdown_table_ray",
    titles=(("stragglers", "Step time per rank"),),
)

__getattr__ = computed(__name__, (
    "BEFORE_FIRST_STEP", "BREAKDOWN_COLUMNS", "KEPT", "REGIONS", "STEP_SPAN_COLUMNS", "BreakdownResult", "breakdown",
    "breakdown_from", "breakdown_shown", "breakdown_table", "breakdown_traces", "compute_region_parts",
    "keep_region_rows", "kernel_regions", "merge_region_tables", "region_table", "selected_traces", "step_spans",
    "views_read"))
