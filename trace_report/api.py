"""Python API for notebooks: ``trace_report.open(paths)`` (docs/report.md).

:func:`open` is the one way in for the library and the CLI alike: it asks
:func:`trace_report.inputs.resolve` what the paths are, then opens a database, an exported
dataset, or ingests traces and Nsight exports into memory, and attaches the run tables.
The handle it returns is a :class:`TraceDB` (:class:`trace_report.store.tracedb.TraceDB` with
the analyses as methods, for notebooks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path

import duckdb
import pandas as pd

from trace_report.analyses.advise import advise
from trace_report.analyses.kernel_classes import FlagsOptions, flags
from trace_report.analyses.regions import BreakdownOptions, breakdown
from trace_report.analyses.top_kernels import TopKernelsOptions, TopKernelsResult, top_kernels
from trace_report.analyses.utilization import gpu_utilization
from trace_report.ingest.pipeline import IngestOptions, open_in_memory
from trace_report.inputs import Resolution, resolve
from trace_report.store import tracedb
from trace_report.store.database import connect_existing, create_schema
from trace_report.store.export import open_parquet_dataset
from trace_report.store.notebook import MagicConnection, magic_connection
from trace_report.store.runs import attach_runs

PathArg = str | PathLike[str]


class TraceDB(tracedb.TraceDB):
    """Traces in DuckDB behind one connection, with the analyses as methods.

    ``con`` is the duckdb connection itself; :meth:`sql` returns a DuckDB relation
    (``.df()``, ``.arrow()``, ``.fetchall()``). Each analysis method returns the frame the
    matching command prints (same numbers, same columns).
    """

    def top_kernels(self, limit: int | None = 20, *, rank: int | None = None,
                    by_rank: bool = False) -> pd.DataFrame:
        """Top GPU kernels by total time, as ``trace-report top-kernels`` prints them.

        See :func:`trace_report.analyses.top_kernels.top_kernels` for columns and units.
        """
        return self.top_kernels_result(limit, rank=rank, by_rank=by_rank).frame

    def top_kernels_result(self, limit: int | None = 20, *, rank: int | None = None,
                           by_rank: bool = False) -> TopKernelsResult:
        """Like :meth:`top_kernels` but also returns the note (CPU fallback)."""
        return top_kernels(self, TopKernelsOptions(limit=limit, rank=rank, by_rank=by_rank))

    def breakdown(self, *, by_step: bool = False, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Wall, GPU-kernel and idle time per region (``trace-report breakdown``); see
        :func:`trace_report.analyses.regions.breakdown`."""
        return breakdown(self, BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank)).frame

    def flags(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Flagged kernel names with their classes (``trace-report flags``); the per-class summary
        is in :func:`trace_report.analyses.kernel_classes.flags`'s result."""
        return flags(self, FlagsOptions(rank=rank, by_rank=by_rank)).frame

    def advise(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Findings with their numbers and thresholds (``trace-report advise``)."""
        return advise(self, rank=rank, by_rank=by_rank).frame

    def gpu_utilization(self, *, rank: int | None = None, by_step: bool = False) -> pd.DataFrame:
        """GPU busy % of step time per rank (or per step), the report headline's and ``advise``'s
        figure; see :func:`trace_report.analyses.utilization.gpu_utilization`."""
        return gpu_utilization(self, rank, by_step=by_step)

    @property
    def magic(self) -> MagicConnection:
        """A connection for jupysql's ``%sql`` that sees this database's TEMP views
        (``conn = db.magic`` then ``%sql conn``); ``%sql db.con`` would open a cursor that does not."""
        return magic_connection(self)


def _as_paths(paths: PathArg | Sequence[PathArg]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, PathLike)) else [Path(p) for p in paths]


def _from_resolution(found: Resolution, read_only: bool, workers: int | None,
                     progress: Callable[[int, int], None] | None) -> TraceDB:
    if found.dataset is not None:
        opened = open_parquet_dataset(found.dataset)  # carries its own run tables
        return TraceDB(opened.con, opened.summary)
    if found.database is not None:
        db = TraceDB(connect_existing(found.database, read_only=read_only))
        attach_runs(db.con, [])
        return db
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
        return _from_resolution(found, read_only, workers, progress)
