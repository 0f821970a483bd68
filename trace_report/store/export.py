"""Export a database as a Parquet dataset, and open such a dataset again (docs/report.md).

Layout (Hive partitioning, as Spark, Hive, DuckDB and pyarrow read it)::

    DIR/
      events/run_id=<run id>/rank=<rank>/data_0.parquet   the events, by traces.run_id and rank
      traces.parquet  kernel_names.parquet  trace_report_info.parquet
      runs.parquet  run_traces.parquet  run_metrics.parquet ...   (when the database has them)
      _SUCCESS                                                    (Spark's "job committed" marker)
      _trace_report_files.txt                                     (every file above, one a line)

Partition values are URL-encoded; a trace without a run id goes to
``run_id=__HIVE_DEFAULT_PARTITION__`` (read back as NULL). The partition columns are not
repeated inside the event files. The dataset is written to a temporary folder beside ``DIR``
and renamed into place, so ``DIR`` is either complete or absent. An object store has no rename:
there (``DIR`` an ``s3://``, ``gs://`` or ``abfs://`` prefix) the dataset is written locally, then
uploaded with ``_SUCCESS`` and the manifest last, the manifest of an older export removed first,
so a reader that waits for the manifest never reads half a dataset (:func:`_upload`).

Readers (docs/scaling.md has the Trino table definition)::

    duckdb:  SELECT * FROM read_parquet('DIR/events/**/*.parquet', hive_partitioning = true)
    pyarrow: pyarrow.dataset.dataset('DIR/events', partitioning=export.partitioning())
    pandas:  pd.read_parquet('DIR/events', partitioning=export.partitioning())
    spark:   spark.read.parquet('DIR/events')   (run_id and rank become columns)
    trace-report: top-kernels DIR --engine ray  (one Ray task per run_id=/rank= folder)
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from trace_report import storage
from trace_report.archives import Scratch
from trace_report.errors import InputError
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.inputs import is_dataset, is_dataset_url
from trace_report.store.database import create_schema
from trace_report.store.memory import MemoryStore
from trace_report.store.runs import CSV_TABLES, attach_runs
from trace_report.store.sandbox import record_event_dirs
from trace_report.store.sql_quote import identifier, literal
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import create_views

DATASET_FORMAT = "trace-report/parquet/1"
PARTITION_COLUMNS = ("run_id", "rank")
SKIP_TABLES = {"event_files"}  # file bookkeeping of a .duckdb database, meaningless in a dataset
PARQUET = "FORMAT parquet, COMPRESSION zstd"
MANIFEST = "_trace_report_files.txt"
"""The files an export wrote, relative to its folder (readers skip names starting with ``_``):
``--overwrite`` replaces a folder only when it holds these files and no other (:func:`_replaceable`)."""


@dataclass
class ExportSummary:
    """What an export wrote: the folder, rows per table, event rows and partitions."""

    path: storage.Location
    tables: dict[str, int] = field(default_factory=dict)
    events: int = 0
    partitions: int = 0


def partitioning() -> Any:
    """The pyarrow partitioning of ``events/`` (string run id, integer rank). pyarrow's
    ``partitioning='hive'`` guesses the types from the folder names and fails when every run id
    is NULL (``__HIVE_DEFAULT_PARTITION__``); pandas' default reader fails on a NULL run id next
    to others. Both read the dataset with ``partitioning=partitioning()``."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([("run_id", pa.string()), ("rank", pa.int32())]), flavor="hive")


# ---------------------------------------------------------------- writing


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Base and TEMP tables to export (the schema's tables, ncu tables, run tables)."""
    rows = con.execute(
        "SELECT DISTINCT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY 1").fetchall()
    return [t for (t,) in rows if t not in SKIP_TABLES and not t.startswith("_")]


def _copy(con: duckdb.DuckDBPyConnection, query: str, target: Path, options: str) -> None:
    """``COPY (query) TO target (options)``, written by a connection of its own: the database's
    connection is sandboxed (:func:`~trace_report.store.sandbox.sandbox`: it writes no file outside
    its events folder), so its rows stream to this one as Arrow batches."""
    rows = con.sql(query).to_arrow_reader()
    with duckdb.connect(":memory:") as writer:
        writer.register("_export_rows", rows)
        writer.execute(f"COPY (SELECT * FROM _export_rows) TO {literal(target)} ({options})")


def _write_events(con: duckdb.DuckDBPyConnection, folder: Path) -> tuple[int, int]:
    cols = ", ".join(f"e.{identifier(f.name)}" for f in EVENTS_SCHEMA)
    query = (f"SELECT {cols}, t.run_id, t.rank FROM events e JOIN traces t USING (trace_id) "
             "ORDER BY t.run_id, t.rank, e.trace_id, e.event_id")
    n = con.execute(f"SELECT count(*) FROM ({query})").fetchall()[0][0]
    folder.mkdir()
    if n:
        _copy(con, query, folder, f"{PARQUET}, PARTITION_BY (run_id, rank)")
    parts = con.execute("SELECT count(DISTINCT (run_id, rank)) FROM traces t "
                        "WHERE EXISTS (SELECT 1 FROM events e WHERE e.trace_id = t.trace_id)").fetchall()[0][0]
    return int(n), int(parts)


def _write_dataset(con: duckdb.DuckDBPyConnection, tmp: Path, report: ExportSummary) -> None:
    report.events, report.partitions = _write_events(con, tmp / "events")
    for table in _tables(con):
        query = f"SELECT * FROM {identifier(table)}"
        if table == "trace_report_info":
            query = (f"SELECT * FROM trace_report_info WHERE key <> 'dataset_format' "
                     f"UNION ALL SELECT 'dataset_format', {literal(DATASET_FORMAT)}")
        _copy(con, query, tmp / (table + ".parquet"), PARQUET)
        report.tables[table] = int(con.execute(f"SELECT count(*) FROM ({query})").fetchall()[0][0])
    (tmp / "_SUCCESS").touch()
    (tmp / MANIFEST).write_text("".join(f"{name}\n" for name in sorted(_files(tmp))))


def _files(folder: Path) -> set[str]:
    """Every file and link under ``folder`` (relative, ``/``-separated; empty folders are not listed)."""
    found = set()
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            found.add(Path(root, name).relative_to(folder).as_posix())
    return found


def _replaceable(folder: Path) -> bool:
    """Whether ``--overwrite`` may replace ``folder``: empty, or a dataset this module wrote and
    nothing else (its :data:`MANIFEST` lists every file in it; a file added since, say the user's
    notes, is not replaced). ``export -o /tmp --overwrite`` once replaced the whole of /tmp."""
    try:
        present = _files(folder) if any(folder.iterdir()) else set()
        listed = (folder / MANIFEST).read_text().splitlines() if present else []
    except (OSError, UnicodeDecodeError):
        return False
    return present == set(listed) | {MANIFEST} if present else True


def export_parquet(db: TraceDB, out_dir: Path | str, *, overwrite: bool = False) -> ExportSummary:
    """Write every table of ``db`` and its events as a Parquet
    dataset in ``out_dir`` (layout in the module docstring), atomically; ``out_dir`` may be a
    URL of a prefix in object storage (:func:`_export_to_url`).

    Raises :class:`InputError` when ``out_dir`` exists (unless ``overwrite``: then it is
    replaced only once the new dataset is complete, and only if it is empty or an earlier
    export's dataset) or its parent folder does not.
    """
    con = db.con
    if storage.is_url(out_dir):
        return _export_to_url(con, str(out_dir).rstrip("/"), overwrite)
    out = Path(out_dir).absolute()
    if not out.parent.is_dir():
        raise InputError(f"{out.parent}: no such directory")
    if out.exists() and not overwrite:
        raise InputError(f"{out}: already exists (choose another folder, or --overwrite)")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    if out.is_dir() and not _replaceable(out):
        raise InputError(f"{out}: --overwrite replaces only a dataset written by trace-report export (or an "
                         "empty folder), with no file added to it; this folder holds other files: choose another "
                         "folder")
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")
    report = ExportSummary(out)
    try:
        tmp.mkdir()
        _write_dataset(con, tmp, report)
        _replace(tmp, out)
    except (OSError, duckdb.IOException) as exc:  # a full disk: DuckDB's COPY reports an IOException
        shutil.rmtree(tmp, ignore_errors=True)
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        raise InputError(f"{out}: cannot write the dataset, nothing was written ({text})") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def _export_to_url(con: duckdb.DuckDBPyConnection, url: str, overwrite: bool) -> ExportSummary:
    """:func:`export_parquet` to the prefix ``url``: written to a local scratch folder, then
    uploaded (:func:`_upload`). The rules of an existing folder hold for an existing prefix."""
    present = {str(o.location)[len(url) + 1:] for o in storage.list_prefix(url)}
    if present and not overwrite:
        raise InputError(f"{url}: already exists (choose another prefix, or --overwrite)")
    if present and not _replaceable_prefix(url, present):
        raise InputError(f"{url}: --overwrite replaces only a dataset written by trace-report export, with no "
                         "object added to it; this prefix holds other objects: choose another prefix")
    report = ExportSummary(url)
    scratch = Scratch()
    try:
        folder = scratch.path / "dataset"
        folder.mkdir()
        try:
            _write_dataset(con, folder, report)
        except (OSError, duckdb.IOException) as exc:
            raise InputError(f"{url}: cannot write the dataset, nothing was written ({exc})") from exc
        _upload(folder, url, present)
    finally:
        scratch.cleanup()
    return report


def _replaceable_prefix(url: str, present: set[str]) -> bool:
    """Whether the objects under ``url`` (``present``, relative names) are an earlier export's and no more."""
    if MANIFEST not in present:
        return False
    try:
        with storage.open_stream(storage.join(url, MANIFEST)) as fh:
            listed = fh.read().decode("utf-8").splitlines()
    except (InputError, UnicodeDecodeError):
        return False
    return present == set(listed) | {MANIFEST}


def _upload(folder: Path, url: str, present: set[str]) -> None:
    """Upload the dataset in ``folder`` to ``url``: the old manifest removed first (from then on
    no reader takes the prefix for a complete dataset), the data, the old objects the new
    dataset does not have removed, then ``_SUCCESS``, then the manifest."""
    files = sorted(_files(folder))
    last = ["_SUCCESS", MANIFEST]
    if MANIFEST in present:
        storage.delete(storage.join(url, MANIFEST))
    for name in [f for f in files if f not in last]:
        storage.write_file(storage.join(url, name), folder / name)
    for stale in sorted(present - set(files)):
        storage.delete(storage.join(url, stale))
    for name in last:
        storage.write_file(storage.join(url, name), folder / name)


def _replace(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first, removed after."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}-{secrets.token_hex(3)}")
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- reading


def _dataset_files(folder: storage.Location) -> tuple[list[str], list[str]]:
    """The ``<table>.parquet`` files of a dataset and its event files (paths or URLs), sorted."""
    if isinstance(folder, Path):
        return ([str(p) for p in sorted(folder.glob("*.parquet"))],
                [str(p) for p in sorted(folder.glob("events/**/*.parquet"))])
    root = folder.rstrip("/") + "/"
    names = sorted(str(o.location)[len(root):] for o in storage.list_prefix(folder))
    return ([root + n for n in names if "/" not in n and n.endswith(".parquet")],
            [root + n for n in names if n.startswith("events/") and n.endswith(".parquet")])


def _load_tables(con: duckdb.DuckDBPyConnection, tables: list[str]) -> list[str]:
    """Load every ``<table>.parquet`` of the dataset (``tables``: their paths or URLs): into the
    schema's tables where they exist, else as new tables (TEMP for the run tables, as
    :func:`trace_report.open` makes them). Returns the table names."""
    existing = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    loaded = []
    for path in tables:
        name, src = storage.name_of(path).removesuffix(".parquet"), f"read_parquet({literal(path)})"
        if name == "trace_report_info":
            continue  # create_schema wrote ours
        if name in existing:
            con.execute(f"INSERT INTO {identifier(name)} BY NAME SELECT * FROM {src}")
        else:
            temp = "TEMP " if name in {"runs", "run_traces", *CSV_TABLES} else ""
            con.execute(f"CREATE {temp}TABLE {identifier(name)} AS SELECT * FROM {src}")
        loaded.append(name)
    return loaded


def _events_view(con: duckdb.DuckDBPyConnection, folder: storage.Location, events: list[str]) -> None:
    if not events:
        MemoryStore().publish(con)  # an empty events view with the right columns
        return
    cols = ", ".join(identifier(f.name) for f in EVENTS_SCHEMA)
    # a local dataset by its glob (files added by another writer are read too); objects by their list
    files = literal(Path(folder) / "events" / "**" / "*.parquet") if isinstance(folder, Path) else \
        "[" + ", ".join(literal(f) for f in events) + "]"
    con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT {cols} FROM read_parquet({files}, "
                "hive_partitioning = true, hive_types = {'run_id': VARCHAR, 'rank': INTEGER})")
    where = storage.join(folder, "events") if isinstance(folder, str) else str(folder / "events")
    record_event_dirs(con, [where])


def open_parquet_dataset(path: Path | str) -> TraceDB:
    """Open a folder written by :func:`export_parquet`, or a prefix in object storage written by
    ``export -o s3://...`` (read in place, through the prefix's file system registered on the
    connection): an in-memory DuckDB with the small tables loaded, ``events`` a view over the
    partitioned files, and the analysis views.

    Raises :class:`InputError` when ``path`` is not such a folder or prefix (or it cannot be read).
    """
    folder: storage.Location = path if storage.is_url(path) else Path(path)
    shown = storage.shown(folder)
    if not (is_dataset_url(str(folder)) if storage.is_url(folder) else is_dataset(Path(folder))):
        raise InputError(f"{shown}: not a trace-report Parquet dataset (no traces.parquet and events/)")
    tables, events = _dataset_files(folder)
    con = duckdb.connect(":memory:")
    try:
        if storage.is_url(folder):
            storage.register(con, str(folder), unchanging=True)
        create_schema(con)
        loaded = _load_tables(con, tables)
        _events_view(con, folder, events)
        create_views(con)
        if "runs" not in loaded:
            attach_runs(con, [])
    except duckdb.Error as exc:
        con.close()
        raise InputError(f"{shown}: unreadable Parquet dataset ({str(exc).splitlines()[0]})") from exc
    except BaseException:
        con.close()
        raise
    return TraceDB(con)
