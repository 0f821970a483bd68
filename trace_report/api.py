"""Python API for notebooks: ``trace_report.open(paths)`` (DESIGN section 7)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike

import duckdb
import pandas as pd

from trace_report.analyze.ingest import IngestReport
from trace_report.analyze.top_kernels import TopKernelsOptions, TopKernelsResult, top_kernels

PathArg = str | PathLike[str]


class TraceDB:
    """Traces in DuckDB: the schema of ``docs/schema.md`` behind one connection.

    ``con`` is the duckdb connection itself; :meth:`sql` returns a DuckDB relation
    (``.df()``, ``.arrow()``, ``.fetchall()``).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, report: IngestReport | None = None):
        self.con = con
        self.report = report or IngestReport()

    def sql(self, query: str, params: object = None) -> duckdb.DuckDBPyRelation:
        """Run ``query`` against the schema and return the relation."""
        return self.con.sql(query, params=params)

    def top_kernels(self, limit: int | None = 20, *, rank: int | None = None,
                    by_rank: bool = False) -> pd.DataFrame:
        """Top GPU kernels by total time, as ``trace-report top-kernels`` prints them.

        See :func:`trace_report.analyze.top_kernels.top_kernels` for columns and units.
        """
        return self.top_kernels_result(limit, rank=rank, by_rank=by_rank).frame

    def top_kernels_result(self, limit: int | None = 20, *, rank: int | None = None,
                           by_rank: bool = False) -> TopKernelsResult:
        """Like :meth:`top_kernels` but also returns the note (CPU fallback)."""
        return top_kernels(self.con, TopKernelsOptions(limit=limit, rank=rank, by_rank=by_rank))

    def breakdown(self, *, by_step: bool = False, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Wall, GPU-kernel and idle time per region (``trace-report breakdown``); see
        :func:`trace_report.analyze.regions.breakdown`."""
        from trace_report.analyze.regions import BreakdownOptions, breakdown

        return breakdown(self, BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank)).frame

    def flags(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Flagged kernel names with their classes (``trace-report flags``); the per-class summary
        is in :func:`trace_report.analyze.kernel_classes.flags`'s result."""
        from trace_report.analyze.kernel_classes import FlagsOptions, flags

        return flags(self, FlagsOptions(rank=rank, by_rank=by_rank)).frame

    def advise(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Findings with their numbers and thresholds (``trace-report advise``)."""
        from trace_report.analyze.advise import advise

        return advise(self, rank=rank, by_rank=by_rank).frame

    @property
    def magic(self) -> object:
        """A connection for jupysql's ``%sql`` that sees this database's TEMP views
        (``%sql db.magic``); ``%sql db.con`` would open a cursor that does not."""
        from trace_report.analyze.runs import magic_connection

        return magic_connection(self)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> TraceDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(  # noqa: A001 - the name DESIGN section 7 gives
    paths: PathArg | Sequence[PathArg],
    *,
    read_only: bool = True,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TraceDB:
    """Open traces, run folders, a ``.duckdb`` written by ``trace-report ingest``, or a Parquet
    dataset written by ``trace-report export``.

    ``paths``: one database (opened ``read_only`` unless asked otherwise) or dataset folder, or
    any number of ``.json``/``.json.gz`` traces, directories of per-rank traces, tar archives and
    capture run folders (each tagged with its run id and ``run.json`` config, see
    :func:`trace_report.analyze.runs.open_runs`). ``progress(done_bytes, total_bytes)`` is called
    while traces are read. Raises :class:`~trace_report.errors.InputError` or
    :class:`~trace_report.errors.DatabaseError` for unusable input.
    """
    from trace_report.analyze.runs import open_runs

    return open_runs(paths, read_only=read_only, workers=workers, progress=progress)
