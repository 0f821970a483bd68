"""The events of one trace as a relation that reads its own Parquet pieces alone.

A query of ``events`` filtered on one ``trace_id`` still opens every piece of every trace (their
footers, to skip their row groups by the ``trace_id`` statistics): O(traces) per query, so an
analysis that reads one trace at a time (the critical path) was quadratic in the traces.
Where ``events`` is the database's own view over its
pieces (a database file, the views as trace-report made them: :func:`~trace_report.store.views.views_as_created`,
also inside a scope, which narrows whole traces), a trace's rows are those of the pieces that
``event_files`` lists for it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from trace_report import storage
from trace_report.storage import Location
from trace_report.store.events_view import database_file, piece_at, pieces_location
from trace_report.store.sql_quote import literal_list
from trace_report.store.views import views_as_created

EVENTS = "events"


def own_events_folder(con: duckdb.DuckDBPyConnection) -> Location | None:
    """The folder of the pieces behind ``con``'s ``events`` where they are the database's own: a
    database file whose folder exists (or whose object-store prefix it records, read through the
    file system registered on ``con``), on a connection whose views are those trace-report made (a
    notebook that redefined ``events`` or a rule view gets None); else None. What the derived
    tables kept beside a database (:mod:`trace_report.store.cache`) and
    :func:`trace_event_sources` both need."""
    path = database_file(con)
    if path is None:
        return None
    folder = pieces_location(con, path)
    try:
        there = storage.is_url(folder) or (isinstance(folder, Path) and folder.is_dir())
        return folder if there and views_as_created(con) else None
    except OSError:
        return None


def trace_event_sources(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """``{trace_id: SQL relation of that trace's events}`` (``read_parquet`` of its pieces) where
    the pieces can be read directly (:func:`own_events_folder`), else ``{}``: the caller reads
    :data:`EVENTS` (filtered on ``trace_id``) for a trace not in the dict."""
    folder = own_events_folder(con)
    if folder is None:
        return {}
    files: dict[int, list[str]] = {}
    for trace_id, file in con.execute("SELECT trace_id, file FROM event_files ORDER BY trace_id, file").fetchall():
        files.setdefault(int(trace_id), []).append(str(piece_at(folder, file)))
    return {t: f"read_parquet({literal_list(fs)})" for t, fs in files.items()}
