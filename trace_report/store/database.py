"""DuckDB files: create the schema, recognise our databases, write atomically, clean up.

The path, the lock and what a killed writer leaves are :mod:`trace_report.store.layout`'s
(standard library only); :func:`clean_leftovers` removes those leftovers, with a note.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from trace_report.errors import DatabaseError
from trace_report.pathtext import printable
from trace_report.store.cache import prune as prune_derived
from trace_report.store.events_view import (
    create_events_view_from_files,
    empty_events_view,
    events_dir_for,
    pieces_location,
)
from trace_report.store.layout import (
    database_path,
    remove_database_file,
    stale_copies,
)
from trace_report.store.sandbox import sandbox
from trace_report.store.trust import check_catalog, event_file_paths
from trace_report.store.views import create_views, record_views, sql_text

SCHEMA_VERSION = "1"
"""The ``schema_version`` this code writes (``trace_report_info``). A database that records a
later one, or one that is not a whole number, was written by a newer trace-report: it is never
written here (its tables may mean more than this code knows, and :func:`create_schema` would
record the older version over it), and is read with a warning (:func:`newer_schema`)."""
APP = "trace-report"
REQUIRED_TABLES = ("traces", "event_files")
"""Tables every trace-report database has; one with the marker but without them is half made."""


def create_schema(con: duckdb.DuckDBPyConnection, with_views: bool = False) -> None:
    """Create the tables (idempotent) and mark the database as ours.

    Views need the ``events`` view first (see :mod:`trace_report.store.pieces`), so they are
    created separately with :func:`~trace_report.store.views.create_views`, unless
    ``with_views`` (then ``events`` is an empty relation until traces arrive).
    """
    con.execute(sql_text("schema.sql"))
    con.execute(
        "INSERT INTO trace_report_info VALUES ('app', ?), ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [APP, SCHEMA_VERSION],
    )
    if with_views:
        empty_events_view(con)
        create_views(con)


def duckdb_name(path: Path) -> str:
    """``path`` as DuckDB opens it. Raises :class:`DatabaseError` for a name that is not valid
    UTF-8 (Python keeps its bytes as surrogate escapes; DuckDB's C++ side fails on them with
    ``std::bad_cast``, a RuntimeError and a traceback)."""
    name = os.fspath(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise DatabaseError(f"{printable(path)}: DuckDB cannot open a database whose name is not valid UTF-8; "
                            "rename it, or give a link to it with a UTF-8 name") from None
    return name


def _friendly(exc: Exception, path: Path) -> DatabaseError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "lock" in text.lower():
        return DatabaseError(f"{path}: the database is in use by another process ({text})")
    return DatabaseError(f"{path}: not a DuckDB database or unreadable ({text})")


def check_ours(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Raise :class:`DatabaseError` unless ``con`` holds a trace-report database."""
    try:
        row = con.execute("SELECT value FROM trace_report_info WHERE key = 'app'").fetchone()
    except duckdb.Error:
        row = None
    if not row or row[0] != APP:
        raise DatabaseError(f"{path}: a DuckDB database, but not one written by trace-report")
    present = {n for (n,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
    missing = [t for t in REQUIRED_TABLES if t not in present]
    if missing:
        raise DatabaseError(f"{path}: an incomplete trace-report database (no {' or '.join(missing)} table; "
                            "was its ingest interrupted?); ingest into a new file")


def _unknown_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The database's ``schema_version`` where this code does not know it (later than
    :data:`SCHEMA_VERSION`, or not a whole number), else None (no version recorded: version 1)."""
    row = con.execute("SELECT value FROM trace_report_info WHERE key = 'schema_version'").fetchone()
    text = "" if row is None or row[0] is None else str(row[0]).strip()
    if not text or (text.isdigit() and int(text) <= int(SCHEMA_VERSION)):
        return None
    return text


def newer_schema(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """The warning for a database of a schema this code does not know, or None."""
    version = _unknown_version(con)
    if version is None:
        return None
    return (f"{path}: written by a newer trace-report (schema version {version!r}, this one knows "
            f"{SCHEMA_VERSION}); tables and columns this version does not know are ignored")


def _check_writable(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Raise :class:`DatabaseError` when the database's schema is newer than this code's."""
    version = _unknown_version(con)
    if version is not None:
        raise DatabaseError(f"{path}: written by a newer trace-report (schema version {version!r}, this one "
                            f"writes {SCHEMA_VERSION}); left unchanged: upgrade trace-report or write a new file")


def _open_ours(path: Path, read_only: bool, *, writing: bool = False,
               trusting: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to ``path`` after checking it is a trace-report database (else closed), and,
    ``writing``, one whose schema this code knows (:func:`_check_writable`); one whose catalog
    holds nothing trace-report did not make unless ``trusting`` (:mod:`trace_report.store.trust`),
    and whose event files lie in its events folder."""
    try:
        con = duckdb.connect(duckdb_name(path), read_only=read_only)
    except duckdb.Error as exc:
        raise _friendly(exc, path) from exc
    try:
        check_ours(con, path)
        if writing:
            _check_writable(con, path)
        if not trusting:
            check_catalog(con, path)  # a database is untrusted input (store/trust.py)
        event_file_paths(con, path)
    except DatabaseError:
        con.close()
        raise
    return con


def connect_existing(path: Path, *, read_only: bool = True, warnings: list[str] | None = None,
                     views: Collection[str] | None = None, sandboxed: bool = True, unsafe: bool = False,
                     settings: Mapping[str, str] | None = None) -> duckdb.DuckDBPyConnection:
    """Open an existing trace-report database and create its TEMP views: ``events`` over the
    Parquet files beside it (:func:`~trace_report.store.events_view.create_events_view_from_files`),
    then the analysis views over it, each bound when a query reads it. ``views``: only these
    views and those they read (:func:`~trace_report.store.views.create_views`' ``only``; a
    command that reads a few).

    A database of a newer schema (:func:`newer_schema`) is refused unless ``read_only``
    (:class:`DatabaseError`); read only, its warning is appended to ``warnings`` (the caller's
    :attr:`~trace_report.store.tracedb.IngestSummary.warnings`, printed once) when given.

    The database is untrusted input: what it holds beyond trace-report's own objects is refused
    (:mod:`trace_report.store.trust`), and, ``sandboxed``, the connection reads and writes no file
    outside the database's events folder, loads no extension and its settings are locked
    (:func:`~trace_report.store.sandbox.sandbox`, after ``settings``: DuckDB settings by name).
    ``unsafe`` (``sql --unsafe``): the catalog is not checked either (the events folder still is).
    Pieces in object storage (:mod:`~trace_report.store.remote_pieces`) are read through their
    prefix's file system, and that prefix is then the one place the sandbox lets it read."""
    if not path.is_file():
        raise DatabaseError(f"{path}: no such database file")
    path = database_path(path)
    con = _open_ours(path, read_only, writing=not read_only, trusting=unsafe)
    try:
        warning = newer_schema(con, path) if read_only else None
        if warning is not None and warnings is not None and warning not in warnings:
            warnings.append(warning)
        pieces = pieces_location(con, path)
        create_events_view_from_files(con, pieces)
        create_views(con, views, record=False)  # bound when a query reads them (views.deferred)
        record_views(con)  # the views as created, over every file
        for name, value in (settings or {}).items():
            con.execute(f"SET {name} = $value", {"value": value})
        if sandboxed:
            sandbox(con, [str(pieces)])
    except BaseException:
        con.close()
        raise
    return con


def _check_existing(path: Path) -> None:
    _open_ours(path, read_only=True, writing=True).close()


def clean_leftovers(path: Path) -> list[str]:
    """Remove what a killed writer left beside the database (call with the lock held):
    ``.<name>.tmp-<pid>`` copies of dead processes, and Parquet pieces in ``<name>.events/``
    that the database does not list. Returns one note per kind of leftover removed. Raises
    :class:`DatabaseError`, removing nothing, for a database this code may not write
    (:data:`SCHEMA_VERSION`)."""
    rows: list[tuple[int, str]] = []
    if path.is_file():  # first: a database this code may not write keeps everything beside it
        con = _open_ours(path, read_only=True, writing=True)
        try:
            rows = con.execute("SELECT trace_id, file FROM event_files").fetchall()
        finally:
            con.close()
    notes = []
    stale = stale_copies(path)
    for tmp in stale:
        remove_database_file(tmp)
    if stale:
        notes.append(f"{path}: removed {len(stale)} temporary copy(ies) left by an interrupted ingest")
    folder = events_dir_for(path)
    if folder.is_dir():
        listed = {f for _, f in rows}
        orphans = [p for p in folder.glob("*.parquet") if p.name not in listed]
        for piece in orphans:
            piece.unlink(missing_ok=True)
        if orphans:
            notes.append(f"{path}: removed {len(orphans)} orphan event piece(s) left by an interrupted ingest")
        prune_derived(folder, rows)  # tables derived from pieces no longer listed: no note, nothing was lost
    return notes


def _copy_owner_and_mode(src: Path, dst: Path) -> None:
    st = src.stat()
    os.chmod(dst, st.st_mode & 0o7777)
    with suppress(PermissionError, AttributeError):
        os.chown(dst, st.st_uid, st.st_gid)


@contextmanager
def atomic_database(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection to a temporary copy of ``path``; on success rename it over ``path``.

    The database at ``path`` is never modified in place: on any error the copy is removed and
    ``path`` stays byte for byte as it was. The replacement keeps the file's mode and owner; a
    symbolic link is written through to its target. The caller holds :func:`database_lock`.
    Raises :class:`DatabaseError` when ``path`` exists but is not a trace-report database, was
    written by a newer trace-report (:data:`SCHEMA_VERSION`) or cannot be written.
    """
    path = database_path(path)
    duckdb_name(path)  # refused before anything is written
    if path.is_dir():
        raise DatabaseError(f"{path}: is a directory, not a database file")
    if not path.parent.is_dir():
        raise DatabaseError(f"{path.parent}: no such directory for the database")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    remove_database_file(tmp)
    try:
        if path.exists():
            _check_existing(path)
            shutil.copyfile(path, tmp)
            _copy_owner_and_mode(path, tmp)
        con = duckdb.connect(duckdb_name(tmp))
    except (OSError, duckdb.Error) as exc:
        remove_database_file(tmp)
        raise _write_error(exc, path) from exc
    try:
        create_schema(con)
        yield con
        con.execute("CHECKPOINT")
        con.close()
        os.replace(tmp, path)
    except (OSError, duckdb.IOException) as exc:  # a full disk: DuckDB reports it as an IOException
        con.close()
        remove_database_file(tmp)
        raise _write_error(exc, path) from exc
    except BaseException:
        con.close()
        remove_database_file(tmp)
        raise


def _write_error(exc: Exception, path: Path) -> DatabaseError:
    if isinstance(exc, duckdb.Error) and "lock" in str(exc).lower():
        return _friendly(exc, path)
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
    if isinstance(exc, OSError) and exc.filename:
        text += f": {exc.filename}"
    return DatabaseError(f"{path}: cannot write the database, it is left as it was ({text})")
