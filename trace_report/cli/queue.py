"""``trace-report queue PATHS``: CUDA launch queue length per rank and stream (HTA's definition)."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, LimitOpt, OutputOpt, RankOpt, RawOpt, TargetsArg, load, notes
from trace_report.cli.overlap import HtaRoundingOpt, StepsOnlyOpt
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("queue")
def queue_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    max_queue_length: Annotated[int, typer.Option(
        "--max-queue-length", min=1, help="Launches that fill a stream's queue (CUDA: 1024).")] = 1024,
    steps_only: StepsOnlyOpt = True,
    hta_rounding: HtaRoundingOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Launch queue length per rank and stream: mean and max outstanding launches (per change, as
    HTA's get_queue_length_summary) and blocked_us, the time the queue was full and the CPU
    blocked (HTA's get_time_spent_blocked_on_full_queue).

    \b
    Example:
      trace-report queue traces/run-42 --max-queue-length 8
    """
    from trace_report.analyses.queue import QueueOptions, queue_length
    from trace_report.present.tables import OutputOptions, emit

    with load(targets) as db:
        opts = QueueOptions(rank=rank, max_queue_length=max_queue_length, steps_only=steps_only,
                            hta_rounding=hta_rounding)
        per = per_run(db, lambda d: queue_length(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    emit(stacked(per, lambda r: r.frame, limit), OutputOptions(fmt, None, output, raw=raw), title="CUDA launch queue")
