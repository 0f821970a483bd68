"""``trace-report collectives PATHS``: NCCL collectives per kind and message size."""

from __future__ import annotations

from trace_report.cli.options import ByRankOpt, FormatOpt, LimitOpt, OutputOpt, RankOpt, RawOpt, TargetsArg, load, notes
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("collectives")
def collectives_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Collectives per kind and message size: count, kernel time, wait_us (the time a rank's kernel
    waited for its last peer's; all ranks given), transfer_us (the kernel time after it), and
    algbw and busbw in GB/s over the transfer time with nccl-tests' factors; bw_basis says
    'kernel (wait unknown)' where, without the peers' traces, they are over the whole kernel.

    \b
    Example:
      trace-report collectives traces/ddp-run/ --by-rank
    """
    from trace_report.analyses.collectives import CollectivesOptions, collectives
    from trace_report.present.tables import OutputOptions, emit

    with load(targets) as db:
        opts = CollectivesOptions(rank=rank, by_rank=by_rank)
        per = per_run(db, lambda d: collectives(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    emit(stacked(per, lambda r: r.frame, limit), OutputOptions(fmt, None, output, raw=raw), title="Collectives")
