"""``trace-report launches PATHS``: kernel launch statistics per GPU operation name or per launch
(HTA's get_cuda_kernel_launch_stats)."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    TargetsArg,
    load,
    notes,
)
from trace_report.cli.overlap import HtaRoundingOpt, StepsOnlyOpt
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("launches")
def launches_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    per_launch: Annotated[bool, typer.Option(
        "--per-launch", help="One row per launch (correlation id) instead of per GPU operation name.")] = False,
    all_launches: Annotated[bool, typer.Option(
        "--all-launches", help="Also count launches by cuLaunchKernel(Ex) (triton) and hip* calls, which HTA "
                               "leaves out.")] = False,
    runtime_cutoff: Annotated[float, typer.Option(
        "--runtime-cutoff", min=0,
        help="Launch calls longer than this many us are runtime outliers (HTA: 50).")] = 50.0,
    launch_delay_cutoff: Annotated[float, typer.Option(
        "--launch-delay-cutoff", min=0,
        help="Launch-to-start delays longer than this many us are delay outliers (HTA: 100).")] = 100.0,
    steps_only: StepsOnlyOpt = True,
    hta_rounding: HtaRoundingOpt = False,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Kernel launch statistics: per GPU operation name, the CPU launch call's duration
    (launch_*_us), the GPU duration (gpu_dur_*_us) and the launch-to-start delay (delay_*_us) as
    mean, p50, p95 and max, and HTA's outliers (get_cuda_kernel_launch_stats): runtime_outliers
    (launch call > --runtime-cutoff), delay_outliers (delay > --launch-delay-cutoff), short_kernels
    (the GPU ran shorter than a launch call within the cutoff). With --hta-rounding each launch
    equals HTA's; `trace-report hta launch` runs HTA itself.

    \b
    Examples:
      trace-report launches traces/run-42 --limit 10
      trace-report launches traces/run-42 --per-launch -f csv -o launches.csv
    """
    from trace_report.analyses.launches import LaunchOptions, launches
    from trace_report.present.tables import OutputOptions, emit

    opts = LaunchOptions(rank=rank, per_launch=per_launch, steps_only=steps_only, hta_rounding=hta_rounding,
                         all_launches=all_launches, runtime_cutoff_us=runtime_cutoff,
                         launch_delay_cutoff_us=launch_delay_cutoff)
    with load(targets) as db:
        per = per_run(db, lambda d: launches(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    emit(stacked(per, lambda r: r.frame, limit), OutputOptions(fmt, None, output, full_names, raw=raw),
         title="Kernel launches")
