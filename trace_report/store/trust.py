"""A database file is untrusted input: what :mod:`trace_report.store.database` checks on open.

Anyone may have changed a ``.duckdb`` file (``sql --write``, the DuckDB shell, another program),
and every query of every command runs against its catalog. DuckDB looks an unqualified function
name up in the database before its built-ins, so a persistent ``CREATE MACRO avg(x) AS ...``
changes every ``avg`` of every view (and could read a file or a URL); a persistent view named like
one of ours would change what a command reads. So on open (:func:`check_catalog`):

- a macro or function the database holds (``duckdb_functions()``, not ``internal``), a type
  (``duckdb_types()``) or a trigger (``duckdb_triggers()``: it would run inside an ingest's writes)
  is refused: trace-report creates none, and ``sql --write`` may not either;
- a table or view named like one of the TEMP views, macros or tables trace-report creates on
  every connection (:func:`reserved_names`) is refused;
- each table of ``store/sql/schema.sql`` and ``tables_ncu.sql`` that is there must have each of its
  columns with its type (a column dropped or retyped by ``ALTER TABLE``: refused); other tables
  and views (made by ``sql --write``) and columns added to ours are left alone;
- ``traces.trace_id`` and ``traces.rank`` may not be NULL (every analysis groups by them);
- every ``event_files.file`` resolves (symbolic links followed) to a file inside the database's
  own events folder (:func:`event_file_paths`): the events view reads them and an ingest that
  replaces a trace deletes them; with pieces in object storage, each is a piece's name
  (:data:`~trace_report.store.layout.PIECE_NAME`) directly under the prefix the database records.

Each refusal is one :class:`~trace_report.errors.DatabaseError` line naming the objects.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import duckdb

from trace_report.errors import DatabaseError
from trace_report.pathtext import printable
from trace_report.storage import Location, shown
from trace_report.store.layout import PIECE_NAME, database_path, events_dir_for, inside, is_database_file, piece_at  # noqa: F401
from trace_report.store.remote_pieces import pieces_location
from trace_report.store.views import sql_text, statements

TABLE_FILES = ("schema.sql", "tables_ncu.sql")
"""The SQL artifacts that create trace-report's persistent tables."""
RUN_TABLES = ("runs", "run_traces", "trace_runs", "run_metrics", "run_steps", "run_results", "_events_unscoped")
"""TEMP tables and views made on every connection outside ``store/sql`` (:mod:`trace_report.store.runs`,
:mod:`trace_report.store.run_identity`, :mod:`trace_report.store.run_scope`)."""

_TABLE = re.compile(r"CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+)\s*\((.*?)\n\);", re.IGNORECASE | re.DOTALL)
_COLUMN = re.compile(r"^\s*(\w+)\s+([A-Z]+(?:\[\])?)", re.MULTILINE)


@cache
def our_tables() -> dict[str, dict[str, str]]:
    """``{table: {column: DuckDB type}}`` of the persistent tables trace-report creates, read
    from :data:`TABLE_FILES` (types as ``duckdb_columns().data_type`` spells them)."""
    tables: dict[str, dict[str, str]] = {}
    for name in TABLE_FILES:
        for m in _TABLE.finditer(re.sub(r"--[^\n]*", "", sql_text(name))):
            tables[m.group(1)] = {c: t.upper() for c, t in _COLUMN.findall(m.group(2))}
    return tables


@cache
def reserved_names() -> frozenset[str]:
    """The names of the TEMP views, macros and tables trace-report creates on a connection:
    a persistent object of one of these names is refused."""
    return frozenset({s.name.lower() for s in statements()} | {"events", *RUN_TABLES})


def check_catalog(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Raise :class:`DatabaseError` when the database behind ``con`` holds objects trace-report
    did not create where they would change what it reads (the module docstring)."""
    found = _foreign_functions(con) + _shadowing(con) + _changed_columns(con)
    if found:
        shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
        raise DatabaseError(f"{printable(path)}: holds what trace-report did not create and will not run: {shown} "
                            "(drop them with trace-report sql --unsafe, or ingest into a new file)")
    nulls = con.execute("SELECT count(*) FROM traces WHERE trace_id IS NULL OR rank IS NULL").fetchall()[0][0]
    if nulls:
        raise DatabaseError(f"{printable(path)}: {nulls} row(s) of traces have no trace_id or rank "
                            "(changed outside trace-report); ingest into a new file")


def _foreign_functions(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT function_type, schema_name, function_name FROM duckdb_functions() "
        "WHERE database_name = current_database() AND NOT internal "
        "UNION SELECT 'type', schema_name, type_name FROM duckdb_types() "
        "WHERE database_name = current_database() AND NOT internal "
        "UNION SELECT 'trigger', schema_name, trigger_name FROM duckdb_triggers() "
        "WHERE database_name = current_database() ORDER BY 3").fetchall()
    return [f"{kind.replace('_', ' ')} {schema}.{name}" for kind, schema, name in rows]


def _shadowing(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT 'view', view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal "
        "UNION ALL SELECT 'table', table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND NOT internal ORDER BY 2").fetchall()
    ours = our_tables()
    return [f"{kind} {name} (a name trace-report uses)" for kind, name in rows
            if name.lower() in reserved_names() and not (kind == "table" and name in ours)]


def _changed_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main'").fetchall()
    present: dict[str, dict[str, str]] = {}
    for table, column, typ in rows:
        present.setdefault(table, {})[column] = typ
    found = []
    for table, columns in our_tables().items():
        if table not in present:
            continue  # a missing table: check_ours (traces, event_files) or none needed (ncu)
        for column, typ in columns.items():
            have = present[table].get(column)
            if have is None:
                found.append(f"table {table} without its column {column}")
            elif have != typ:
                found.append(f"column {table}.{column} of type {have} (not {typ})")
    return found


def check_database(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """:func:`check_catalog` and :func:`event_file_paths`: what every open checks, and what a
    ``sql --write`` script must leave (else it is rolled back)."""
    path = database_path(path)
    check_catalog(con, path)
    event_file_paths(con, path)


def check_written(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """:func:`check_database` for what a ``sql --write`` script leaves, before it commits: the
    :class:`DatabaseError` says that the script is rolled back."""
    try:
        check_database(con, path)
    except DatabaseError as exc:
        raise DatabaseError(f"sql: the script was rolled back: every command would refuse the database it "
                            f"leaves ({exc})") from exc


def event_file_paths(con: duckdb.DuckDBPyConnection, db_path: Path) -> list[tuple[int, Location]]:
    """``(trace_id, path)`` of every row of ``event_files`` (in trace and file order), each path
    inside the database's events folder (or, in object storage, a piece's name under its prefix).
    Raises :class:`DatabaseError` for a name that resolves (symbolic links followed) outside it:
    ``/elsewhere/notes.txt``, ``../victim.parquet``."""
    folder = pieces_location(con, db_path)
    rows = con.execute("SELECT trace_id, file FROM event_files ORDER BY trace_id, file").fetchall()
    if not rows:
        return []
    if not isinstance(folder, Path):
        return _piece_urls(rows, folder, db_path)
    root = os.path.realpath(folder)
    out, outside = [], []
    for trace_id, name in rows:
        path = folder / str(name)
        if name is None or trace_id is None or not inside(path, root):
            outside.append(str(name))
        out.append((trace_id, path))
    if outside:
        raise DatabaseError(f"{printable(db_path)}: event_files lists {len(outside)} file(s) outside its events "
                            f"folder {printable(folder)} (first: {printable(outside[0])}); it was changed outside "
                            "trace-report: ingest into a new file")
    return out


def _piece_urls(rows: list[tuple[int, str]], url: str, db_path: Path) -> list[tuple[int, Location]]:
    bad = [str(name) for trace_id, name in rows
           if trace_id is None or name is None or not PIECE_NAME.fullmatch(str(name))]
    if bad:
        raise DatabaseError(f"{printable(db_path)}: event_files lists {len(bad)} name(s) that are no event piece's "
                            f"under {shown(url)} (first: {printable(bad[0])}); it was changed outside "
                            "trace-report: ingest into a new file")
    return [(trace_id, piece_at(url, name)) for trace_id, name in rows]
