"""Kernel launch statistics per GPU operation name or per launch (HTA's launch statistics).

Each GPU operation (kernel, memcpy, memset) is paired with the CPU runtime call that launched it
(same ``correlation``; the calls HTA counts, view ``launch_calls`` with ``hta_stats``:
``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaMemcpyAsync``, ``cudaMemsetAsync``, MTIA's
``runFunction``). Per launch: ``launch_us`` (the call's duration, HTA's ``cpu_duration``),
``gpu_dur_us`` (the operation's duration) and ``delay_us`` (operation start - call end, clipped to
0: HTA's ``launch_delay``), all µs, and HTA's outliers: ``runtime_outlier`` (``launch_us`` > 50
µs), ``delay_outlier`` (``delay_us`` > 100 µs) and ``short_kernel`` (``launch_us`` <= 50 µs and the
GPU ran shorter than the call). Per name: their count, mean, p50, p95 (linear interpolation,
numpy's default) and max, and the outlier counts. The queries are ``analyses/launches/launches.sql`` (the
rule, stated in full) and ``analyses/launches/launch_stats.sql`` over the view ``kernel_launch_pairs``
(``store/sql/views_launches.sql``).

Source: HTA ``hta/analyzers/cuda_kernel_analysis.py`` (CudaKernelAnalysis.cuda_kernel_launch_stats
and visualize_cuda_launch_kernel_info; defaults in ``hta/trace_analysis.py``). ``steps_only`` and
``hta_rounding`` select and round as HTA does (:mod:`trace_report.analyses.overlap`); with both,
the per-launch numbers equal HTA's (``tests/analyses/launches/test_launches.py``). ``all_launches`` also
counts what HTA leaves out: launches by ``cuLaunchKernel`` (triton), ``cuLaunchKernelEx`` and the
``hip*`` calls (AMD).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import HTA_ROUNDING, RANK, STEPS_ONLY, Command, Opt, ReportTable, computed

RUNTIME_CUTOFF_US = 50.0
"""HTA's ``runtime_cutoff`` default (hta/trace_analysis.py, get_cuda_kernel_launch_stats)."""
LAUNCH_DELAY_CUTOFF_US = 100.0
"""HTA's ``launch_delay_cutoff`` default (the same)."""

PER_LAUNCH_COLUMNS = ["rank", "correlation", "cat", "name", "launch_name", "launch_ts_us", "launch_us",
                      "gpu_dur_us", "delay_us", "runtime_outlier", "delay_outlier", "short_kernel"]
STAT_COLUMNS = [f"{what}_{stat}_us" for what in ("launch", "gpu_dur", "delay")
                for stat in ("mean", "p50", "p95", "max")]
PER_NAME_COLUMNS = ["rank", "cat", "name", "launches", *STAT_COLUMNS, "runtime_outliers", "delay_outliers",
                    "short_kernels"]


@dataclass(frozen=True)
class LaunchOptions:
    """``rank``: only that rank; ``per_launch``: one row per launch instead of per name;
    ``steps_only`` / ``hta_rounding``: as :class:`~trace_report.analyses.overlap.OverlapOptions`;
    ``all_launches``: count launches by calls HTA does not (cuLaunchKernel, hip*);
    ``runtime_cutoff_us`` / ``launch_delay_cutoff_us``: HTA's outlier thresholds (µs)."""

    rank: Annotated[int | None, RANK] = None
    per_launch: Annotated[bool, Opt("One row per launch (correlation id) instead of per GPU operation name.",
                                    ("--per-launch",))] = False
    steps_only: Annotated[bool, STEPS_ONLY] = True
    hta_rounding: Annotated[bool, HTA_ROUNDING] = False
    all_launches: Annotated[bool, Opt("Also count launches by cuLaunchKernel(Ex) (triton) and hip* calls, which HTA "
                                      "leaves out.", ("--all-launches",))] = False
    runtime_cutoff_us: Annotated[float, Opt("Launch calls longer than this are runtime outliers (HTA: 50).",
                                            ("--runtime-cutoff",), unit="us", min=0)] = RUNTIME_CUTOFF_US
    launch_delay_cutoff_us: Annotated[float, Opt("Launch-to-start delays longer than this are delay outliers "
                                                 "(HTA: 100).", ("--launch-delay-cutoff",), unit="us",
                                                 min=0)] = LAUNCH_DELAY_CUTOFF_US



COMMAND = Command(
    name="launches",
    options=LaunchOptions,
    compute="compute:launches",
    title="Kernel launches",
    help="Kernel launch statistics: per GPU operation name, the CPU launch call's duration (launch_*_us), the GPU "
         "duration (gpu_dur_*_us) and the launch-to-start delay (delay_*_us) as mean, p50, p95 and max, and HTA's "
         "outliers (get_cuda_kernel_launch_stats): runtime_outliers (launch call > --runtime-cutoff), "
         "delay_outliers (delay > --launch-delay-cutoff), short_kernels (the GPU ran shorter than a launch call "
         "within the cutoff). With --hta-rounding each launch equals HTA's; `trace-report hta launch` runs HTA "
         "itself.",
    examples=("trace-report launches traces/run-42 --limit 10",
              "trace-report launches traces/run-42 --per-launch -f csv -o launches.csv"),
    full_names=True,
    report=ReportTable("Kernel launches (by launches; trace-report launches)", notes=False),
)

__getattr__ = computed(__name__, ("launches", "launch_rows", "launch_query", "selection_notes"))
