"""Per-trace results kept beside a database, so that the next query reads them instead of
deriving them again from millions of events.

The step breakdown derives a small table per trace (one row per step and region) from every
kernel, runtime call, CPU operator and annotation of the trace, most of it DuckDB joining
hundreds of thousands of kernels to their runtime calls. ``trace-report ingest``
computes the tables of large traces and writes them here
(:data:`trace_report.cli.ingest.KEEP_AT_INGEST_MIN_EVENTS`), the first query of any other trace
computes its own; later queries (other processes included) read them in milliseconds. Where:

    <db>.events/derived/<kind>-t<trace_id>-<pieces>-<version>.parquet

- ``pieces``: a hash of the names of the trace's event files (``event_files``). An ingest that
  replaces the trace writes new pieces (new names), so a file derived from the old ones is never
  read again; :meth:`ParquetStore.commit <trace_report.store.pieces.ParquetStore.commit>` and
  :func:`prune` delete such files.
- ``version``: :func:`code_version`, a hash of the code that derives the table (its Python
  modules and the ``*.sql`` beside them, every ``store/sql/*.sql`` file, the library versions the
  caller names). Another
  version of trace-report neither reads nor trusts this one's files.
- Inside, each file carries whom it was kept for (Parquet key-value metadata :data:`OWNER_KEY`:
  kind, trace id, the whole SHA-256 of the trace's event file names, whose names hold the ingest's
  random token, and version): a file of another database, or of another trace, renamed to this
  one's name is ignored (and computed again) like an unreadable one.

A file is written under a temporary name and renamed (a reader never sees half of one); a file
that cannot be read is ignored (and computed again); a folder that cannot be written (read-only
media, another user's database) means nothing is kept, silently. Databases in memory (a trace
opened directly, a Ray partition) keep nothing. The event files and the database are never
touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import duckdb

from trace_report.store.layout import DERIVED_FOLDER, own_subfolder, unlink_all
from trace_report.store.trace_events import own_events_folder

if TYPE_CHECKING:
    import pyarrow as pa

FOLDER = DERIVED_FOLDER


def code_version(modules: tuple[ModuleType, ...], extra: tuple[str, ...] = ()) -> str:
    """12 hex digits of SHA-256 over the source of ``modules``, the ``*.sql`` files beside each
    of them (an analysis' own queries, in its package), every ``store/sql/*.sql`` file and
    ``extra`` (library versions): what decides a derived table's content besides the events.
    Empty when a module's source cannot be read (then nothing is kept)."""
    h = hashlib.sha256()
    for module in modules:
        source = getattr(module, "__file__", None)
        try:
            h.update(Path(source).read_bytes())
            for sql in sorted(Path(source).parent.glob("*.sql")):
                h.update(sql.name.encode() + b"\0" + sql.read_bytes())
        except (OSError, TypeError):
            return ""
    folder = resources.files("trace_report.store").joinpath("sql")
    for name in sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql")):
        h.update(name.encode() + b"\0" + folder.joinpath(name).read_bytes())
    for text in extra:
        h.update(text.encode() + b"\0")
    return h.hexdigest()[:12]


OWNER_KEY = "trace_report_kept_for"
"""The Parquet key-value metadata of a kept file naming whom it was kept for (:meth:`DerivedStore.owner`)."""


def pieces_digest(files: list[str]) -> str:
    """SHA-256 (hex) of one set of event files' names (a trace as it was ingested)."""
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()


def pieces_key(files: list[str]) -> str:
    """8 hex digits naming one set of event files (a trace as it was ingested)."""
    return pieces_digest(files)[:8]


class DerivedStore:
    """The derived tables of one database's traces (see the module docstring)."""

    def __init__(self, folder: Path, digests: dict[int, str]) -> None:
        self.folder = folder
        self.digests = digests  # trace_id -> pieces_digest of its event files
        self.keys = {t: d[:8] for t, d in digests.items()}  # trace_id -> pieces_key (in file names)

    def owner(self, kind: str, trace_id: int, version: str) -> str:
        """What a file kept for this kind, trace and version holds under :data:`OWNER_KEY`."""
        return f"{kind}/{trace_id}/{self.digests.get(trace_id, '')}/{version}"

    def owner_sql(self, kind: str, trace_id: int, version: str) -> str:
        """The ``KV_METADATA`` option of a DuckDB ``COPY ... (FORMAT parquet, ...)`` writing a kept file."""
        return f"KV_METADATA {{{OWNER_KEY}: '{self.owner(kind, trace_id, version)}'}}"

    def owned(self, con: duckdb.DuckDBPyConnection, kind: str, version: str, paths: dict[int, Path]) -> dict[int, Path]:
        """Those of ``paths`` (trace id: kept file) that were kept for their trace of this database
        (:data:`OWNER_KEY`), read through ``con``; none when their metadata cannot be read."""
        if not paths:
            return {}
        files = [str(p) for p in paths.values()]
        try:
            rows = con.execute("SELECT file_name, decode(value) FROM parquet_kv_metadata($files) "
                               "WHERE decode(key) = $key", {"files": files, "key": OWNER_KEY}).fetchall()
        except duckdb.InterruptException:
            raise
        except duckdb.Error:
            return {}
        owners = dict(rows)
        return {t: p for t, p in paths.items() if owners.get(str(p)) == self.owner(kind, t, version)}

    def path(self, kind: str, trace_id: int, version: str) -> Path | None:
        key = self.keys.get(trace_id)
        if key is None or not version:
            return None
        return self.folder / f"{kind}-t{trace_id:06d}-{key}-{version}.parquet"

    def existing(self, kind: str, trace_id: int, version: str) -> Path | None:
        """The file kept for this trace, kind and version; None when there is none (or the folder
        may not be searched)."""
        path = self.path(kind, trace_id, version)
        try:
            return path if path is not None and path.is_file() else None
        except OSError:  # is_file raises for a folder it may not search
            return None

    def load(self, kind: str, trace_id: int, version: str) -> pa.Table | None:
        """The table kept for this trace, kind and version, or None (none kept, or unreadable)."""
        path = self.existing(kind, trace_id, version)
        if path is None:
            return None
        # pyarrow here, not at the top: the database layer prunes derived files without it
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException, ValueError):
            return None
        owner = (table.schema.metadata or {}).get(OWNER_KEY.encode())
        return table if owner == self.owner(kind, trace_id, version).encode() else None

    def save(self, kind: str, trace_id: int, version: str, table: pa.Table) -> bool:
        """Keep ``table`` for this trace (replacing every other file of the kind for the trace);
        False when it cannot be written."""
        import pyarrow as pa  # here, not at the top: see load
        import pyarrow.parquet as pq

        owned = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               OWNER_KEY: self.owner(kind, trace_id, version)})

        def write(tmp: Path) -> None:
            try:
                pq.write_table(owned, tmp, compression="lz4")
            except pa.ArrowException as exc:
                raise ValueError(str(exc)) from exc

        return self.save_with(kind, trace_id, version, write)

    def save_with(self, kind: str, trace_id: int, version: str, write: Callable[[Path], None]) -> bool:
        """Keep the Parquet file that ``write(path)`` writes for this trace, as :meth:`save` does
        (written under a temporary name, then renamed); False when it cannot be written (``write``
        raised an ``OSError``, a DuckDB error other than an interrupt, or a ``ValueError``, which
        :meth:`save` makes of Arrow's errors): nothing is left behind."""
        path = self.path(kind, trace_id, version)
        if path is None:
            return False
        tmp = self.folder / f".{path.name}.tmp-{os.getpid()}-{os.urandom(3).hex()}"
        try:
            self.folder.mkdir(exist_ok=True)
            write(tmp)
            os.replace(tmp, path)
        except BaseException as exc:  # an interrupt too: no temporary file is left behind
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            if isinstance(exc, (OSError, ValueError, duckdb.Error)) and not isinstance(exc, duckdb.InterruptException):
                return False
            raise
        unlink_all(self.folder, f"{kind}-t{trace_id:06d}-*.parquet", keep=path)
        return True


def derived_store(con: duckdb.DuckDBPyConnection) -> DerivedStore | None:
    """The derived tables of the database behind ``con``; None for a database in memory, one
    whose event folder is missing, or a connection whose views are not those trace-report made
    (a notebook that redefined ``events`` or ``region_rules`` neither reads nor keeps rows:
    :func:`~trace_report.store.views.views_as_created`), or one whose ``derived`` folder is a
    symbolic link or resolves outside the events folder."""
    folder = own_events_folder(con)
    kept = own_subfolder(folder, FOLDER) if folder is not None else None
    if kept is None:  # no folder, or a link elsewhere: nothing is read or written there
        return None
    return DerivedStore(kept, _digests(con.execute("SELECT trace_id, file FROM event_files").fetchall()))


def traces_of_rank(con: duckdb.DuckDBPyConnection, rank: int | None) -> list[int]:
    """The traces in view (``traces``: every trace, or a scope's) of ``rank`` (None: all), sorted:
    the ``ids`` of :func:`kept_tables` for an analysis of one rank or all."""
    return [int(t) for (t,) in con.execute("SELECT trace_id FROM traces WHERE $rank IS NULL OR rank = $rank "
                                           "ORDER BY trace_id", {"rank": rank}).fetchall()]


def with_ranks(con: duckdb.DuckDBPyConnection, table: pa.Table) -> pa.Table:
    """``table`` (a ``trace_id`` column) with ``rank`` (int32, from ``traces``) first: kept rows hold
    no rank, so a rank changed in ``traces`` is what shows."""
    import pyarrow as pa  # here, not at the top: see DerivedStore.load

    ranks = dict(con.execute("SELECT trace_id, rank FROM traces").fetchall())
    return table.add_column(0, "rank", pa.array([ranks.get(t) for t in table.column("trace_id").to_pylist()],
                                                type=pa.int32()))


def kept_tables(con: duckdb.DuckDBPyConnection, kind: str, version: str, ids: list[int],
                compute: Callable[[list[int]], pa.Table],
                types: Mapping[str, Callable[[pa.DataType], bool]]) -> pa.Table | None:
    """The rows of the traces ``ids`` of one derived ``kind``, in the order of ``ids``: each trace's
    from its file kept beside the database for this code ``version``, the others from
    ``compute(missing ids)`` (one call for all of them: a table with a ``trace_id`` column whose
    rows of a trace are that trace's alone), then kept, one file per trace. A kept file is read when
    its columns are those of ``types`` (name: a ``pyarrow.types.is_*`` test of its type), in that
    order, and it holds one trace's rows (or none: then its types are not checked); else that trace
    is computed and its file written again.
    None where the database keeps nothing (:func:`derived_store`: in memory, or views redefined on
    this connection) or ``version`` is empty: the caller computes every trace."""
    store = derived_store(con) if version and ids else None
    if store is None:
        return None
    import pyarrow as pa  # here, not at the top: see DerivedStore.load
    import pyarrow.compute as pc

    def valid(table: pa.Table, trace_id: int) -> bool:
        if table.column_names != list(types):
            return False
        if table.num_rows == 0:  # no row: any types (a query's empty result may type a text column null)
            return True
        return (all(ok(table.schema.field(c).type) for c, ok in types.items())
                and pc.all(pc.equal(table["trace_id"], trace_id)).as_py() is True)

    parts: dict[int, pa.Table] = {}
    for t in ids:
        kept = store.load(kind, t, version)
        if kept is not None and valid(kept, t):
            parts[t] = kept
    missing = [t for t in ids if t not in parts]
    if missing:
        computed = compute(missing)
        for t in missing:
            parts[t] = computed.filter(pc.equal(computed["trace_id"], t))
            store.save(kind, t, version, parts[t])
    # a column typed null in one part (no row, or no value) takes the others' type
    return pa.concat_tables([parts[t] for t in ids], promote_options="permissive")


def _digests(listed: list[tuple[int, str]]) -> dict[int, str]:
    """:func:`pieces_digest` of each trace of ``listed``, (trace_id, file) rows of ``event_files``."""
    files: dict[int, list[str]] = {}
    for trace_id, name in listed:
        files.setdefault(int(trace_id), []).append(name)
    return {t: pieces_digest(f) for t, f in files.items()}


def prune(events_folder: Path, listed: list[tuple[int, str]]) -> int:
    """Delete derived files whose trace's event files are not ``listed`` ((trace_id, file) rows
    of ``event_files``) and temporary files of interrupted writes; the number deleted."""
    folder = own_subfolder(events_folder, FOLDER)
    if folder is None:  # a link elsewhere: none of its files are ours
        return 0
    live = {f"t{t:06d}-{digest[:8]}" for t, digest in _digests(listed).items()}
    try:
        entries = list(folder.iterdir()) if folder.is_dir() else []
    except OSError:  # a folder this user may not read: left as it is
        return 0
    gone = 0
    for p in entries:
        parts = p.name.split("-")
        current = len(parts) >= 4 and p.suffix == ".parquet" and f"{parts[-3]}-{parts[-2]}" in live
        if not current:
            with contextlib.suppress(OSError):
                p.unlink()
                gone += 1
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty
    return gone
