"""Per-module attribution (TraceLens' nn.Module tree): which layer costs what.

Each call of an ``nn.Module`` (python_function events named ``nn.Module: <Class>_<n>``, written
when the trace was profiled with ``with_stack=True``; ``with_modules=True`` alone records none in
eager mode, torch 2.14) or of a
``## name ##`` annotation (``record_function("## forward ##")``, inductor's
``## Call CompiledFxGraph ... ##``) gets a place in the module tree (``path``: the enclosing
modules on its thread, outermost first, joined by ``.``; ``depth``: the number of names), its CPU
time, the GPU operations its thread launched during it (correlation id) and the FLOP of its
operators that have shapes (view ``op_costs``, the operator cost model). The rule, stated in full, is
``analyses/modules/modules.sql``; the tree is built as TraceLens builds it (``TraceLens/Trace2Tree/
trace_to_tree.py``, ``build_host_call_stack_tree``: a stack per (pid, tid), nn.Module events
are python_function events named ``nn.Module:``; ``TreePerf/tree_perf.py``,
``build_nn_module_latency_tree``: a module's GPU events are those of its subtree). The calls
are found by sorted passes per thread (:mod:`trace_report.analyses.modules.tree`), O(n log n).

The calls of one path are summed: per path (and per ProfilerStep with ``by_step``) ``calls``,
``cpu_us``, ``gpu_ops``, ``gpu_us``, ``flop``. Times in µs; ``flop`` is NULL where no operator
of the module has a FLOP estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import RANK, Command, Opt, ReportTable, computed

COLUMNS = ["rank", "step", "module", "depth", "kind", "calls", "steps", "cpu_us", "gpu_ops", "gpu_us",
           "flop", "path"]
"""The columns of :func:`modules` (``step`` only with ``by_step``, ``steps`` only without it)."""

CLASS_SQL = "CASE WHEN kind = 'module' THEN regexp_replace(name, '_[0-9]+$', '') ELSE name END"
"""A module call's class: an nn.Module's name without the instance number PyTorch's profiler
appends (``nn.Module: <Class>_<n>``, ``<n>`` counting the instances of the class); an
annotation's name as it is."""

PROFILE_HINT = ("profile with torch.profiler.profile(with_stack=True) to record nn.Module events "
                "(with_modules=True alone records none in eager mode; trace-report capture records them)")


@dataclass(frozen=True)
class ModuleOptions:
    """``depth``: keep the tree down to this depth (1 = the outermost modules; None = all);
    ``rank``: only that rank; ``by_step``: one row per path and ProfilerStep (else summed over the
    whole trace); ``by_class``: one row per module class (:data:`CLASS_SQL`) instead of per path."""

    depth: Annotated[int | None, Opt("Show the module tree down to this depth (1: the outermost modules).",
                                     min=1)] = None
    rank: Annotated[int | None, RANK] = None
    by_step: Annotated[bool, Opt("One row per module and ProfilerStep (else summed over the trace).")] = False
    by_class: Annotated[bool, Opt("One row per module class: the calls of every instance summed, wherever it is "
                                  "in the tree (Qwen2RMSNorm for Qwen2RMSNorm_0 .. _23).")] = False


COMMAND = Command(
    name="modules",
    options=ModuleOptions,
    compute="compute:modules",
    title="Modules",
    help="Per nn.Module, as a tree: calls, CPU time (cpu_us, inclusive), the GPU operations launched on its "
         "thread during it (gpu_ops, gpu_us; by correlation id) and the FLOP of its operators that have shapes "
         "(flop). Modules come from the nn.Module events of a trace profiled with with_stack=True, as capture "
         "records them (and '## name ##' record_function ranges); path is the enclosing modules, outermost first "
         "(TraceLens' nn.Module tree).",
    examples=("trace-report modules traces/run-42 --depth 3",
              "trace-report modules traces/run-42 --by-step -f csv -o modules.csv"),
    report=ReportTable("nn.Module tree, two levels (trace-report modules)", options={"depth": 2}, notes=False),
)

__getattr__ = computed(__name__, ("modules", "module_query"))
