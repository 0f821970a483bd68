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
    all_findings: Annotated[
        bool, typer.Option("--all", help="Also the findings that would save under 2% of step time.")
    ] = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
) -> None:
    """Recommendations with the measured numbers and thresholds behind them, biggest saving first:
    a verdict, then one block per finding (table; Markdown: a pull-request comment; CSV and JSON:
    every column).

    \b
    Example:
      trace-report advise traces/run-42 --by-rank
    """
    from trace_report.analyses.advise import advise
    from trace_report.present.findings import render_markdown, render_text, text_width
    from trace_report.present.format import Format
    from trace_report.present.tables import OutputOptions, emit, text_lists, write_text

    with load(targets) as db:
        result = advise(db, rank=rank, by_rank=by_rank, all_findings=all_findings)
    notes(result.notes)
    opts = OutputOptions(fmt, None, output)
    chosen = opts.resolve()
    if chosen is Format.table:
        text = render_text(result.frame, result.verdict, text_width())
    elif chosen is Format.markdown:
        text = render_markdown(result.frame, result.verdict)
    else:
        emit(text_lists(result.frame, chosen, ["ranks"]), opts, title="Findings")
        return
    write_text(output, text)
