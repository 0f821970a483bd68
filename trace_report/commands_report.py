"""Commands ``report``, ``compare`` and ``export`` (registered in ``cli.py``'s ``COMMAND_MODULES``).

Each opens its inputs with :func:`~trace_report.analyze.runs.open_runs` (traces, run folders,
databases, exported datasets; the run tables attached), calls one library function and writes
its output; notes go to stderr as ``note: ...``.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from trace_report.analyze.compare import CompareOptions, compare
from trace_report.analyze.export import export_parquet
from trace_report.cli_common import (
    FormatOpt,
    LimitOpt,
    OutputOpt,
    err,
    load,
)
from trace_report.output import OutputOptions, emit

InputsArg = Annotated[
    list[Path],
    typer.Argument(help="Run folders (traces/<run-id>), trace files (.json, .json.gz), directories of ranks, "
                        "tar archives, or one .duckdb database / exported Parquet dataset."),
]
RankOpt = Annotated[int | None, typer.Option("--rank", help="Only this rank.")]


def _notes(notes: list[str]) -> None:
    for note in notes:
        err.print(f"note: {note}", markup=False)


def report_cmd(
    targets: InputsArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write (self-contained, offline).")],
    title: Annotated[str | None, typer.Option(help="Page title.")] = None,
    step: Annotated[int | None, typer.Option(help="ProfilerStep of the timeline (default: the median step).")] = None,
    rank: RankOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Kernels in the top-kernels chart and table.")] = 20,
) -> None:
    """One offline HTML page: run configuration, headline numbers, charts, kernel classes, advice."""
    from trace_report.report import ReportOptions, check_output, write_report

    check_output(output)  # before the traces are read
    with load(targets) as db:
        report = write_report(db, [str(t) for t in targets], output,
                              ReportOptions(title=title, limit=limit, step=step, rank=rank))
    err.print(f"{output}: {len(report.sections)} sections, {len(report.charts)} charts", markup=False)


class Level(str, enum.Enum):
    kernel = "kernel"
    region = "region"


def compare_cmd(
    a: Annotated[Path, typer.Argument(help="A (the reference): a trace, run folder, database or dataset.")],
    b: Annotated[Path, typer.Argument(help="B (compared with A), of any of the same kinds.")],
    by: Annotated[Level, typer.Option("--by", help="kernel: per GPU operation name; region: per step region.")]
    = Level.kernel,
    rank: RankOpt = None,
    per_step: Annotated[bool, typer.Option("--per-step", help="Counts and times per ProfilerStep of each side.")]
    = False,
    steps_only: Annotated[bool, typer.Option(
        "--steps-only", help="kernel: only GPU operations launched inside a ProfilerStep (HTA TraceDiff's rule).")]
    = False,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write a chart (.html, .png or .svg).")] = None,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Kernel- or region-level differences B - A (time, count, share; new and vanished kernels),
    largest time difference first."""
    opts = CompareOptions(by=by.value, rank=rank, per_step=per_step, steps_only=steps_only)
    with load([a]) as da, load([b]) as db:
        result = compare(da, db, opts)
    _notes([f"A = {a}", f"B = {b}", *result.notes])
    if chart is not None:
        from trace_report.charts import compare_chart, save_chart

        save_chart(compare_chart(result.frame, limit=limit or 20), chart)
    emit(result.frame, OutputOptions(fmt, limit, output), title=f"B - A by {by.value}")


def export_cmd(
    target: Annotated[list[Path], typer.Argument(
        help="A .duckdb database written by 'trace-report ingest' (or traces / run folders to export).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to create for the Parquet dataset.")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing folder.")] = False,
) -> None:
    """Write the schema as a Parquet dataset partitioned by run and rank (Hive layout:
    events/run_id=.../rank=.../*.parquet, traces.parquet, ...), atomically."""
    with load(target) as db:
        report = export_parquet(db, output, overwrite=overwrite)
    tables = ", ".join(f"{k} ({v})" for k, v in report.tables.items())
    err.print(f"{output}: {report.events:,} events in {report.partitions} partition(s); tables: {tables}",
              markup=False)
