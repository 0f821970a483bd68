"""Run an analysis on some traces of a database only: the connection's ``traces`` and ``events``
narrowed to a set of ``trace_id`` for the length of a ``with`` block.

Every analysis reads the traces through ``traces`` and ``events`` (the analysis views are
defined over them, and DuckDB binds a view again at each use), so narrowing these two narrows
every number: the rows an analysis returns inside :func:`scoped` are those it returns on a
database holding those traces alone. That is how the commands keep runs apart
(:mod:`trace_report.store.run_identity`) without a second code path per analysis.

How: a TEMP view ``traces`` over the catalog's own table (a TEMP object is found before the
database's), and ``events`` made again over the same source filtered by ``trace_id``. Views
kept as tables (:func:`trace_report.store.kept_views.materialize`) are made plain again on entry and
on exit, so no copy outlives the scope. Results kept beside a database
(:mod:`trace_report.store.cache`) are per trace, so they stay valid and are still used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb

from trace_report.store.sql_quote import identifier
from trace_report.store.views import create_views, record_views, views_as_created

_CREATE_EVENTS = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?VIEW\s+events\s+AS\s+",
                            re.IGNORECASE)


def _events_sql(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("SELECT sql FROM duckdb_views() WHERE temporary AND view_name = 'events'").fetchone()
    if row is None or not _CREATE_EVENTS.match(str(row[0])):
        raise RuntimeError("no events view on this connection")
    return str(row[0]).rstrip().rstrip(";")


def _catalog_of_traces(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("SELECT database_name FROM duckdb_tables() WHERE table_name = 'traces' AND NOT temporary "
                      "AND schema_name = 'main' ORDER BY database_name = current_database() DESC LIMIT 1").fetchone()
    if row is None:
        raise RuntimeError("no traces table on this connection")
    return str(row[0])


def catalog_traces(con: duckdb.DuckDBPyConnection) -> str:
    """The qualified name of the database's own ``traces`` table, every trace whether or not a
    scope narrows the ``traces`` view. Raises ``RuntimeError`` when the connection has none."""
    return f"{identifier(_catalog_of_traces(con))}.main.traces"


def _materialized(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND "
                            "sql LIKE '%\\_materialized%' ESCAPE '\\'").fetchone()[0])


@contextmanager
def scoped(con: duckdb.DuckDBPyConnection, trace_ids: Sequence[int]) -> Iterator[None]:
    """Inside the block, ``traces`` and ``events`` on ``con`` hold only ``trace_ids``.

    Not re-entrant (one scope at a time per connection). On exit the connection's views are as
    they were (the events view's own definition is restored)."""
    events_sql = _events_sql(con)
    table = catalog_traces(con)
    as_created = views_as_created(con)
    ids = ", ".join(str(int(t)) for t in trace_ids) or "NULL"
    body = _CREATE_EVENTS.sub("", events_sql, count=1)
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW _events_unscoped AS {body}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM _events_unscoped "
                    f"WHERE trace_id IN ({ids})")
        con.execute(f"CREATE OR REPLACE TEMP VIEW traces AS SELECT * FROM {table} "
                    f"WHERE trace_id IN ({ids})")
        _refresh(con, as_created)
        yield
    finally:
        con.execute("DROP VIEW IF EXISTS temp.main.traces")
        con.execute(f"CREATE OR REPLACE TEMP VIEW events AS {body}")
        con.execute("DROP VIEW IF EXISTS temp.main._events_unscoped")
        _refresh(con, as_created)


def _refresh(con: duckdb.DuckDBPyConnection, as_created: bool) -> None:
    """Plain views again where a scope's events would otherwise be read from a kept copy; the
    fingerprint of views trace-report made recorded again (narrowing whole traces keeps every
    per-trace result valid)."""
    if _materialized(con):
        create_views(con)
    if as_created:
        record_views(con)
