"""A database's events cut into partitions that one task can aggregate alone (``docs/scaling.md``).

A partition is a set of traces (their ``traces`` rows) and the Parquet files that hold their
events, and nothing else: every view of ``store/sql`` works on it as on the whole database, and
an analysis that computes per trace (or per rank) gives on a partition exactly its share of the
whole. Two sources:

- a ``.duckdb`` database written by ``trace-report ingest``: one partition per trace, its pieces
  from ``event_files`` in ``<db>.events/``;
- a Parquet dataset written by ``trace-report export``: one partition per
  ``events/run_id=<run>/rank=<rank>/`` folder, with the traces of that run and rank.

Databases opened from trace files into memory have no files to hand out (:func:`event_partitions`
raises; ingest them first).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import duckdb
import pyarrow as pa

from trace_report import storage
from trace_report.errors import InputError
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.store.database import create_schema
from trace_report.store.events_view import database_file, piece_at, pieces_location
from trace_report.store.sandbox import EVENT_DIRS
from trace_report.store.sql_quote import identifier, literal_list
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import create_views

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class EventPartition:
    """``key`` (``trace 3`` or ``run_id=r/rank=0``), the ``traces`` rows of its traces (Arrow,
    the table's columns) and the absolute paths of the Parquet files with their events."""

    key: str
    traces: pa.Table
    files: tuple[str, ...]

    @property
    def trace_ids(self) -> list[int]:
        return [int(t) for t in self.traces.column("trace_id").to_pylist()]


def _event_dirs(con: duckdb.DuckDBPyConnection) -> list[str]:
    try:
        rows = con.execute(f"SELECT getvariable('{EVENT_DIRS}')").fetchall()
    except duckdb.Error:
        return []
    return list(rows[0][0]) if rows and rows[0][0] else []


def _traces(con: duckdb.DuckDBPyConnection, trace_ids: list[int] | None) -> pa.Table:
    return con.sql("SELECT * FROM traces WHERE $ids IS NULL OR list_contains($ids, trace_id) ORDER BY trace_id",
                   params={"ids": trace_ids}).to_arrow_table()


def _from_database(con: duckdb.DuckDBPyConnection, path: Path, trace_ids: list[int] | None) -> list[EventPartition]:
    folder = pieces_location(con, path)
    traces = _traces(con, trace_ids)
    files: dict[int, list[str]] = {}
    for trace_id, name in con.execute("SELECT trace_id, file FROM event_files ORDER BY trace_id, file").fetchall():
        files.setdefault(int(trace_id), []).append(str(piece_at(folder, name)))
    ids = traces.column("trace_id").to_pylist()
    return [EventPartition(f"trace {t}", traces.slice(i, 1), tuple(files.get(int(t), [])))
            for i, t in enumerate(ids)]


def _hive_key(folder: PurePosixPath) -> tuple[str | None, int | None]:
    values = dict(part.split("=", 1) for part in folder.parts if "=" in part)
    run = unquote(values.get("run_id", HIVE_NULL))
    rank = unquote(values.get("rank", HIVE_NULL))
    return (None if run == HIVE_NULL else run), (None if rank == HIVE_NULL else int(rank))


def _from_dataset(con: duckdb.DuckDBPyConnection, root: str, trace_ids: list[int] | None) -> list[EventPartition]:
    """The partitions of a dataset whose ``events`` folder (or prefix, a URL) is ``root``."""
    traces = _traces(con, trace_ids)
    runs, ranks = traces.column("run_id").to_pylist(), traces.column("rank").to_pylist()
    base = root.rstrip("/") + "/"
    by_folder: dict[PurePosixPath, list[str]] = {}
    for f in sorted(str(o.location) for o in storage.list_prefix(storage.location(root.rstrip("/")))):
        if f.endswith(".parquet") and f.startswith(base):
            by_folder.setdefault(PurePosixPath(f[len(base):]).parent, []).append(f)
    out = []
    for folder, files in by_folder.items():
        run, rank = _hive_key(folder)
        rows = [i for i, (r, k) in enumerate(zip(runs, ranks, strict=True)) if r == run and k == rank]
        if rows:
            out.append(EventPartition(str(folder), traces.take(rows), tuple(files)))
    return sorted(out, key=lambda p: min(p.trace_ids))


def event_partitions(db: TraceDB, trace_ids: list[int] | None = None) -> list[EventPartition]:
    """The partitions of ``db`` holding ``trace_ids`` (all traces when None), by first trace id.

    Raises :class:`InputError` for a database whose events are not in files (opened from traces
    in memory)."""
    path = database_file(db.con)
    if path is not None:
        return _from_database(db.con, path, trace_ids)
    dirs = _event_dirs(db.con)
    if len(dirs) == 1 and dirs[0].rstrip("/").rsplit("/", 1)[-1] == "events":
        return _from_dataset(db.con, dirs[0], trace_ids)
    raise InputError("these traces are in memory, not in Parquet files that tasks can read: ingest them into a "
                     "database first (trace-report ingest PATHS -o DB --engine ray)")


def batches(parts: list[EventPartition], n: int) -> list[EventPartition]:
    """``parts`` joined into at most ``n`` partitions of consecutive parts (fewer, larger tasks:
    each task pays for opening DuckDB and creating the views once)."""
    if n <= 0 or len(parts) <= n:
        return parts
    size = -(-len(parts) // n)
    out = []
    for i in range(0, len(parts), size):
        group = parts[i:i + size]
        out.append(EventPartition(f"{group[0].key} .. {group[-1].key}", pa.concat_tables([p.traces for p in group]),
                                  tuple(f for p in group for f in p.files)))
    return out


def open_partition(part: EventPartition) -> TraceDB:
    """An in-memory database of one partition: its ``traces`` rows, ``events`` over its files, every
    view. DuckDB runs on one thread (a task has one CPU; sums are then in file order). Pieces in
    object storage are read through their file system (the task's own credentials)."""
    con = duckdb.connect(":memory:", config={"threads": 1})
    try:
        create_schema(con)
        con.register("_partition_traces", part.traces)
        con.execute("INSERT INTO traces BY NAME SELECT * FROM _partition_traces")
        con.unregister("_partition_traces")
        if part.files and storage.is_url(part.files[0]):
            storage.register(con, part.files[0], unchanging=True)
        if part.files:
            cols = ", ".join(identifier(f.name) for f in EVENTS_SCHEMA)
            files = literal_list(part.files)
            con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT {cols} FROM read_parquet({files})")
        else:
            con.register("_events_empty", EVENTS_SCHEMA.empty_table())
            con.execute("CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM _events_empty")
        create_views(con)
    except BaseException:
        con.close()
        raise
    return TraceDB(con)
