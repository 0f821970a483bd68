"""The ``events`` TEMP view of a database: over its Parquet pieces, or empty.

Opening a database needs only DuckDB (no pyarrow, no numpy): the pieces are read by DuckDB's
``read_parquet``; writing them is :mod:`trace_report.store.pieces`' job.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from trace_report.errors import DatabaseError
from trace_report.store.layout import events_dir_for  # noqa: F401  (re-exported)
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


def create_events_view_from_files(con: duckdb.DuckDBPyConnection, folder: Path) -> None:
    """(Re)create ``events`` over the Parquet files listed in ``event_files``. Raises
    :class:`DatabaseError` for a missing or unreadable file."""
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


def damaged_piece(exc: BaseException, files: list[str] | None = None) -> DatabaseError | None:
    """``Error: <db>: event piece <name> is damaged (...)`` for a DuckDB error that names one of a
    database's Parquet event files (a truncated or overwritten piece), else None.

    With ``files``, a piece the message does not name is found by reading each footer."""
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
