"""The ``sql`` command's sandbox: queries read the traces and nothing else.

Two layers (DuckDB's own settings, then a statement check, since DuckDB's allowed directories
may also be written): :func:`sandbox` lets the connection read only the folders its ``events``
view reads (``allowed_directories``), turns off every other file and network access and
extension loading (``enable_external_access = false``, ``autoinstall/autoload_known_extensions =
false``) and locks the configuration so that SQL cannot turn them on again;
:func:`check_statements` admits only queries, plus changing statements (INSERT, UPDATE, CREATE,
...) with ``--write``. COPY, EXPORT, ATTACH, INSTALL and LOAD need ``--unsafe``. See
https://duckdb.org/docs/2.0/operations_manual/securing_duckdb/overview.
"""

from __future__ import annotations

import duckdb

from trace_report.errors import InputError

EVENT_DIRS = "trace_report_event_dirs"
"""The DuckDB variable (``SET VARIABLE``) naming the folders the ``events`` view reads."""

QUERIES = {"SELECT", "EXPLAIN", "PRAGMA", "RELATION", "SET", "VARIABLE_SET", "TRANSACTION", "PREPARE", "EXECUTE"}
CHANGES = {"INSERT", "UPDATE", "DELETE", "CREATE", "CREATE_FUNC", "DROP", "ALTER", "ANALYZE", "VACUUM",
           "MERGE_INTO", "CALL", "MULTI"}


def record_event_dirs(con: duckdb.DuckDBPyConnection, folders: list[str]) -> None:
    """Remember which folders the ``events`` view reads (for :func:`sandbox`)."""
    con.execute(f"SET VARIABLE {EVENT_DIRS} = $dirs", {"dirs": [f.rstrip("/") + "/" for f in folders]})


def check_statements(con: duckdb.DuckDBPyConnection, query: str, *, allow_changes: bool) -> None:
    """Raise :class:`InputError` for any statement in ``query`` outside the sandbox."""
    for statement in con.extract_statements(query):
        kind = statement.type.name
        if kind in QUERIES or (allow_changes and kind in CHANGES):
            continue
        hint = "add --write to change the database" if kind in CHANGES else "add --unsafe to allow it"
        raise InputError(f"sql: a {kind} statement is not allowed here ({hint})")


def sandbox(con: duckdb.DuckDBPyConnection) -> None:
    """Restrict ``con`` to reading its own traces (see the module docstring)."""
    try:
        dirs = con.execute(f"SELECT getvariable('{EVENT_DIRS}')").fetchone()
    except duckdb.Error:
        dirs = None
    folders = list(dirs[0]) if dirs and dirs[0] else []
    con.execute("SET allowed_directories = $dirs", {"dirs": folders})
    for setting in ("enable_external_access", "autoinstall_known_extensions", "autoload_known_extensions"):
        con.execute(f"SET {setting} = false")
    con.execute("SET lock_configuration = true")
