"""``trace-report advise PATHS``: findings with the numbers and thresholds behind them."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    OutputOpt,
    RankOpt,
    TargetsArg,
    load,
    notes,
)
from trace_report.cli.registry import app


@app.command("advise")
def advise_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: Annotated[bool, typer.Option("--by-rank", help="One row per rank and finding.")] = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
) -> None:
    """Recommendations with the measured numbers and thresholds behind them; silent (a note, no rows)
    when nothing crosses a threshold.

    \b
    Example:
      trace-report advise traces/run-42 --by-rank
    """
    from trace_report.analyses.advise import advise
    from trace_report.present.format import Format
    from trace_report.present.tables import OutputOptions, emit, text_lists

    with load(targets) as db:
        result = advise(db, rank=rank, by_rank=by_rank)
    notes(result.notes)
    frame = text_lists(result.frame, OutputOptions(fmt, None, output).resolve(), ["ranks"])
    opts = OutputOptions(fmt, None, output)
    if frame.empty and opts.resolve() is Format.table and output is None:
        return  # nothing crossed a threshold: the note says what was checked
    emit(frame, opts, title="Findings")
