"""Where decoded events live: Parquet files beside a database (or, for an in-memory database,
Arrow tables: :mod:`trace_report.store.memory`).

Either way DuckDB sees one relation, the TEMP VIEW ``events`` (columns in
:data:`~trace_report.formats.schema.EVENTS_SCHEMA`), created on every connection. Opening a
database reads its pieces through :mod:`trace_report.store.events_view`, without pyarrow.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from trace_report.store.layout import events_dir_for, unlink_inside

if TYPE_CHECKING:  # DuckDB is not imported here: the ingest starts writing pieces before it loads
    import duckdb

PARQUET_OPTIONS = {
    "compression": "lz4",
    "use_dictionary": ["cat", "name", "pid", "tid"],
    "write_statistics": ["trace_id", "event_id", "ts_us"],  # what queries filter on
}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write one events table (a piece or a whole small trace) to ``path``."""
    pq.write_table(table, path, **PARQUET_OPTIONS)


class ParquetStore:
    """Event files of one ingest into a database; :meth:`rollback` removes what it wrote."""

    def __init__(self, db_path: Path) -> None:
        self.folder = events_dir_for(db_path.absolute())
        self.token = secrets.token_hex(4)
        self.written: list[Path] = []
        self.retired: list[Path] = []

    def sibling(self) -> ParquetStore:
        """A store writing into the same folder under the same token, with nothing recorded: what
        a job that writes a whole file's pieces itself (possibly on another machine) is given."""
        other = object.__new__(ParquetStore)
        other.folder, other.token, other.written, other.retired = self.folder, self.token, [], []
        return other

    def path_for(self, trace_id: int, piece: int) -> Path:
        self.folder.mkdir(exist_ok=True)
        path = self.folder / f"t{trace_id:06d}-{self.token}-p{piece:05d}.parquet"
        self.written.append(path)
        return path

    def put(self, name: str, data: bytes) -> Path:
        """Write the bytes of a piece a job wrote elsewhere (a task on another machine) under its
        name, which must be one this ingest's token names (:meth:`path_for`). Raises ValueError
        for any other name."""
        if Path(name).name != name or not name.startswith("t") or f"-{self.token}-p" not in name \
                or not name.endswith(".parquet"):
            raise ValueError(f"not a piece name of this ingest: {name!r}")
        self.folder.mkdir(exist_ok=True)
        path = self.folder / name
        self.written.append(path)
        path.write_bytes(data)
        return path

    def forget(self, path: Path) -> None:
        """Delete a file this ingest wrote (a piece superseded by a merged one)."""
        path.unlink(missing_ok=True)
        if path in self.written:
            self.written.remove(path)

    def record(self, con: duckdb.DuckDBPyConnection, files: list[tuple[int, Path, int]]) -> None:
        """List Parquet files (trace id, path, rows) in ``event_files``: one statement for all of
        them (``executemany`` costs a statement per row, which a trace of many pieces feels)."""
        if not files:
            return
        con.execute(
            "INSERT INTO event_files VALUES " + ", ".join(["(?, ?, ?)"] * len(files)),
            [value for trace_id, p, rows in files for value in (trace_id, p.name, rows)],
        )

    def retire(self, con: duckdb.DuckDBPyConnection, trace_id: int) -> None:
        """Drop a trace's pieces from ``event_files``; the files go only at :meth:`commit`
        (the old database, which still lists them, stays readable until then)."""
        files = [f for (f,) in con.execute("SELECT file FROM event_files WHERE trace_id = ?", [trace_id]).fetchall()]
        con.execute("DELETE FROM event_files WHERE trace_id = ?", [trace_id])
        self.retired += [self.folder / f for f in files]

    def commit(self) -> None:
        """After the new database replaced the old one: delete the pieces it no longer lists (rows
        derived from them and kept beside the database no longer count: their pieces changed, so
        :mod:`trace_report.store.cache` ignores them and removes them on its next write)."""
        for path in self.retired:
            unlink_inside(path, self.folder)  # event_files may have been changed to name any file
        self.retired.clear()

    def rollback(self) -> None:
        """Delete every piece this ingest wrote: those it named, and those its jobs named
        themselves (:meth:`sibling`; found by this ingest's token)."""
        for path in self.written:
            path.unlink(missing_ok=True)
        self.written.clear()
        if self.folder.is_dir():
            for path in self.folder.glob(f"t*-{self.token}-p*.parquet"):
                path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.folder.rmdir()  # only when empty
