"""Where decoded events live: Parquet files beside a database, or under an object-store prefix
(``ingest --pieces s3://...``, :mod:`trace_report.store.remote_pieces`), or, for an in-memory
database, Arrow tables (:mod:`trace_report.store.memory`).

Either way DuckDB sees one relation, the TEMP VIEW ``events`` (columns in
:data:`~trace_report.formats.schema.EVENTS_SCHEMA`), created on every connection. Opening a
database reads its pieces through :mod:`trace_report.store.events_view`, without pyarrow.
A piece's location is a :class:`~pathlib.Path`, or a URL as text in object storage.
"""

from __future__ import annotations

import contextlib
import fnmatch
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from trace_report import storage
from trace_report.errors import InputError
from trace_report.storage import Location
from trace_report.store.layout import PIECE_NAME, events_dir_for, piece_at, unlink_inside
from trace_report.store.remote_pieces import record_location

if TYPE_CHECKING:  # DuckDB is not imported here: the ingest starts writing pieces before it loads
    import duckdb

PARQUET_OPTIONS = {
    "compression": "lz4",
    "use_dictionary": ["cat", "name", "pid", "tid"],
    "write_statistics": ["trace_id", "event_id", "ts_us"],  # what queries filter on
}


def write_parquet(table: pa.Table, path: Location) -> None:
    """Write one events table (a piece or a whole small trace) to ``path`` (a file or an object)."""
    if storage.is_url(path):
        storage.write_parquet(table, path, **PARQUET_OPTIONS)
    else:
        pq.write_table(table, path, **PARQUET_OPTIONS)


def read_piece(path: Location, columns: list[str] | None = None) -> pa.Table:
    """The rows of one piece (``columns`` only, when given), from a file or an object."""
    if not storage.is_url(path):
        return pq.read_table(path, columns=columns)
    fs, key = storage.filesystem(str(path))
    try:
        return pq.read_table(key, columns=columns, filesystem=fs)
    except OSError as exc:
        raise storage.storage_error(path, exc) from exc


class ParquetStore:
    """Event files of one ingest into a database; :meth:`rollback` removes what it wrote.
    ``folder``: the database's events folder, or the object-store prefix of its pieces with
    ``pieces_id``, the id that prefix's marker holds (:mod:`trace_report.store.remote_pieces`)."""

    def __init__(self, db_path: Path, folder: Location | None = None, pieces_id: str | None = None) -> None:
        self.folder: Location = folder if folder is not None else events_dir_for(db_path.absolute())
        self.pieces_id = pieces_id
        self.token = secrets.token_hex(4)
        self.written: list[Location] = []
        self.retired: list[Location] = []

    @property
    def remote(self) -> bool:
        """Whether the pieces go to object storage."""
        return storage.is_url(self.folder)

    def sibling(self) -> ParquetStore:
        """A store writing into the same folder under the same token, with nothing recorded: what
        a job that writes a whole file's pieces itself (possibly on another machine) is given."""
        other = object.__new__(ParquetStore)
        other.folder, other.pieces_id, other.token = self.folder, self.pieces_id, self.token
        other.written, other.retired = [], []
        return other

    def _at(self, name: str) -> Location:
        if isinstance(self.folder, Path):
            self.folder.mkdir(exist_ok=True)
        return piece_at(self.folder, name)

    def path_for(self, trace_id: int, piece: int) -> Location:
        path = self._at(f"t{trace_id:06d}-{self.token}-p{piece:05d}.parquet")
        self.written.append(path)
        return path

    def put(self, name: str, data: bytes) -> Location:
        """Write the bytes of a piece a job wrote elsewhere (a task on another machine) under its
        name, which must be one this ingest's token names (:meth:`path_for`). Raises ValueError
        for any other name."""
        if Path(name).name != name or not name.startswith("t") or f"-{self.token}-p" not in name \
                or not name.endswith(".parquet"):
            raise ValueError(f"not a piece name of this ingest: {name!r}")
        path = self._at(name)
        self.written.append(path)
        storage.write_bytes(path, data)
        return path

    def forget(self, path: Location) -> None:
        """Delete a file this ingest wrote (a piece superseded by a merged one)."""
        storage.delete(path)
        if path in self.written:
            self.written.remove(path)

    def record(self, con: duckdb.DuckDBPyConnection, files: list[tuple[int, Location, int]]) -> None:
        """List Parquet files (trace id, path, rows) in ``event_files``: one statement for all of
        them (``executemany`` costs a statement per row, which a trace of many pieces feels)."""
        if not files:
            return
        con.execute(
            "INSERT INTO event_files VALUES " + ", ".join(["(?, ?, ?)"] * len(files)),
            [value for trace_id, p, rows in files for value in (trace_id, storage.name_of(p), rows)],
        )

    def record_location(self, con: duckdb.DuckDBPyConnection) -> None:
        """Record where the pieces are (``trace_report_info``: ``pieces`` and ``pieces_id``) when
        they are in object storage; nothing for the events folder beside the database."""
        if self.remote:
            record_location(con, str(self.folder), self.pieces_id or "")

    def retire(self, con: duckdb.DuckDBPyConnection, trace_id: int) -> None:
        """Drop a trace's pieces from ``event_files``; the files go only at :meth:`commit`
        (the old database, which still lists them, stays readable until then)."""
        files = [f for (f,) in con.execute("SELECT file FROM event_files WHERE trace_id = ?", [trace_id]).fetchall()]
        con.execute("DELETE FROM event_files WHERE trace_id = ?", [trace_id])
        self.retired += [piece_at(self.folder, f) for f in files]

    def commit(self) -> None:
        """After the new database replaced the old one: delete the pieces it no longer lists (rows
        derived from them and kept beside the database no longer count: their pieces changed, so
        :mod:`trace_report.store.cache` ignores them and removes them on its next write)."""
        for path in self.retired:
            if isinstance(path, Path):
                assert isinstance(self.folder, Path)
                unlink_inside(path, self.folder)  # event_files may have been changed to name any file
            elif PIECE_NAME.fullmatch(storage.name_of(path)):  # in a bucket, only what an ingest names
                storage.delete(path)
        self.retired.clear()

    def rollback(self) -> None:
        """Delete every piece this ingest wrote: those it named, and those its jobs named
        themselves (:meth:`sibling`; found by this ingest's token)."""
        for path in self.written:
            storage.delete(path)
        self.written.clear()
        mine = f"t*-{self.token}-p*.parquet"
        if self.remote:
            with contextlib.suppress(InputError):  # the bucket cannot be reached: nothing more to do
                for obj in storage.list_prefix(self.folder):
                    if fnmatch.fnmatchcase(storage.name_of(obj.location), mine):
                        storage.delete(obj.location)
            return
        assert isinstance(self.folder, Path)
        if self.folder.is_dir():
            for path in self.folder.glob(mine):
                path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.folder.rmdir()  # only when empty
