"""The critical path of each step of each rank (``trace-report critical-path``), as HTA's.

HTA's lightweight critical path: the computation in :mod:`.compute`, the graph's rules in
:mod:`.graph`.

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method and
docs/cli.md are made from it (:mod:`trace_report.declare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import HTA_ROUNDING, RANK, Command, Opt, computed

DATA_LOADING = (r"enumerate\(DataLoader\)",)
"""The data-loading events by default (torch-tb-profiler's convention; HTA has none by default)."""


@dataclass(frozen=True)
class CriticalPathOptions:
    """``rank`` / ``step``: only that rank / ProfilerStep number; ``operators``: the command shows
    the operators on the path instead of the summary; ``top``: operators kept per step;
    ``data_loading``: regular expressions of data-loading event names (searched; their events get
    nodes, as HTA's ``data_load_events``; empty ones are dropped, so ``("",)`` is none);
    ``cuda_graphs``: count CUDA-graph launches in the queue; ``infer_syncs``: where a trace has no
    ``cuda_sync`` events, infer them from the sync calls
    (:func:`~trace_report.analyses.critical_path.load.inferred_syncs`; HTA adds no sync edge then);
    ``hta_rounding``: HTA's whole-us rounding of ns traces."""

    rank: Annotated[int | None, RANK] = None
    step: Annotated[int | None, Opt("Only this ProfilerStep number.", ("--step",))] = None
    operators: Annotated[bool, Opt("The operators with the most time on the path, per step, instead of the summary.",
                                   ("--operators",))] = False
    top: Annotated[int, Opt("Operators kept per step with --operators.", ("--top",), min=1)] = 10
    data_loading: Annotated[tuple[str, ...], Opt(
        "Regular expression of data-loading event names (repeatable; default: enumerate(DataLoader)); "
        "--data-loading '' for none, as HTA.", ("--data-loading",))] = DATA_LOADING
    cuda_graphs: Annotated[bool, Opt("Count cudaGraphLaunch as a launch (HTA does not: HTA issue #290).",
                                     ("--cuda-graphs/--no-cuda-graphs",))] = True
    infer_syncs: Annotated[bool, Opt(
        "Where a trace has no cuda_sync events, take cudaDeviceSynchronize / cudaStreamSynchronize calls as "
        "GPU -> CPU waits (HTA adds no edge then).", ("--infer-syncs/--no-infer-syncs",))] = True
    hta_rounding: Annotated[bool, HTA_ROUNDING] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_loading", tuple(p for p in self.data_loading if p))


COMMAND = Command(
    name="critical-path",
    options=CriticalPathOptions,
    compute="compute:critical_path_table",
    title="Critical path",
    help="Critical path per step and rank (HTA's critical_path_analysis: operator nesting on each CPU\n"
         "thread, launches, kernels in stream order, CUDA syncs): path_ms, and the ms on the path by what\n"
         "bounds it: cpu, gpu_compute, gpu_comm, launch_overhead (a launch onto an idle stream),\n"
         "kernel_gap (between kernels of a stream), data_loading, sync. step_ms is the step's length,\n"
         "span_ms the time to the last end of its events (GPU work launched in a step may end after it),\n"
         "which path_ms never exceeds.\n"
         "With --operators: the operators (and kernels) with the most time on the path.",
    examples=("trace-report critical-path traces/run-42",
              "trace-report critical-path traces/run-42 --step 5 --operators --top 20"),
    full_names=True,
    titles=(("operators", "Critical path: top operators"),),
)

__getattr__ = computed(__name__, ("KINDS", "OPERATOR_COLUMNS", "SUMMARY_COLUMNS", "CriticalPathResult",
                                  "CriticalPathTable", "critical_path", "critical_path_table"))
