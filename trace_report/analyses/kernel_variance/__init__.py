"""``trace-report kernel-variance``: how much each kernel's duration varies from call to call.

Per kernel name: calls, total, mean, standard deviation, coefficient of variation (CV = std /
mean), p50, p95 and max of ``dur_us``, and whether the kernel is *variable* by TraceLens' rule:
CV above 1 with at least 10 calls. A note gives the share of GPU time in variable kernels. A
kernel whose duration varies that much is worth a look in Perfetto: its calls differ in shape
(dynamic shapes, a tail batch), in what they wait for (a collective waiting for a peer), or in
contention (clocks, a concurrent stream).

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method,
docs/cli.md and the report's table are made from it (:mod:`trace_report.declare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.analyses.common.variance import CV_THRESHOLD, MIN_CALLS
from trace_report.declare import BY_RANK, RANK, Command, Opt, ReportTable


@dataclass(frozen=True)
class KernelVarianceOptions:
    """Options of ``kernel-variance``."""

    rank: Annotated[int | None, RANK] = None
    by_rank: Annotated[bool, BY_RANK] = False
    min_calls: Annotated[int, Opt("Kernels with fewer calls are never variable (TraceLens: 10).", min=1,
                                  unit="calls")] = MIN_CALLS
    cv_threshold: Annotated[float, Opt("A kernel is variable when its coefficient of variation (std / mean of "
                                       "dur_us) is above this (TraceLens: 1).", min=0)] = CV_THRESHOLD


COMMAND = Command(
    name="kernel-variance",
    options=KernelVarianceOptions,
    compute="compute:kernel_variance",
    title="Kernel duration variance",
    help="Per GPU kernel name: calls, total_us, mean_us, std_us (sample standard deviation), cv (std / mean), "
         "p50_us, p95_us (linear interpolation) and max_us of the kernel's duration, pct_of_gpu_time, and "
         "variable: cv above --cv-threshold with at least --min-calls calls (TraceLens' rule: CV > 1, 10 calls). "
         "A note gives the share of GPU time in variable kernels. Most GPU time first.",
    examples=("trace-report kernel-variance traces/run-42 --limit 10",
              "trace-report kernel-variance trace.json.gz --min-calls 100 -f csv -o variance.csv"),
    views=("kernel_variance_of",),
    full_names=True,
    report=ReportTable("Kernel duration variance (trace-report kernel-variance)"),
)
