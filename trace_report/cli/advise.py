"""``trace-report advise PATHS``: findings with the numbers and thresholds behind them."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    TargetsArg,
    load,
    notes,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("advise")
def advise_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: Annotated[bool, typer.Option("--by-rank", help="One row per rank and finding.")] = False,
    all_findings: Annotated[
        bool, typer.Option("--all", help="Also the findings that would save under 2% of step time.")
    ] = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
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
        per = per_run(db, lambda d: advise(d, rank=rank, by_rank=by_rank, all_findings=all_findings),
                      run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    opts = OutputOptions(fmt, None, output, raw=raw)
    chosen = opts.resolve()
    if chosen in (Format.table, Format.markdown):
        render = render_text if chosen is Format.table else render_markdown
        width = (text_width(),) if chosen is Format.table else ()
        parts = [(label, render(r.frame, r.verdict, *width)) for label, r in per.results]
        heading = "== run {} ==\n" if chosen is Format.table else "## Run `{}`\n\n"
        write_text(output, "\n".join(heading.format(label) + text if per.several else text for label, text in parts))
        return
    emit(text_lists(stacked(per, lambda r: r.frame), chosen, ["ranks"]), opts, title="Findings")
