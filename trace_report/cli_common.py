"""Shared pieces of the command line: output options, progress bars, opening targets.

Command modules import their options from here so that every command prints rows the same way
(``--format table|csv|json|markdown``, ``--limit``, ``-o``) and opens inputs the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

from trace_report.analyze.ingest import IngestReport
from trace_report.api import TraceDB
from trace_report.api import open as open_traces
from trace_report.output import Format

err = Console(stderr=True, highlight=False, soft_wrap=True)

PROGRESS_MIN_BYTES = 64 << 20

# Shared output options (one definition, used by every command that prints rows).
FormatOpt = Annotated[
    Format | None,
    typer.Option("--format", "-f", help="Output format (default: table; or from -o's suffix)."),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", "-n", help="Print at most N rows.")]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
]
TargetsArg = Annotated[
    list[Path],
    typer.Argument(help="Trace files (.json, .json.gz), directories of ranks, tar archives, "
                        "or one .duckdb database written by 'trace-report ingest'."),
]


def warn(message: str) -> None:
    err.print(f"warning: {message}", markup=False)


def _progress_callback(progress: Progress) -> Callable[[int, int], None]:
    task = progress.add_task("ingest", total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return update


def _make_progress(enabled: bool | None) -> Progress | None:
    if enabled is False or (enabled is None and not sys.stderr.isatty()):
        return None
    return Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
        TimeRemainingColumn(), console=err, transient=True,
    )


def _report(report: IngestReport, *, verbose: bool) -> None:
    for message in report.warnings:
        warn(message)
    if verbose:
        for trace_id, label in report.ingested:
            err.print(f"ingested trace {trace_id}: {label}", markup=False)
        for label, n in report.ncu_reports:
            err.print(f"ingested Nsight Compute report ({n} kernel launches): {label}", markup=False)
        for label in report.skipped:
            err.print(f"skipped: {label}", markup=False)


def load(targets: list[Path], progress: bool | None = None) -> TraceDB:
    """Open the targets of an analysis command (database or traces), reporting warnings."""
    total = sum(p.stat().st_size for p in targets if p.is_file())
    bar = _make_progress(progress if progress is not None else (None if total >= PROGRESS_MIN_BYTES else False))
    if bar is None:
        db = open_traces(targets)
    else:
        with bar:
            db = open_traces(targets, progress=_progress_callback(bar))
    _report(db.report, verbose=False)
    return db
