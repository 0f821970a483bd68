"""``trace-report critical-path PATHS``: the critical path of each step of each rank (HTA's
lightweight critical path), by what bounds it, or the operators with the most time on it."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    FullNamesOpt,
    HtaRoundingOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    TargetsArg,
    load,
    notes,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("critical-path")
def critical_path_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    step: Annotated[int | None, typer.Option("--step", help="Only this ProfilerStep number.")] = None,
    operators: Annotated[bool, typer.Option(
        "--operators", help="The operators with the most time on the path, per step, instead of the summary.")] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="Operators kept per step with --operators.")] = 10,
    data_loading: Annotated[list[str] | None, typer.Option(
        "--data-loading", help="Regular expression of data-loading event names (repeatable; default: "
                               "enumerate(DataLoader)); --data-loading '' for none, as HTA.")] = None,
    cuda_graphs: Annotated[bool, typer.Option(
        "--cuda-graphs/--no-cuda-graphs",
        help="Count cudaGraphLaunch as a launch (HTA does not: HTA issue #290).")] = True,
    infer_syncs: Annotated[bool, typer.Option(
        "--infer-syncs/--no-infer-syncs",
        help="Where a trace has no cuda_sync events, take cudaDeviceSynchronize / cudaStreamSynchronize calls as "
             "GPU -> CPU waits (HTA adds no edge then).")] = True,
    hta_rounding: HtaRoundingOpt = False,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Critical path per step and rank (HTA's critical_path_analysis: operator nesting on each CPU
    thread, launches, kernels in stream order, CUDA syncs): path_ms, and the ms on the path by what
    bounds it: cpu, gpu_compute, gpu_comm, launch_overhead (a launch onto an idle stream),
    kernel_gap (between kernels of a stream), data_loading, sync. step_ms is the step's length,
    span_ms the time to the last end of its events (GPU work launched in a step may end after it),
    which path_ms never exceeds.
    With --operators: the operators (and kernels) with the most time on the path.

    \b
    Examples:
      trace-report critical-path traces/run-42
      trace-report critical-path traces/run-42 --step 5 --operators --top 20
    """
    from trace_report.analyses.critical_path import DATA_LOADING, CriticalPathOptions, critical_path
    from trace_report.present.tables import OutputOptions, emit

    patterns = DATA_LOADING if data_loading is None else tuple(p for p in data_loading if p)
    opts = CriticalPathOptions(rank=rank, step=step, data_loading=patterns, cuda_graphs=cuda_graphs,
                               infer_syncs=infer_syncs, hta_rounding=hta_rounding, top=top)
    with load(targets) as db:
        per = per_run(db, lambda d: critical_path(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    table = (lambda r: r.operators) if operators else (lambda r: r.frame)
    title = "Critical path: top operators" if operators else "Critical path"
    emit(stacked(per, table, limit), OutputOptions(fmt, None, output, full_names, raw=raw), title=title)
