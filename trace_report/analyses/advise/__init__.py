"""Findings ranked by what fixing them would save (docs/analysis.md, "advise").

Each check (:mod:`trace_report.analyses.advise.checks`) reads one rank's numbers from the SQL views
that ``breakdown``, ``flags``, ``overlap`` and ``top-kernels`` read, compares a value with a
threshold (:class:`Thresholds`, the one place they live, each with its reason and source) and
estimates ``est_saving_ms_per_step``:

- GPU idle, split by cause (view ``gpu_idle_by_cause``): every period in which no GPU operation
  ran, inside the ProfilerSteps (the first-to-last GPU op span of a trace without them), goes to
  data loading for the part the DataLoader was running, then to the synchronising call the CPU
  was blocked in when the GPU ran out of work (``host_sync``), to the launches when the next
  operation was launched only after the GPU went idle, or, at a window's start, after the window
  began (``launch_bound``, or ``cpu_bound`` when the CPU's work between launches sets the pace:
  with a deep launch queue, the part of those periods before the next launch call began), else
  to ``other``. ``data_loading``, ``host_sync``, ``launch_bound`` and ``cpu_bound`` save their
  idle time; ``low_gpu_utilization`` (a symptom) saves the idle time no finding explains, and is
  not judged when the windows recorded almost nothing (view ``window_recorded``).
- GPU work: ``exposed_communication`` saves the communication time not overlapped with
  computation (HTA's overlap, the complement); ``layout_conversions`` the conversion kernels'
  time; ``pageable_memcpy`` half the pageable copy time (pinned copies ~2x faster);
  ``fp32_without_tf32`` / ``no_tensor_cores`` half the GEMM/convolution time on CUDA cores.
  These are upper bounds where the GPU is not the bottleneck. Every GPU-time figure counts the
  GPU operations launched inside the windows it is divided by (view ``window_gpu_ops``, step
  time's rule: :mod:`trace_report.analyses.advise.window_gpu`), so none is inflated by work
  launched before the first step or after the last.
- GPU-bound steps (:mod:`trace_report.analyses.advise.gpu_bound`): ``gpu_bound`` (GPU busy
  >= 80% of step time) saves what fusing the chains of elementwise/norm/copy kernels between
  GEMMs would, ``eager_softmax`` half the softmax kernels' time (fused attention instead).
- ``memory_near_capacity`` has no time saving (NaN) and is listed after the ranked findings.
- The rules of other tools (nsys analyze, PyTorch's pattern matcher, HTA/TraceLens):
  :mod:`trace_report.analyses.advise.anchors`, with their thresholds and savings.

Findings are sorted by saving, ``low_gpu_utilization`` (a symptom) after every finding with a
saving, whatever its own; those under ``min_saving_pct`` (2%) of step time are left out unless
``all_findings``. :attr:`AdviceResult.verdict` names the biggest. Advice follows the trace: a
compiled run (Inductor kernels, torch.compile's runtime events) is told CUDA graphs
(``mode='reduce-overhead'``), not torch.compile; straggler advice needs several ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import RANK, Command, Opt, computed

__all__ = ["ADVICE_COLUMNS", "AdviceResult", "AdviseOptions", "Thresholds", "advise", "memory_peaks"]


@dataclass(frozen=True)
class AdviseOptions:
    """Options of ``advise`` (:func:`advise`'s keyword arguments, the thresholds left as they are)."""

    rank: Annotated[int | None, RANK] = None
    by_rank: Annotated[bool, Opt("One row per rank and finding.", ("--by-rank",))] = False
    all_findings: Annotated[bool, Opt("Also the findings that would save under 2% of step time.", ("--all",))] = False


COMMAND = Command(
    name="advise",
    options=AdviseOptions,
    compute="compute:advise_findings",
    title="Findings",
    help="Recommendations with the measured numbers and thresholds behind them, biggest saving first:\n"
         "a verdict, then one block per finding (table; Markdown: a pull-request comment; CSV and JSON:\n"
         "every column).",
    examples=("trace-report advise traces/run-42 --by-rank",),
    write="trace_report.present.writers:findings_output",
    limit=False,
)

__getattr__ = computed(__name__, ("ADVICE_COLUMNS", "AdviceResult", "Thresholds", "advise", "advise_findings",
                                  "memory_peaks"))
