"""``trace-report collectives PATHS``: NCCL collectives per kind and message size."""

from __future__ import annotations

from trace_report.cli.options import ByRankOpt, FormatOpt, LimitOpt, OutputOpt, RankOpt, TargetsArg, load, notes
from trace_report.cli.registry import app


@app.command("collectives")
def collectives_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Collectives per kind and message size: count, kernel time, algbw and busbw in GB/s with
    nccl-tests' factors, and wait_us, the skew a rank waited for its last peer (all ranks given).

    \b
    Example:
      trace-report collectives traces/ddp-run/ --by-rank
    """
    from trace_report.analyses.collectives import CollectivesOptions, collectives
    from trace_report.present.tables import OutputOptions, emit

    with load(targets) as db:
        result = collectives(db, CollectivesOptions(rank=rank, by_rank=by_rank))
    notes(result.notes)
    emit(result.frame, OutputOptions(fmt, limit, output), title="Collectives")
