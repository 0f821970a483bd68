"""``trace-report breakdown PATHS``: step time per region."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    ByRankOpt,
    FormatOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    TargetsArg,
    load,
    notes,
)
from trace_report.cli.registry import app


@app.command("breakdown")
def breakdown_cmd(
    targets: TargetsArg,
    by_step: Annotated[bool, typer.Option("--by-step", help="One group of rows per ProfilerStep.")] = False,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    stragglers: Annotated[bool, typer.Option(
        "--stragglers", help="Step time per rank instead: behind the fastest rank, slowest rank per step.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Wall, GPU-kernel, GPU-idle and CPU time per region (forward, loss, backward, optimizer_step,
    data_loading, other) of each ProfilerStep; kernels belong to the region of their launch.
    With --by-rank, the spread of step time between ranks is noted; --stragglers lists it per rank.

    Example: trace-report breakdown traces/ddp-run/ --stragglers
    """
    from trace_report.analyses.regions import BreakdownOptions, breakdown
    from trace_report.analyses.stragglers import StragglerOptions
    from trace_report.analyses.stragglers import stragglers as straggler_rows
    from trace_report.present.tables import OutputOptions, emit

    with load(targets) as db:
        if stragglers:
            result = straggler_rows(db, StragglerOptions(rank=rank))
            notes(result.notes)
            emit(result.frame, OutputOptions(fmt, limit, output), title="Step time per rank")
            return
        result = breakdown(db, BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank))
        spread = straggler_rows(db, StragglerOptions()).notes if by_rank and len(db.ranks()) > 1 else []
    notes(result.notes + [f"stragglers: {line} (--stragglers for every rank)" for line in spread
                          if line.startswith("step ")])
    emit(result.frame, OutputOptions(fmt, limit, output), title="Step breakdown by region")
