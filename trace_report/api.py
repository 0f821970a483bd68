"""Python API for notebooks: ``trace_report.open(paths)`` (docs/report.md).

:func:`open` is the one way in for the library and the CLI alike: it asks
:func:`trace_report.inputs.resolve` what the paths are, then opens a database, an exported
dataset, or ingests traces and Nsight exports into memory, and attaches the run tables.
The handle it returns is a :class:`TraceDB` (:class:`trace_report.store.tracedb.TraceDB` with
the analyses as methods, for notebooks).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from os import PathLike
from pathlib import Path

import duckdb
import pandas as pd

from trace_report.analyses.common.stragglers import StragglerOptions, stragglers
from trace_report.analyses.common.utilization import gpu_utilization
from trace_report.analyses.critical_path import CriticalPathOptions, CriticalPathResult, critical_path
from trace_report.analyses.top_kernels import TopKernelsOptions, TopKernelsResult, top_kernels
from trace_report.declare import Command, Pair, commands, option_fields
from trace_report.ingest.pipeline import IngestOptions, open_in_memory
from trace_report.inputs import Resolution, as_paths, resolve
from trace_report.store import tracedb
from trace_report.store.database import create_schema
from trace_report.store.export import open_parquet_dataset
from trace_report.store.handle import open_database
from trace_report.store.notebook import MagicConnection, magic_connection
from trace_report.store.per_run import Table, on_run, side_run, tabulate
from trace_report.store.runs import attach_runs

PathArg = str | bytes | PathLike[str]


RUN_OPTIONS = """``merge_runs``: analyse every trace as one run (else each run apart, with a ``run``
column first when there are several, as the command line does); ``run``: only the run with that
label. The frame's ``attrs["notes"]`` holds the notes the command prints."""


class TraceDB(tracedb.TraceDB):
    """Traces in DuckDB behind one connection, with the analyses as methods.

    ``con`` is the duckdb connection itself; :meth:`sql` returns a DuckDB relation
    (``.df()``, ``.arrow()``, ``.fetchall()``). Each analysis method returns the frame the
    matching command prints (same numbers, same columns, one set of rows per run with a ``run``
    column on an input of several runs; ``merge_runs=True`` sums them, ``run=LABEL`` picks one).
    The methods of declared analyses (:mod:`trace_report.declare`) are made from their
    declaration and added below the class.
    """

    def table(self, analysis: Callable[[tracedb.TraceDB], object], *, merge_runs: bool = False,
              run: str | None = None, limit: int | None = None) -> pd.DataFrame:
        """``analysis(db)`` (a result with ``.frame`` and ``.notes``) through the command line's
        per-run funnel (:func:`trace_report.store.per_run.tabulate`); the notes in
        ``frame.attrs["notes"]``. Raises :class:`~trace_report.errors.UsageError` for an unknown
        ``run``."""
        return _frame(tabulate(self, analysis, run=run, merge=merge_runs, limit=limit))

    def top_kernels_result(self, limit: int | None = 20, *, rank: int | None = None,
                           by_rank: bool = False, kernels_only: bool = False) -> TopKernelsResult:
        """Like :meth:`top_kernels` on the whole input (every run together) with the note (CPU
        fallback, hidden memcpy/memset), as :class:`~trace_report.analyses.top_kernels.compute.TopKernelsResult`."""
        return top_kernels(self, TopKernelsOptions(limit=limit, rank=rank, by_rank=by_rank,
                                                   kernels_only=kernels_only))

    def gpu_utilization(self, *, rank: int | None = None, by_step: bool = False) -> pd.DataFrame:
        """GPU busy % of step time per rank (or per step), the report headline's and ``advise``'s
        figure; see :func:`trace_report.analyses.common.utilization.gpu_utilization`."""
        return gpu_utilization(self, rank, by_step=by_step)

    def critical_path_result(self, **options: object) -> CriticalPathResult:
        """:meth:`critical_path` on the whole input (every run together) as a
        :class:`~trace_report.analyses.critical_path.compute.CriticalPathResult`: ``.frame`` ms on
        the path by kind, ``.operators`` the top operators on it, ``.paths`` its edges, ``.notes``;
        ``options``: :class:`~trace_report.analyses.critical_path.CriticalPathOptions`' fields."""
        return critical_path(self, CriticalPathOptions(**options))  # type: ignore[arg-type]

    def stragglers(self, *, rank: int | None = None, merge_runs: bool = False, run: str | None = None) -> pd.DataFrame:
        """Step time per rank against the fastest rank (``trace-report breakdown --stragglers``); see
        :func:`trace_report.analyses.common.stragglers.stragglers`."""
        return self.table(lambda d: stragglers(d, StragglerOptions(rank=rank)), merge_runs=merge_runs, run=run)

    @property
    def magic(self) -> MagicConnection:
        """A connection for jupysql's ``%sql`` that sees this database's TEMP views
        (``conn = db.magic`` then ``%sql conn``); ``%sql db.con`` would open a cursor that does not."""
        return magic_connection(self)


def _frame(table: Table) -> pd.DataFrame:
    frame = table.frame if isinstance(table.frame, pd.DataFrame) else table.frame.frame
    frame.attrs["notes"] = list(table.notes)
    frame.attrs["warnings"] = list(table.warnings)
    return frame


def declared_method(cmd: Command) -> Callable[..., object]:
    """The ``TraceDB`` method of a declared analysis command: keyword arguments named as its
    options' fields (same defaults), ``limit`` (rows per run), ``merge_runs`` and ``run``; it
    returns the frame the command prints, through the same funnel. A command that saves a file
    (:class:`~trace_report.declare.Save`) takes the path first and ``run``, and returns what its
    saver returns. One that compares two inputs (:class:`~trace_report.declare.Pair`) is
    :func:`pair_method`."""
    if isinstance(cmd.inputs, Pair):
        return pair_method(cmd)
    fields = option_fields(cmd.options)
    kw, positional = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
    names = {f.name for f, _, _ in fields}
    limit = next((f.default for f, _, _ in fields if f.name == "limit"), None)
    params = [inspect.Parameter("self", positional)]
    if cmd.save is not None:
        params.append(inspect.Parameter("output", positional, annotation=PathArg))
    else:
        params.append(inspect.Parameter("limit", positional, default=limit, annotation=int | None))
    params += [inspect.Parameter(f.name, kw, default=f.default, annotation=tp) for f, tp, _ in fields
               if f.name != "limit" or cmd.save is not None]
    shared = (("run", None, str | None),) if cmd.save is not None else \
        (("merge_runs", False, bool), ("run", None, str | None))
    params += [inspect.Parameter(n, kw, default=d, annotation=t) for n, d, t in shared]
    signature = inspect.Signature(params, return_annotation=object if cmd.save is not None else pd.DataFrame)

    def method(*args: object, **kwargs: object) -> object:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        db: TraceDB = values.pop("self")  # type: ignore[assignment]
        options = cmd.make_options(values)
        analysis = cmd.function()
        if cmd.save is not None:
            save = cmd.hook(cmd.save.function)
            path = Path(values["output"])  # type: ignore[arg-type]
            return on_run(db, lambda d: save(analysis(d, options), options, path)[0],  # type: ignore[misc]
                          values["run"])  # type: ignore[arg-type]
        limit = None if "limit" in names else values["limit"]  # a limit field is the analysis' own
        return db.table(lambda d: analysis(d, options), merge_runs=bool(values["merge_runs"]),
                        run=values["run"], limit=limit)  # type: ignore[arg-type]

    lines = [f"  ``{f.name}``: {meta.text()} (default {f.default!r})" for f, _, meta in fields]
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__name__ = method.__qualname__ = cmd.method
    tail = f"``output``: {cmd.save.help} ``run``: only the run with that label." if cmd.save is not None \
        else RUN_OPTIONS
    method.__doc__ = f"{cmd.help} (``trace-report {cmd.name}``)\n\n" + "\n".join(lines) + "\n\n" + tail
    return method


PAIR_OPTIONS = """``other``: B, a ``TraceDB`` or what :func:`open` opens (then closed again);
``merge_runs``: a side holding several runs is analysed as one (else it needs ``run_a`` /
``run_b``, the label of its run). The frame's ``attrs["notes"]`` holds the notes the command
prints, ``attrs["warnings"]`` its warnings, and the result's own ``attrs()`` where it has them
(``compare``: ``headline``, ``verdicts`` of ``fail_if``, ``gate``: passed, failed or None)."""


def _opened(paths: PathArg | Sequence[PathArg]) -> TraceDB:
    """:func:`open` with its defaults (B of a pair method given as paths)."""
    with resolve(_as_paths(paths)) as found:
        return open_resolution(found)


def pair_method(cmd: Command) -> Callable[..., object]:
    """The ``TraceDB`` method of a command that compares two inputs: ``self`` is A, ``other`` B;
    keyword arguments named as its options' fields (same defaults), ``limit`` (rows),
    ``merge_runs``, ``run_a`` and ``run_b``; it returns the frame the command prints."""
    fields = option_fields(cmd.options)
    kw, positional = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", positional),
              inspect.Parameter("other", positional, annotation="TraceDB | PathArg | Sequence[PathArg]"),
              inspect.Parameter("limit", positional, default=None, annotation=int | None)]
    params += [inspect.Parameter(f.name, kw, default=f.default, annotation=tp) for f, tp, _ in fields]
    params += [inspect.Parameter(n, kw, default=d, annotation=t) for n, d, t in
               (("merge_runs", False, bool), ("run_a", None, str | None), ("run_b", None, str | None))]
    signature = inspect.Signature(params, return_annotation=pd.DataFrame)

    def method(*args: object, **kwargs: object) -> pd.DataFrame:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        a: TraceDB = values.pop("self")  # type: ignore[assignment]
        other, merge = values.pop("other"), bool(values["merge_runs"])
        options = cmd.make_options(values)
        if hasattr(options, "check"):
            options.check()
        with ExitStack() as stack:
            b = other if isinstance(other, tracedb.TraceDB) else stack.enter_context(_opened(other))  # type: ignore[arg-type]
            stack.enter_context(side_run(a, "A", values["run_a"], merge))  # type: ignore[arg-type]
            stack.enter_context(side_run(b, "B", values["run_b"], merge))  # type: ignore[arg-type]
            result = cmd.function()(a, b, options)
        limit = values["limit"]
        frame = result.frame if limit is None else result.frame.head(limit)
        frame.attrs.update(result.attrs() if hasattr(result, "attrs") else {})
        frame.attrs["notes"] = list(result.notes)
        frame.attrs["warnings"] = list(getattr(result, "warnings", []))
        return frame

    lines = [f"  ``{f.name}``: {meta.text()} (default {f.default!r})" for f, _, meta in fields]
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__name__ = method.__qualname__ = cmd.method
    method.__doc__ = f"{cmd.help} (``trace-report {cmd.name}``)\n\n" + "\n".join(lines) + "\n\n" + PAIR_OPTIONS
    return method


for _cmd in commands().values():
    if not hasattr(TraceDB, _cmd.method):
        setattr(TraceDB, _cmd.method, declared_method(_cmd))


def _as_paths(paths: PathArg | Sequence[PathArg]) -> list[Path]:
    return as_paths(paths)


def open_resolution(found: Resolution, *, read_only: bool = True, workers: int | None = None,
                    progress: Callable[[int, int], None] | None = None) -> TraceDB:
    """:func:`open` on what :func:`trace_report.inputs.resolve` found (the caller keeps
    ``found`` open while this runs: tar members live in its temporary folders)."""
    if found.dataset is not None:
        opened = open_parquet_dataset(found.dataset)  # carries its own run tables
        db = TraceDB(opened.con, opened.summary)
        db.runs()  # the trace_runs table, for SQL
        return db
    if found.database is not None:
        # a notebook's own SQL may read and write files (its catalog is checked all the same)
        return open_database(found.database, read_only=read_only, cls=TraceDB, sandboxed=False)
    if found.sources:
        con, summary = open_in_memory(found, IngestOptions(workers=workers, progress=progress))
        db = TraceDB(con, summary)
    else:
        con = duckdb.connect(":memory:")
        create_schema(con, with_views=True)
        db = TraceDB(con)
        db.summary.skipped.extend(found.skipped)
        db.summary.notes.extend(found.notes)
    attach_runs(db.con, found.run_folders)
    db.runs()  # the trace_runs table, for SQL
    return db


def open(  # noqa: A001 - the name docs/report.md gives
    paths: PathArg | Sequence[PathArg],
    *,
    read_only: bool = True,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TraceDB:
    """Open traces, run folders, a ``.duckdb`` written by ``trace-report ingest``, or a Parquet
    dataset written by ``trace-report export``.

    ``paths``: one database (opened ``read_only`` unless asked otherwise) or dataset folder, or
    any number of ``.json``/``.json.gz`` traces, directories of per-rank traces, tar archives,
    Nsight exports and capture run folders (each tagged with its run id and ``run.json`` config;
    run folders without traces, captured with ``--no-profile``, still give ``runs`` rows).
    ``progress(done_bytes, total_bytes)`` is called while traces are read. Raises
    :class:`~trace_report.errors.InputError` or :class:`~trace_report.errors.DatabaseError`
    for unusable input.
    """
    with resolve(_as_paths(paths)) as found:
        return open_resolution(found, read_only=read_only, workers=workers, progress=progress)
