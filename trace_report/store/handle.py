"""Open a database written by ``trace-report ingest`` as a :class:`TraceDB`, with DuckDB alone.

This is the path of every analysis command on a ``.duckdb`` file, so it loads neither pandas
nor pyarrow nor the ingest layers: the ``events`` view reads the Parquet pieces through DuckDB
(:mod:`trace_report.store.events_view`) and the run tables are built in SQL when no run folder
is beside the traces (:func:`trace_report.store.runs.attach_runs`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TypeVar

from trace_report.store.database import connect_existing
from trace_report.store.runs import attach_runs
from trace_report.store.tracedb import IngestSummary, TraceDB

DB = TypeVar("DB", bound=TraceDB)


def open_database(path: Path, *, read_only: bool = True, cls: type[DB] = TraceDB,  # type: ignore[assignment]
                  views: Collection[str] | None = None, sandboxed: bool = True, unsafe: bool = False,
                  settings: Mapping[str, str] | None = None) -> DB:
    """A handle on the database at ``path`` (opened ``read_only`` unless asked otherwise), of
    class ``cls``, with the ``events`` view, the analysis views and the run tables; ``views``:
    only those analysis views and the ones they read (a command that reads a few:
    :func:`~trace_report.store.database.connect_existing`, as are ``sandboxed``, ``unsafe`` and
    ``settings``: a command's connection is sandboxed, ``sql --unsafe``'s is not even checked).

    Raises :class:`~trace_report.errors.DatabaseError` for a missing, foreign or damaged file, and
    for one of a newer schema unless ``read_only`` (read only, a warning in ``db.summary``)."""
    summary = IngestSummary()
    con = connect_existing(path, read_only=read_only, warnings=summary.warnings, views=views,
                           sandboxed=sandboxed and not unsafe, unsafe=unsafe, settings=settings)
    db = cls(con, summary)
    try:
        attach_runs(db.con, [])
        db.runs()  # the trace_runs table, for SQL
    except BaseException:
        db.close()
        raise
    return db
