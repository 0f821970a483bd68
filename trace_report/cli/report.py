"""``trace-report report PATHS -o page.html``: one offline HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import RankOpt, err, hash_ahead, load, output_given
from trace_report.cli.registry import app

InputsArg = Annotated[
    list[Path],
    typer.Argument(help="Run folders (traces/<run-id>), trace files (.json, .json.gz), directories of ranks, "
                        "tar archives, or one .duckdb database / exported Parquet dataset.", callback=hash_ahead),
]


@app.command("report")
def report_cmd(
    targets: InputsArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write (self-contained, offline).",
                                                callback=output_given)],
    title: Annotated[str | None, typer.Option(help="Page title.")] = None,
    step: Annotated[int | None, typer.Option(help="ProfilerStep of the timeline (default: the median step).")] = None,
    rank: RankOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Kernels in the top-kernels chart and table.")] = 20,
) -> None:
    """One offline HTML page: run configuration, headline numbers, charts, kernel classes, advice.

    \b
    Example:
      trace-report report traces/run-42 -o run-42.html
    """
    from trace_report.present.report import ReportOptions, check_output, write_report

    check_output(output)  # before the traces are read
    with load(targets) as db:
        report = write_report(db, [str(t) for t in targets], output,
                              ReportOptions(title=title, limit=limit, step=step, rank=rank))
    err.print(f"{output}: {len(report.sections)} sections, {len(report.charts)} charts", markup=False)
