"""Shared pieces of the command line: output options, notes, progress bars, opening inputs.

Command modules take their options from here so that every command prints rows the same way
(``--format table|csv|json|markdown``, ``--limit``, ``-o``) and opens inputs the same way
(:func:`load`, which is :func:`trace_report.open` with a progress bar and the notes printed).
Nothing here imports pandas or the analysis layers at start-up.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.present.format import Format

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from trace_report.inputs import Resolution
    from trace_report.store.tracedb import IngestSummary, TraceDB

_CONTROL = dict.fromkeys([7, 8, 11, 12, 13, 27])
"""Bell, backspace, vertical tab, form feed, carriage return (what rich strips) and escape: a
file name or trace string in a message cannot move the cursor or recolour the terminal."""


class StderrLines:
    """The command line's stderr. Every command prints plain lines there (errors, warnings, notes,
    summaries: ``print(text, markup=False)``, rich's call) and these are written as they are,
    without loading rich (~20 ms of every start-up). :attr:`console` is a rich Console on stderr
    for a progress bar; once it exists, lines go through it so that a live bar stays intact."""

    def __init__(self) -> None:
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._console

    def print(self, *objects: object, markup: bool | None = None, **kwargs: object) -> None:
        """``objects`` joined by spaces on one line; with rich markup or options, through rich."""
        if self._console is not None or markup is not False or kwargs:
            self.console.print(*objects, markup=markup, **kwargs)  # type: ignore[arg-type]
            return
        sys.stderr.write(" ".join(str(o) for o in objects).translate(_CONTROL) + "\n")


err = StderrLines()

PROGRESS_MIN_BYTES = 64 << 20

# Shared output options (one definition, used by every command that prints rows).
FormatOpt = Annotated[
    Format | None,
    typer.Option("--format", "-f", help="Output format (default: table; or from -o's suffix)."),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Print at most N rows.")]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
]


def hash_ahead(ctx: typer.Context, targets: list[Path] | Path | None) -> list[Path] | Path | None:
    """Typer callback of an argument of inputs: start the SHA-256 of the plain traces among them
    in a background thread (:func:`~trace_report.ingest.digests.start_hashing`, standard library
    only) as soon as the command line is parsed. A command on raw traces ingests them into memory
    after it has imported pandas, pyarrow and DuckDB (~0.35 s on one core), and takes their
    digests then."""
    if targets and not ctx.resilient_parsing:
        from trace_report.ingest.digests import start_hashing

        start_hashing(targets if isinstance(targets, list) else [targets])
    return targets


TargetsArg = Annotated[
    list[Path],
    typer.Argument(help="Trace files (.json, .json.gz), directories of ranks, tar archives, Nsight exports, "
                        "or one .duckdb database written by 'trace-report ingest'.", callback=hash_ahead),
]
RankOpt = Annotated[int | None, typer.Option("--rank", help="Only this rank.")]
FullNamesOpt = Annotated[bool, typer.Option(
    "--full-names", help="Whole kernel names in table and Markdown output (else short ones: templates and "
                         "arguments elided; CSV and JSON always hold whole names).")]


class EngineName(str, enum.Enum):
    local = "local"
    ray = "ray"


EngineOpt = Annotated[EngineName, typer.Option(
    "--engine", help="Where the work runs: local (this machine), or ray (one Ray task per trace or partition, "
                     "merged here; needs pip install \"trace-report[ray]\"; docs/scaling.md).")]
RayAddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="With --engine ray: the cluster (auto, ray://HOST:10001 or HOST:6379); default "
                          "$RAY_ADDRESS, else a Ray runtime started on this machine.")]
ByRankOpt = Annotated[bool, typer.Option("--by-rank", help="One group of rows per rank (else summed over ranks).")]


def warn(message: str) -> None:
    err.print(f"warning: {message}", markup=False)


def notes(messages: list[str]) -> None:
    """Print ``note: ...`` lines on stderr."""
    for message in messages:
        err.print(f"note: {message}", markup=False)


def progress_callback(progress: Progress) -> Callable[[int, int], None]:
    task = progress.add_task("ingest", total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return update


def make_progress(enabled: bool | None) -> Progress | None:
    """A progress bar on stderr: when asked, or by default when stderr is a terminal."""
    if enabled is False or (enabled is None and not sys.stderr.isatty()):
        return None
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn  # only with a bar

    return Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
        TimeRemainingColumn(), console=err.console, transient=True,
    )


def print_summary(report: IngestSummary, *, verbose: bool, quiet: bool = False) -> None:
    """Warnings and notes always; with ``verbose`` each trace read and each file skipped
    (``quiet`` hides the skipped list)."""
    for message in report.warnings:
        warn(message)
    notes(report.notes)
    if verbose:
        for trace_id, label in report.ingested:
            err.print(f"ingested trace {trace_id}: {label}", markup=False)
        for label, n in report.ncu_reports:
            err.print(f"ingested Nsight Compute report ({n} kernel launches): {label}", markup=False)
    if verbose and not quiet:
        for label, reason in report.skipped:
            err.print(f"skipped: {label} ({reason})", markup=False)


@contextmanager
def ray_session(address: str | None, num_cpus: int | None = None) -> Iterator[None]:
    """A Ray runtime for ``--engine ray`` (:func:`trace_report.ingest.engine_ray.ray_runtime`)."""
    from trace_report.ingest.engine_ray import ray_runtime  # Ray loads only with --engine ray

    with ray_runtime(address, num_cpus):
        yield


@contextmanager
def ray_load(targets: list[Path]) -> Iterator[TraceDB]:
    """Open the targets of an analysis for the Ray engine (inside :func:`ray_session`): a database or
    dataset as it is, traces ingested by Ray tasks into a temporary database."""
    from trace_report.analyses.distributed import open_for_ray

    with open_for_ray(targets) as db:
        print_summary(db.summary, verbose=False)
        yield db  # type: ignore[misc]


def load(targets: list[Path], progress: bool | None = None, *, read_only: bool = True) -> TraceDB:
    """Open the targets of an analysis command (database or traces), reporting warnings.

    A ``.duckdb`` database opens through :func:`trace_report.store.handle.open_database`, which
    needs DuckDB alone; traces go through :func:`trace_report.api.open_resolution` (the ingest
    layers, pyarrow), so a command on a database starts without them."""
    from trace_report.inputs import resolve  # the library loads when a command runs
    from trace_report.store.handle import open_database

    with resolve(targets) as found:
        if found.database is not None and found.dataset is None:
            db = open_database(found.database, read_only=read_only)
        else:
            db = _open_traces(found, targets, progress, read_only)
    print_summary(db.summary, verbose=False)
    return db


def _open_traces(found: Resolution, targets: list[Path], progress: bool | None, read_only: bool) -> TraceDB:
    from trace_report.api import open_resolution  # pandas, pyarrow and the ingest load only here

    total = sum(p.stat().st_size for p in targets if p.is_file())
    bar = make_progress(progress if progress is not None else (None if total >= PROGRESS_MIN_BYTES else False))
    if bar is None:
        return open_resolution(found, read_only=read_only)
    with bar:
        return open_resolution(found, read_only=read_only, progress=progress_callback(bar))
