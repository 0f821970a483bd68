"""``trace-report overlap PATHS``: computation/communication overlap per rank (HTA's definition)."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, LimitOpt, OutputOpt, RankOpt, RawOpt, TargetsArg, load, notes
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked

StepsOnlyOpt = Annotated[bool, typer.Option(
    "--steps-only/--all-steps",
    help="HTA's selection (GPU work launched before the last of 2+ ProfilerSteps), or every GPU operation.")]
HtaRoundingOpt = Annotated[bool, typer.Option(
    "--hta-rounding", help="Round fractional timestamps to whole us as HTA does (start up, end down).")]


@app.command("overlap")
def overlap_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    steps_only: StepsOnlyOpt = True,
    hta_rounding: HtaRoundingOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Computation/communication overlap per rank: union of compute kernels (comp_us), of NCCL
    kernels (comm_us), both at once (overlap_us), and overlap_us / comm_us in percent, as HTA's
    get_comm_comp_overlap.

    \b
    Example:
      trace-report overlap traces/run-42 --format json
    """
    from trace_report.analyses.overlap import OverlapOptions, overlap
    from trace_report.present.tables import OutputOptions, emit

    with load(targets) as db:
        opts = OverlapOptions(rank=rank, steps_only=steps_only, hta_rounding=hta_rounding)
        per = per_run(db, lambda d: overlap(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    emit(stacked(per, lambda r: r.frame, limit), OutputOptions(fmt, None, output, raw=raw),
         title="Computation/communication overlap")
