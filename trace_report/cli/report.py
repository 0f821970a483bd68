"""``trace-report report PATHS -o page.html``: one offline HTML page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import RankOpt, err, hash_ahead, load, output_given
from trace_report.cli.options import check_output as options_check_output
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt
from trace_report.errors import InputError
from trace_report.storage import Location, is_url, location, name_of, shown, write_file

InputsArg = Annotated[
    list[str],  # each a Path, or a URL kept as text (storage.location)
    typer.Argument(help="Run folders (traces/<run-id>), trace files (.json, .json.gz), directories of ranks, "
                        "tar archives, or one .duckdb database / exported Parquet dataset; local paths or "
                        "s3://, gs://, abfs:// URLs.", callback=hash_ahead, parser=location),
]


def default_report_path(first: Path) -> Path:
    """``<name>-report.html`` in the current folder, ``name`` the first input's without its trace
    suffixes (``run-42/`` -> ``run-42-report.html``, ``rank0.pt.trace.json.gz`` -> ``rank0-report.html``)."""
    name = Path(str(first).rstrip("/")).name or "trace"
    for suffix in (".gz", ".tar", ".json", ".trace", ".pt", ".duckdb", ".sqlite", ".ncu-rep", ".csv"):
        name = name.removesuffix(suffix)
    return Path.cwd() / f"{name or 'trace'}-report.html"


@contextmanager
def _written(output: Location) -> Iterator[Path]:
    """Where to write the page: ``output`` itself, or for a URL a scratch file uploaded to it once
    the page is complete (an object is replaced whole, in one upload)."""
    if not is_url(output):
        yield Path(output)
        return
    if not str(output).lower().endswith((".html", ".htm")):
        raise InputError(f"{shown(output)}: the report is an HTML page: give a URL ending in .html")
    from trace_report.archives import Scratch

    scratch = Scratch()
    try:
        page = scratch.path / name_of(output)
        yield page
        write_file(output, page)
    finally:
        scratch.cleanup()


@app.command("report")
def report_cmd(
    targets: InputsArg,
    output: Annotated[str | None, typer.Option(  # a Path, or a URL kept as text (storage.location)
        "--output", "-o", help="HTML file to write (self-contained, offline), or an s3://, gs://, abfs:// URL; "
        "default <first input's name>-report.html in the current folder.", callback=output_given,
        parser=location)] = None,
    title: Annotated[str | None, typer.Option(help="Page title.")] = None,
    step: Annotated[int | None, typer.Option(help="ProfilerStep of the timeline (default: the median step).")] = None,
    rank: RankOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Kernels in the top-kernels chart and table.")] = 20,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """One offline HTML page: run configuration, headline numbers, charts, kernel classes, advice.

    \b
    Example:
      trace-report report traces/run-42 -o run-42.html
    """
    from trace_report.present.charts.loading import preload
    from trace_report.present.report import ReportOptions, check_output, write_report

    if output is None:
        output = default_report_path(targets[0])
        options_check_output(output, list(targets))  # the same input/output check as an explicit -o
    preload()  # Altair and the Vega bundle, while the traces are read and analysed
    opts = ReportOptions(title=title, limit=limit, step=step, rank=rank, merge_runs=merge_runs)
    with _written(output) as page:
        check_output(page)  # before the traces are read
        with load(targets) as db:
            if run is not None:
                with db.scope(db.run(run).trace_ids):
                    report = write_report(db, [str(t) for t in targets], page, replace(opts, merge_runs=True))
            else:
                report = write_report(db, [str(t) for t in targets], page, opts)
    err.print(f"{output}: {len(report.sections)} sections, {len(report.charts)} charts", markup=False)
