"""The ``events`` TEMP view of a database: over its Parquet pieces, or empty.

Opening a database needs only DuckDB (no pyarrow, no numpy): the pieces are read by DuckDB's
``read_parquet``; writing them is :mod:`trace_report.store.pieces`' job. Pieces in object storage
(:mod:`trace_report.store.remote_pieces`) are read through the prefix's file system registered on
the connection (pyarrow then loads).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from trace_report import storage
from trace_report.errors import DatabaseError
from trace_report.storage import Location
from trace_report.store.layout import events_dir_for, piece_at  # noqa: F401  (re-exported)
from trace_report.store.remote_pieces import pieces_location  # noqa: F401  (re-exported)
from trace_report.store.sandbox import record_event_dirs
from trace_report.store.sql_quote import literal_list

EVENTS_COLUMNS: list[tuple[str, str]] = [
    ("trace_id", "INTEGER"), ("event_id", "BIGINT"), ("cat", "VARCHAR"), ("name", "VARCHAR"),
    ("pid", "VARCHAR"), ("tid", "VARCHAR"), ("ts_us", "DOUBLE"), ("dur_us", "DOUBLE"),
    ("stream", "BIGINT"), ("device", "BIGINT"), ("correlation", "BIGINT"), ("external_id", "BIGINT"),
    ("args", "VARCHAR"),
]
"""The columns of ``events`` with their DuckDB types: the SQL twin of
:data:`trace_report.formats.schema.EVENTS_SCHEMA` (a test keeps the two equal)."""


def database_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The file of the database behind ``con``; None for a database in memory."""
    rows = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return Path(rows[0][0]) if rows and rows[0][0] else None


def empty_events_view(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create ``events`` as an empty relation with the columns of :data:`EVENTS_COLUMNS`."""
    cols = ", ".join(f"CAST(NULL AS {typ}) AS {name}" for name, typ in EVENTS_COLUMNS)
    con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT {cols} WHERE false")


def create_events_view_from_files(con: duckdb.DuckDBPyConnection, folder: Location) -> None:
    """(Re)create ``events`` over the Parquet files listed in ``event_files``, in the folder or
    object-store prefix ``folder``. Raises :class:`DatabaseError` for a missing or unreadable file
    (:class:`~trace_report.errors.InputError` for a prefix that cannot be listed)."""
    if storage.is_url(folder):
        _create_over_objects(con, str(folder))
        return
    assert isinstance(folder, Path)
    rows = con.execute("SELECT file FROM event_files ORDER BY trace_id, file").fetchall()
    files = [str(folder / f) for (f,) in rows]
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        raise DatabaseError(f"{folder}: {len(missing)} event file(s) are missing (first: {missing[0]})")
    if (bad := next((f for f in files if not is_parquet(f)), None)) is not None:
        raise DatabaseError(f"{_database_of(folder)}: event piece {Path(bad).name} is damaged (not a Parquet file: "
                            "no PAR1 at its start and end)")
    if not files:
        empty_events_view(con)
        return
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM read_parquet({literal_list(files)})")
    except duckdb.Error as exc:
        raise damaged_piece(exc, files) or DatabaseError(
            f"{_database_of(folder)}: cannot read its event files ({_first_line(exc)})") from exc
    record_event_dirs(con, [str(folder)])


def _create_over_objects(con: duckdb.DuckDBPyConnection, url: str) -> None:
    """``events`` over pieces under the prefix ``url``: listed once (a missing piece is said at once;
    their bytes are checked by DuckDB as queries read them, :func:`damaged_piece`)."""
    rows = con.execute("SELECT file FROM event_files ORDER BY trace_id, file").fetchall()
    files = [str(piece_at(url, f)) for (f,) in rows]
    present = {str(o.location) for o in storage.list_prefix(url)} if files else set()
    missing = [f for f in files if f not in present]
    if missing:
        raise DatabaseError(f"{storage.shown(url)}: {len(missing)} event piece(s) are missing "
                            f"(first: {storage.name_of(missing[0])})")
    record_event_dirs(con, [url])
    if not files:
        empty_events_view(con)
        return
    storage.register(con, url, unchanging=True)
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM read_parquet({literal_list(files)})")
    except duckdb.Error as exc:
        raise damaged_piece(exc) or DatabaseError(
            f"{storage.shown(url)}: cannot read its event pieces ({_first_line(exc)})") from exc


def is_parquet(path: str) -> bool:
    """Whether the file at ``path`` starts and ends with Parquet's magic ``PAR1`` (DuckDB reads every
    piece but the first only when a query does: a foreign file would fail there, with a traceback)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            f.seek(-4, os.SEEK_END)
            return head == b"PAR1" and f.read(4) == b"PAR1"
    except OSError:
        return False


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _database_of(folder: Path) -> Path:
    return folder.with_name(folder.name.removesuffix(".events"))


_PIECE_PATH = re.compile(r"(/[^'\"\n]*?\.events)/([^/'\"\s]+\.parquet)")
_PIECE_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+://[^'\"\s]*?)/(t\d+-[0-9a-f]+-p\d+\.parquet)")


def damaged_piece(exc: BaseException, files: list[str] | None = None) -> DatabaseError | None:
    """``Error: <db>: event piece <name> is damaged (...)`` for a DuckDB error that names one of a
    database's Parquet event files (a truncated or overwritten piece), else None.

    With ``files``, a piece the message does not name is found by reading each footer."""
    if (url := _PIECE_URL.search(str(exc))) is not None:  # a piece in object storage
        return DatabaseError(f"{storage.shown(url.group(1))}: event piece {url.group(2)} is damaged "
                             f"({_first_line(exc)})")
    m = _PIECE_PATH.search(str(exc))
    if m is not None:
        folder, name = Path(m.group(1)), m.group(2)
    else:
        bad = next((f for f in files or [] if not _footer_ok(f)), None)
        if bad is None:
            return None
        folder, name = Path(bad).parent, Path(bad).name
    return DatabaseError(f"{_database_of(folder)}: event piece {name} is damaged ({_first_line(exc)})")


def _footer_ok(path: str) -> bool:
    try:
        with duckdb.connect(":memory:") as con:
            con.execute("SELECT count(*) FROM parquet_metadata(?)", [path]).fetchall()
    except (OSError, duckdb.Error):
        return False
    return True
