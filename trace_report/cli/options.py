"""Shared pieces of the command line: output options, notes, progress bars, opening inputs.

Command modules take their options from here so that every command prints rows the same way
(``--format table|csv|json|markdown``, ``--limit``, ``-o``) and opens inputs the same way
(:func:`load`, which is :func:`trace_report.open` with a progress bar and the notes printed).
Nothing here imports pandas or the analysis layers at start-up.
"""

from __future__ import annotations

import enum
import os
import re
import stat
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report import declare
from trace_report.declare import Opt
from trace_report.errors import UsageError
from trace_report.present.format import Format
from trace_report.present.messages import group_warnings
from trace_report.present.safe_text import terminal_text
from trace_report.storage import is_url, location

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from trace_report.inputs import Resolution
    from trace_report.store.tracedb import IngestSummary, TraceDB

class StderrLines:
    """The command line's stderr. Every command prints plain lines there (errors, warnings, notes,
    summaries: ``print(text, markup=False)``, rich's call) and these are written as they are,
    without loading rich (a visible part of every start-up). :attr:`console` is a rich Console on stderr
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
            shown = [terminal_text(o) if isinstance(o, str) else o for o in objects]
            self.console.print(*shown, markup=markup, **kwargs)  # type: ignore[arg-type]
            return
        # a file name or trace string in a message cannot move the cursor or recolour the terminal
        sys.stderr.write(terminal_text(" ".join(str(o) for o in objects)) + "\n")


err = StderrLines()

PROGRESS_MIN_BYTES = 64 << 20

# Shared output options (one definition, used by every command that prints rows).
FormatOpt = Annotated[
    Format | None,
    typer.Option("--format", "-f", help="Output format (default: table; or from -o's suffix)."),
]
RawOpt = Annotated[bool, typer.Option(
    "--raw", help="CSV text cells as the trace has them (else a cell starting with = + - @, a tab or a carriage "
                  "return gets a leading apostrophe, and control characters are escaped: docs/security.md).")]
LimitOpt = Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Print at most N rows.")]


# ------------------------------------------------------------------ -o must not be an input
#
# Every command checks its output paths against its inputs before it reads anything: the inputs
# and the outputs are recorded in the Click context as they are parsed (the callbacks
# :func:`inputs_given` / :func:`hash_ahead` of the arguments of inputs, :func:`output_given` of
# ``-o`` and ``--chart``); the parameter parsed last checks (Click parses them in command-line
# order, so either may come first).

_INPUTS_KEY = "trace_report.inputs"
_OUTPUTS_KEY = "trace_report.outputs"

RUN_FILES = re.compile(r"run(-rank.*)?\.json|(metrics|steps|results)(-rank.*)?\.csv")
"""The files of a run folder (one holding ``run.json``) that an analysis reads beside its traces
(:mod:`trace_report.manifest`, :mod:`trace_report.store.runs`)."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _read_in_folder(out: Path, folder: Path) -> str | None:
    """What ``out`` (a real path inside the input folder ``folder``) is, when the command reads
    it as an input (a trace, an Nsight export, an archive, a run's manifest or tables), else None."""
    rel = out.relative_to(folder)
    if any(part.startswith(".") for part in rel.parts) or not out.is_file():
        return None  # hidden files are never read; a FIFO or device is never opened by the search
    if out.name.endswith((".duckdb.wal", ".parquet")) or ".duckdb.events" in out.parent.name:
        return None  # a database's own files, skipped by the search
    if RUN_FILES.fullmatch(out.name) and (out.parent / "run.json").is_file():
        return f"the run file {out.name} of a run"
    from trace_report.inputs import INGESTED, InputKind, detect  # only for an output inside an input folder

    kind = detect(out).kind
    return f"a {kind.value}" if kind in INGESTED or kind is InputKind.archive else None


def output_conflict(output: Path, inputs: list[Path], option: str = "--output") -> str | None:
    """Why writing ``output`` would replace or alter one of ``inputs``, as one line naming both
    paths, else None. The output conflicts when it is an input (the same path after symbolic links,
    or the same file: a hard link), a database input's events folder (anything under
    ``<db>.events/``) or write-ahead log, a trace recorded in a database input (``traces.path``:
    ``slice`` and ``hta`` read it again), anything inside any database's events folder, a trace
    (or run file) the command reads inside an input folder, anything inside an input dataset, or a
    folder holding an input. A URL output conflicts with a URL input it equals, lies under or holds."""
    if is_url(output):
        return _url_conflict(str(output), [str(g) for g in inputs], option)
    out = _real(output)
    exists = os.path.lexists(out)
    for given in inputs:
        if not os.path.lexists(given):
            continue  # the inputs' own error comes later
        real = _real(given)
        if out == real or (exists and _same_file(out, real)):
            return f"{option} {output} is the input {given}: give another output path"
        if real in out.parents:
            if real.is_dir():
                from trace_report.inputs import is_dataset  # a folder input only

                if is_dataset(real):
                    return f"{option} {output} is inside the input dataset {given}: give a path outside it"
                what = _read_in_folder(out, real)
                if what is not None:
                    return f"{option} {output} is {what} inside the input folder {given}: give another output path"
        elif out in real.parents:
            return f"{option} {output} holds the input {given}: give another output path"
        if real.is_file():
            events, wal = real.with_name(real.name + ".events"), real.with_name(real.name + ".wal")
            if out == events or events in out.parents:
                return f"{option} {output} is inside {events}, the events folder of the input {given}: " \
                       "give a path outside it"
            if out == wal:
                return f"{option} {output} is the write-ahead log of the input {given}: give another output path"
        elif real.is_dir() and exists and out.is_file() and os.stat(out).st_nlink > 1:
            twin = _hard_link_in(out, real)  # a hard link elsewhere to a trace inside the folder
            if twin is not None and (what := _read_in_folder(twin, real)) is not None:
                return f"{option} {output} is {twin} ({what}) inside the input folder {given}: give another output path"
    if (why := _in_events_folder(out)) is not None:  # after the inputs themselves: "is the input" says more
        return f"{option} {output} is inside {why}: give a path outside it"
    for given in inputs:
        if os.path.isfile(given) and (trace := _recorded_trace(out, _real(given))) is not None:
            return f"{option} {output} is the trace {trace} recorded in the input database {given}: give " \
                   "another output path"
    return None


def _url_conflict(output: str, inputs: list[str], option: str) -> str | None:
    """:func:`output_conflict` where a URL is involved: by the text of the URLs (a local path and a
    URL never conflict)."""
    out = output.rstrip("/")
    for given in inputs:
        name = given.rstrip("/")
        if not is_url(given):
            continue
        if out == name or out.startswith(name + "/"):
            return f"{option} {output} is or lies inside the input {given}: give another output path"
        if name.startswith(out + "/"):
            return f"{option} {output} holds the input {given}: give another output path"
    return None


def _in_events_folder(out: Path) -> str | None:
    """The events folder of a database (``<name>.events`` beside the file ``<name>``) that ``out``
    (a real path) is or lies in, else None: its pieces and kept tables are the database's."""
    from trace_report.store.layout import is_database_file  # standard library only

    for folder in (out, *out.parents):
        if not folder.name.endswith(".events") or folder.name == ".events":
            continue
        database = folder.with_name(folder.name.removesuffix(".events"))
        if is_database_file(database):
            return f"{folder}, the events folder of the database {database}"
    return None


def _recorded_trace(out: Path, database: Path) -> str | None:
    """The trace recorded in ``database`` (``traces.path``; an archive's for ``archive!member``)
    that ``out`` (a real path) is, else None (and None when ``database`` is not a DuckDB file or
    cannot be read: the command's own open reports why)."""
    from trace_report.store.layout import is_database_file

    if not is_database_file(database):
        return None
    import duckdb

    try:
        with duckdb.connect(os.fspath(database), read_only=True,
                            config={"enable_external_access": False}) as con:
            paths = [p for (p,) in con.execute("SELECT DISTINCT path FROM traces").fetchall() if p]
    except (duckdb.Error, UnicodeEncodeError):
        return None
    exists = os.path.lexists(out)
    for path in paths:
        trace = Path(str(path).split("!", 1)[0])
        if out == _real(trace) or (exists and _same_file(out, trace)):
            return str(trace)
    return None


def _hard_link_in(out: Path, folder: Path) -> Path | None:
    """A path inside ``folder`` of the same file as ``out`` (which has several links), else None."""
    for p in folder.rglob("*"):
        if _same_file(p, out) and p.is_file():
            return p
    return None


def check_output(output: Path | None, inputs: list[Path], option: str = "--output") -> None:
    """Raise :class:`UsageError` (exit 2) when ``output`` (given as ``option``) is or lies inside
    an input (:func:`output_conflict`)."""
    if output is not None and inputs and (why := output_conflict(output, inputs, option)) is not None:
        raise UsageError(why)


def check_database_output(output: Path, inputs: list[Path]) -> None:
    """:func:`check_output` for ``ingest -o DB``, which also must be a file: a FIFO or a device
    (``/dev/null``) is refused before its lock file is made beside it."""
    check_output(output, inputs)
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return  # a new database (or a missing folder, reported by the ingest)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UsageError(f"--output {output} is not a regular file: a database is a file (e.g. runs.duckdb)")


def _recorded(ctx: typer.Context) -> None:
    for option, output in ctx.meta.get(_OUTPUTS_KEY, []):
        check_output(output, ctx.meta.get(_INPUTS_KEY, []), option)


def inputs_given(ctx: typer.Context, targets: list[Path] | Path | None) -> list[Path] | Path | None:
    """Typer callback of an argument of inputs: remember them, and check them against the
    output if it was parsed first (:func:`check_output`)."""
    if targets and not ctx.resilient_parsing:
        ctx.meta.setdefault(_INPUTS_KEY, []).extend(targets if isinstance(targets, list) else [targets])
        _recorded(ctx)
    return targets


def output_given(ctx: typer.Context, param: typer.CallbackParam, output: Path | None) -> Path | None:
    """Typer callback of an option naming a file to write (``-o``, ``--chart``): remember it, and
    check it against the inputs if they were parsed first (:func:`check_output`)."""
    if output is not None and not ctx.resilient_parsing:
        option = max(param.opts, key=len) if param.opts else "--output"
        ctx.meta.setdefault(_OUTPUTS_KEY, []).append((option, output))
        _recorded(ctx)
    return output


OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.", callback=output_given)
]


def hash_ahead(ctx: typer.Context, targets: list[Path] | Path | None) -> list[Path] | Path | None:
    """Typer callback of an argument of inputs: :func:`inputs_given`, then start the SHA-256 of the
    plain traces among them in a background thread (:func:`~trace_report.ingest.digests.start_hashing`,
    standard library only) as soon as the command line is parsed. A command on raw traces ingests
    them into memory after it has imported pandas, pyarrow and DuckDB (one core busy a while), and
    takes their digests then. Not for databases (``.duckdb``: no trace to hash; the hashing
    module loads ``hashlib``, which a command on a small database would feel)."""
    inputs_given(ctx, targets)
    given = targets if isinstance(targets, list) else [targets] if targets else []
    paths = [Path(p) for p in given if not is_url(p)]  # an object in object storage is hashed once copied
    if paths and not ctx.resilient_parsing and not all(p.name.endswith(".duckdb") for p in paths):
        from trace_report.ingest.digests import start_hashing

        start_hashing(paths)
    return targets


TargetsArg = Annotated[
    list[str],  # each a Path, or a URL kept as text (storage.location)
    typer.Argument(help="Trace files (.json, .json.gz), directories of ranks, tar archives, Nsight exports, "
                        "or one .duckdb database written by 'trace-report ingest'; local paths or s3://, gs://, "
                        "abfs:// URLs of objects and prefixes (docs/scaling.md).", callback=hash_ahead,
                   parser=location),
]
def typer_option(meta: Opt, **extra: object) -> typer.models.OptionInfo:
    """The Typer option of a declared option (:class:`~trace_report.declare.Opt`): its flags,
    its help with the unit, its bounds, its metavar."""
    bounds: dict[str, object] = {k: v for k, v in (("min", meta.min), ("max", meta.max)) if v is not None}
    if meta.metavar is not None:
        bounds["metavar"] = meta.metavar
    return typer.Option(*meta.flags, help=meta.text(), **bounds, **extra)  # type: ignore[arg-type]


RankOpt = Annotated[int | None, typer_option(declare.RANK)]
StepsOnlyOpt = Annotated[bool, typer_option(declare.STEPS_ONLY)]
HtaRoundingOpt = Annotated[bool, typer_option(declare.HTA_ROUNDING)]
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
ByRankOpt = Annotated[bool, typer_option(declare.BY_RANK)]
MergeRunsOpt = Annotated[bool, typer.Option(
    "--merge-runs", help="Analyse every trace together as one run (summed and ranked across runs; a note lists "
                         "what was merged). By default each run gets its own rows, with a run column.")]
RunOpt = Annotated[str | None, typer.Option(
    "--run", help="Only the run with this label (the run column of a command over several runs).")]
RunAOpt = Annotated[str | None, typer.Option(
    "--run-a", help="The run of A to compare, when A holds several (the error lists them).")]
RunBOpt = Annotated[str | None, typer.Option("--run-b", help="The run of B to compare, when B holds several.")]


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
    for message in group_warnings(report.warnings):
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
    from trace_report.analyses.common.distributed import open_for_ray

    with open_for_ray(targets) as db:
        print_summary(db.summary, verbose=False)
        yield db  # type: ignore[misc]


def load(targets: list[Path], progress: bool | None = None, *, read_only: bool = True,
         views: Collection[str] | None = None, unsafe: bool = False) -> TraceDB:
    """Open the targets of an analysis command (database or traces), reporting warnings.

    A ``.duckdb`` database opens through :func:`trace_report.store.handle.open_database`, which
    needs DuckDB alone; traces go through :func:`trace_report.api.open_resolution` (the ingest
    layers, pyarrow), so a command on a database starts without them. ``views``: the analysis
    views the command reads, where it reads only a few: a database gets those alone (with the
    views they read), which is most of the start-up of a command on a small database.
    A database is checked (:mod:`trace_report.store.trust`) and sandboxed
    (:func:`~trace_report.store.sandbox.sandbox`) unless ``unsafe`` (``sql --unsafe``)."""
    from trace_report.inputs import resolve  # the library loads when a command runs
    from trace_report.store.handle import open_database

    with resolve(targets) as found:
        if found.database is not None and found.dataset is None:
            db = open_database(found.database, read_only=read_only, views=views, unsafe=unsafe)
        else:
            db = _open_traces(found, targets, progress, read_only)
    print_summary(db.summary, verbose=False)
    return db


def _open_traces(found: Resolution, targets: list[Path], progress: bool | None, read_only: bool) -> TraceDB:
    from trace_report.api import open_resolution  # pandas, pyarrow and the ingest load only here

    local = [Path(p) for p in targets if not is_url(p)]
    total = sum(p.stat().st_size for p in local if p.is_file())
    bar = make_progress(progress if progress is not None else (None if total >= PROGRESS_MIN_BYTES else False))
    if bar is None:
        return open_resolution(found, read_only=read_only)
    with bar:
        return open_resolution(found, read_only=read_only, progress=progress_callback(bar))
