"""Computation/communication overlap per rank, as HTA's ``get_comm_comp_overlap``.

For each trace (rank): ``comp_us`` = the union of computation kernels, ``comm_us`` = the union
of communication kernels (NCCL/RCCL/HCCL), ``overlap_us`` = the time both run at once, all in µs,
and ``comp_comm_overlap_pct`` = 100 * overlap_us / comm_us: the share of communication hidden
behind computation. Kernel kinds follow HTA's name patterns (view ``gpu_op_kinds``,
``store/sql/views_comm.sql``); the query is ``analyses/common/overlap.sql``
(:mod:`trace_report.analyses.common.comm_overlap`, which ``advise`` reads too).

Source: HTA ``hta/analyzers/communication_analysis.py`` (TraceAnalysis.get_comm_comp_overlap),
which reports 14.31% on ``hta_a100_ddp_nccl``. By default (``steps_only``) the GPU operations
are HTA's selection: those launched before the last ProfilerStep starts. HTA also rounds
fractional (ns-resolution) timestamps to whole µs, start up and end down; ``hta_rounding``
does the same and then gives HTA's number exactly; without it times are the trace's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import HTA_ROUNDING, RANK, STEPS_ONLY, Command, computed


@dataclass(frozen=True)
class OverlapOptions:
    """``rank``: only that rank; ``steps_only``: HTA's selection (drop the last ProfilerStep and
    kernels launched before the trace); ``hta_rounding``: HTA's whole-µs rounding."""

    rank: Annotated[int | None, RANK] = None
    steps_only: Annotated[bool, STEPS_ONLY] = True
    hta_rounding: Annotated[bool, HTA_ROUNDING] = False


COMMAND = Command(
    name="overlap",
    options=OverlapOptions,
    compute="compute:overlap",
    title="Computation/communication overlap",
    help="Computation/communication overlap per rank: union of compute kernels (comp_us), of NCCL kernels "
         "(comm_us), both at once (overlap_us), and overlap_us / comm_us in percent, as HTA's "
         "get_comm_comp_overlap.",
    examples=("trace-report overlap traces/run-42 --format json",),
)

__getattr__ = computed(__name__, ("OVERLAP_COLUMNS", "overlap"))
