"""Tables derived per trace and kept beside a database: one mechanism, declared next to the code
that computes them.

A table whose rows of a trace come from that trace's events alone (the step breakdown's rows,
the module calls, the Operator view's nesting...) is declared once with :class:`PerTrace`: its
``kind``, its ``compute`` (a function of ``(con, trace_ids)`` returning an Arrow table with a
``trace_id`` column) and the views it ``reads``. The first :meth:`PerTrace.rows` computes the
traces asked for (in one call, the views it reads first made tables for the length of the
computation), later ones read them back. Where:

    <db>.events/derived/<kind>/<key>/part-<n>.parquet

- ``key``: :func:`code_key` of the module that declares the table: its source, that of every
  ``trace_report`` module it imports (transitively, found by reading their ``import``
  statements), every ``*.sql`` file of those modules' packages and of ``store/sql/``, the
  declaration's own SQL, and the versions of DuckDB, pyarrow, numpy and pandas. Nothing is
  listed by hand, so a change to any code the rows depend on makes a new key; a process running
  older code reads and writes its own key's folder.
- one part per computation: the rows of every trace computed together (a first query over 2,000
  traces writes one file), with, in the Parquet metadata, the database it was computed from
  (its resolved path: a copied database's events folder does not serve the copy) and each
  trace's :func:`pieces_key` (a hash of the names of its event files). An ingest that replaces a
  trace gives it new pieces: its rows in older parts no longer count, and the next write, or
  :func:`prune` at the next ingest, deletes parts that hold no current trace. Past
  :data:`COMPACT_AT` parts, a write merges the current rows into one part.

A part is written under a temporary name and renamed; a part that cannot be read is ignored (its
traces are computed again); a folder that cannot be written (read-only media, another user's
database) keeps nothing, silently; a derived folder that is a symbolic link is neither read nor
written. A database in memory keeps what it computes for the life of its connection only. A
connection whose views a notebook redefined (:func:`~trace_report.store.views.views_as_created`)
neither reads nor keeps anything.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from trace_report.storage import is_url
from trace_report.store.events_view import database_file, events_dir_for, pieces_location
from trace_report.store.layout import DERIVED_FOLDER
from trace_report.store.views import views_as_created

if TYPE_CHECKING:
    import pyarrow as pa

COMPACT_AT = 16
"""Parts of one kind and key past which a write merges the current rows into one part."""
LIBRARIES = ("duckdb", "pyarrow", "numpy", "pandas")
"""The libraries whose versions are part of every key: they compute, convert and store the rows."""
_META = b"trace_report.cache"

Compute = Callable[[duckdb.DuckDBPyConnection, list[int]], "pa.Table"]
ViewTables = Callable[[duckdb.DuckDBPyConnection, tuple[str, ...]], AbstractContextManager[None]]


def _read_source(path: Path) -> bytes:
    """The bytes of one source file (a seam for tests)."""
    return path.read_bytes()


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _imported(name: str, path: Path) -> set[str]:
    """The ``trace_report`` modules that the module ``name`` (file ``path``) imports anywhere in it."""
    tree = ast.parse(_read_source(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] == "trace_report" and _module_file(m) is not None}


def source_modules(name: str) -> dict[str, Path]:
    """``name`` and every ``trace_report`` module it imports, transitively: ``{module: file}``."""
    todo, seen = [name], {}
    while todo:
        mod = todo.pop()
        path = _module_file(mod)
        if mod in seen or path is None:
            continue
        seen[mod] = path
        todo += sorted(_imported(mod, path) - set(seen))
    return seen


def code_key(module: str, sql: str = "") -> str:
    """16 hex digits of SHA-256 over what decides a declared table's rows besides the events
    (module docstring): the sources of :func:`source_modules`, the ``*.sql`` files of their
    packages and of ``store/sql/``, ``sql`` and the versions of :data:`LIBRARIES`. Raises
    :class:`OSError` when a source cannot be read."""
    h = hashlib.sha256(sql.encode() + b"\0")
    files = source_modules(module)
    folders = {p.parent for p in files.values()}
    store_sql = resources.files("trace_report.store").joinpath("sql")
    folders.add(Path(str(store_sql)))
    sql_files = sorted({q for f in folders for q in f.glob("*.sql")})
    for path in sorted(files.values()) + sql_files:
        h.update(path.name.encode() + b"\0" + _read_source(path) + b"\0")
    for lib in LIBRARIES:
        try:
            h.update(f"{lib}={version(lib)}\0".encode())
        except PackageNotFoundError:
            h.update(f"{lib}=\0".encode())
    return h.hexdigest()[:16]


@cache
def _cached_key(module: str, sql: str) -> str:
    try:
        return code_key(module, sql)
    except (OSError, SyntaxError):
        return ""


def pieces_key(files: list[str]) -> str:
    """8 hex digits naming one set of event files (a trace as it was ingested)."""
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:8]


def trace_pieces(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """:func:`pieces_key` of each trace listed in ``event_files`` (none where there is no such table)."""
    try:
        listed = con.execute("SELECT trace_id, file FROM event_files").fetchall()
    except duckdb.CatalogException:
        return {}
    return _keys(listed)


def _keys(listed: list[tuple[int, str]]) -> dict[int, str]:
    files: dict[int, list[str]] = {}
    for trace_id, name in listed:
        files.setdefault(int(trace_id), []).append(name)
    return {t: pieces_key(f) for t, f in files.items()}


def traces_of_rank(con: duckdb.DuckDBPyConnection, rank: int | None) -> list[int]:
    """The traces in view (``traces``: every trace, or a scope's) of ``rank`` (None: all), sorted:
    the ``ids`` of :meth:`PerTrace.rows` for an analysis of one rank or all."""
    return [int(t) for (t,) in con.execute("SELECT trace_id FROM traces WHERE $rank IS NULL OR rank = $rank "
                                           "ORDER BY trace_id", {"rank": rank}).fetchall()]


def with_ranks(con: duckdb.DuckDBPyConnection, table: pa.Table) -> pa.Table:
    """``table`` (a ``trace_id`` column) with ``rank`` (int32, from ``traces``) first: kept rows hold
    no rank, so a rank changed in ``traces`` is what shows."""
    import pyarrow as pa

    ranks = dict(con.execute("SELECT trace_id, rank FROM traces").fetchall())
    return table.add_column(0, "rank", pa.array([ranks.get(t) for t in table.column("trace_id").to_pylist()],
                                                type=pa.int32()))


def derived_folder(events_folder: Path) -> Path | None:
    """``<events folder>/derived``, None when it is a symbolic link (or lies outside the events
    folder once resolved): kept rows are read and written there only."""
    folder = events_folder / DERIVED_FOLDER
    try:
        if folder.is_symlink() or folder.resolve().parent != events_folder.resolve():
            return None
    except OSError:
        return None
    return folder


_VIEW_TABLES: list[ViewTables] = []
"""How the views a declaration reads are made tables while it computes (set by
:mod:`trace_report.store.kept_views`, which builds on this module)."""


def set_view_tables(make: ViewTables) -> None:
    """Register the context manager that keeps views as tables for a block."""
    _VIEW_TABLES[:] = [make]


@dataclass(frozen=True)
class PerTrace:
    """A table kept per trace (module docstring). ``module``: the module whose code (and imports)
    computes it, normally the declaring module's ``__name__``; ``sql``: the query text when the
    compute runs one (part of the key); ``reads``: views made tables while it computes;
    ``in_memory``: whether a database in memory keeps the rows for its connection."""

    kind: str
    compute: Compute
    module: str
    reads: tuple[str, ...] = ()
    sql: str = ""
    in_memory: bool = True
    _memory: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary, compare=False, repr=False)

    def key(self) -> str:
        """:func:`code_key` of this declaration (read once per process); empty when its sources
        cannot be read (then nothing is kept)."""
        return _cached_key(self.module, self.sql)

    def rows(self, con: duckdb.DuckDBPyConnection, ids: list[int], *, as_created: bool | None = None) -> pa.Table:
        """The rows of the traces ``ids``, in the order of ``ids``: kept ones read back, the others
        computed together and kept. ``as_created``: whether the connection's views are those
        trace-report made, when the caller knows better than
        :func:`~trace_report.store.views.views_as_created` (a view it is making a table of). Raises
        what ``compute`` raises."""
        import pyarrow as pa

        key = self.key()
        if as_created is None:
            as_created = views_as_created(con)
        if not ids or not key or not as_created:
            return self._compute(con, ids)
        pieces = trace_pieces(con)
        store = _store_for(con, self.kind, key)
        parts: dict[int, pa.Table] = store.read(ids, pieces) if store is not None else {}
        memo = self._memo(con, key) if store is None else None
        if memo is not None:
            parts = {t: memo[(t, pieces.get(t, ""))] for t in ids if (t, pieces.get(t, "")) in memo}
        missing = [t for t in ids if t not in parts]
        if missing:
            computed = self._compute(con, missing)
            split = _split(computed, missing)
            parts.update(split)
            if store is not None:
                store.write(computed, {t: pieces[t] for t in missing if t in pieces}, pieces)
            elif memo is not None:
                memo.update({(t, pieces.get(t, "")): split[t] for t in missing})
        return pa.concat_tables([parts[t] for t in ids], promote_options="permissive")

    def _compute(self, con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
        block = _VIEW_TABLES[0](con, self.reads) if self.reads and _VIEW_TABLES else nullcontext()
        with block:
            return self.compute(con, ids)

    def _memo(self, con: duckdb.DuckDBPyConnection, key: str) -> dict | None:
        """The rows this connection computed (a database in memory), None for a database file."""
        if not self.in_memory or database_file(con) is not None:
            return None
        by_key = self._memory.setdefault(con, {})
        return by_key.setdefault(key, {})


def _split(table: pa.Table, ids: list[int]) -> dict[int, pa.Table]:
    """The rows of each of ``ids`` in ``table``, in their order there: slices of the table sorted
    once by ``trace_id`` (a filter per trace read every row once per trace: quadratic in the
    traces of a part)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return dict.fromkeys(ids, table)
    column = pc.cast(table["trace_id"], pa.int64())
    tids = pc.fill_null(column, np.iinfo(np.int64).min).to_numpy() if column.null_count else column.to_numpy()
    order = np.argsort(tids, kind="stable")
    ordered, tids = table.take(pa.array(order)), tids[order]
    bounds = {t: (int(np.searchsorted(tids, t, "left")), int(np.searchsorted(tids, t, "right"))) for t in ids}
    return {t: ordered.slice(lo, hi - lo) for t, (lo, hi) in bounds.items()}


def _identity(con: duckdb.DuckDBPyConnection) -> str:
    path = database_file(con)
    return os.path.realpath(path) if path is not None else ""


def _store_for(con: duckdb.DuckDBPyConnection, kind: str, key: str) -> KindStore | None:
    """The parts of ``kind`` beside the database file behind ``con`` (whose views the caller has
    checked); None for a database in memory or one without its events folder. A database whose
    pieces are in object storage keeps them in a local events folder all the same (made here)."""
    path = database_file(con)
    if path is None:
        return None
    events = events_dir_for(path)
    try:
        there = events.is_dir() or is_url(pieces_location(con, path))
        folder = derived_folder(events) if there else None
    except OSError:
        folder = None
    return KindStore(folder / kind, key, _identity(con)) if folder is not None else None


@dataclass
class KindStore:
    """The parts of one kind beside one database (module docstring)."""

    folder: Path
    key: str
    identity: str

    @property
    def key_folder(self) -> Path:
        return self.folder / self.key

    def parts(self) -> list[tuple[Path, dict[int, str]]]:
        """Each readable part of this key with its ``{trace_id: pieces}``, oldest first: one of this
        database whose columns are those it was written with."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            paths = sorted(self.key_folder.glob("part-*.parquet"))
        except OSError:
            return []
        out = []
        for path in paths:
            try:
                schema = pq.read_schema(path)
                meta = json.loads((schema.metadata or {})[_META])
                if meta["db"] != self.identity or meta["schema"] != _signature(schema):
                    continue
                out.append((path, {int(t): str(p) for t, p in meta["traces"].items()}))
            except (OSError, KeyError, ValueError, TypeError, AttributeError, pa.ArrowException):
                continue
        return out

    def read(self, ids: list[int], pieces: dict[int, str]) -> dict[int, pa.Table]:
        """The kept rows of those of ``ids`` whose pieces are current (newest part wins)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        wanted, where = set(ids), {}
        for path, traces in self.parts():
            for t, p in traces.items():
                if t in wanted and pieces.get(t) == p:
                    where[t] = path
        out: dict[int, pa.Table] = {}
        for path in dict.fromkeys(where.values()):
            mine = [t for t, p in where.items() if p == path]
            try:
                table = pq.read_table(path)
                rows = json.loads(table.schema.metadata[_META])["rows"]
            except (OSError, ValueError, KeyError, pa.ArrowException):
                continue
            split = _split(table.replace_schema_metadata(None), mine)
            # a trace's rows as many as were written (a part rewritten by hand is not trusted)
            out.update({t: rows_of for t, rows_of in split.items() if rows_of.num_rows == rows.get(str(t))})
        return out

    def write(self, table: pa.Table, traces: dict[int, str], pieces: dict[int, str]) -> bool:
        """Keep ``table`` (the rows of ``traces``, ``{trace_id: pieces}``) as a new part, drop parts
        without a current trace and other keys' folders, merge parts past :data:`COMPACT_AT`;
        False when nothing could be written."""
        if not traces:
            return False
        if not self._write_part(table, traces):
            return False
        self._tidy(pieces)
        return True

    def _write_part(self, table: pa.Table, traces: dict[int, str]) -> bool:
        import pyarrow as pa
        import pyarrow.parquet as pq

        counts = _split(table, list(traces))
        meta = json.dumps({"db": self.identity, "traces": {str(t): p for t, p in traces.items()},
                           "rows": {str(t): counts[t].num_rows for t in traces},
                           "schema": _signature(table.schema)}).encode()
        name = f"part-{_stamp()}.parquet"
        tmp = self.key_folder / f".{name}.tmp-{os.getpid()}"
        try:
            self.key_folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), _META: meta}),
                           tmp, compression="lz4")
            os.replace(tmp, self.key_folder / name)
        except (OSError, ValueError, pa.ArrowException):
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return False
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        return True

    def _tidy(self, pieces: dict[int, str]) -> None:
        """Delete other keys' folders and the parts whose every trace is stale or kept again in a
        newer part; past :data:`COMPACT_AT` parts, merge the rest into one."""
        with contextlib.suppress(OSError):
            for other in self.folder.iterdir():
                if other.name != self.key and other.is_dir() and not other.is_symlink():
                    _remove_tree(other)
        parts = self.parts()
        with contextlib.suppress(OSError):  # unreadable, or another database's: never read here
            for path in set(self.key_folder.glob("part-*.parquet")) - {p for p, _ in parts}:
                with contextlib.suppress(OSError):
                    path.unlink()
        newest: dict[int, Path] = {}
        for path, traces in parts:
            for t, p in traces.items():
                if pieces.get(t) == p:
                    newest[t] = path
        live = []
        for path, traces in parts:
            mine = {t: p for t, p in traces.items() if newest.get(t) == path}
            if mine:
                live.append((path, mine))
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
        if len(live) > COMPACT_AT:
            self._compact(live)

    def _compact(self, live: list[tuple[Path, dict[int, str]]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables, traces = [], {}
        try:
            for path, mine in live:
                table = pq.read_table(path).replace_schema_metadata(None)
                tables += _split(table, list(mine)).values()
                traces.update(mine)
            merged = pa.concat_tables(tables, promote_options="permissive")
        except (OSError, ValueError, pa.ArrowException):
            return
        if self._write_part(merged, traces):
            for path, _ in live:
                with contextlib.suppress(OSError):
                    path.unlink()


def _signature(schema: pa.Schema) -> str:
    """The columns and types of ``schema`` as text, a list's item unnamed (Parquet renames it)."""
    return ",".join(f"{f.name}:{_LIST_ITEM.sub('list<', str(f.type))}" for f in schema)


_LIST_ITEM = re.compile(r"list<[^:<>]*: ")


_COUNTER = iter(range(1 << 62))


def _stamp() -> str:
    """A part name that sorts after every earlier one of this and other processes."""
    return f"{_now_ns():020d}-{os.getpid()}-{next(_COUNTER)}"


def _now_ns() -> int:
    import time

    return time.time_ns()


def _remove_tree(folder: Path) -> None:
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            with contextlib.suppress(OSError):
                p.unlink()
        folder.rmdir()


def prune(events_folder: Path, listed: list[tuple[int, str]]) -> int:
    """Delete kept parts none of whose traces is current (``listed``: (trace_id, file) rows of
    ``event_files``), temporary files of interrupted writes, and files of the per-trace layout of
    older versions; the number of files deleted. Standard library and pyarrow only."""
    folder = derived_folder(events_folder)
    if folder is None or not folder.is_dir():
        return 0
    live = _keys(listed)
    gone = 0
    for path in _walk(folder):
        if path.name.startswith("part-") and path.suffix == ".parquet" and _any_current(path, live):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            gone += 1
    return gone


def _walk(folder: Path) -> Iterator[Path]:
    with contextlib.suppress(OSError):
        for p in folder.rglob("*"):
            if p.is_file() and not p.is_symlink():
                yield p


def _any_current(path: Path, live: dict[int, str]) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        traces = json.loads((pq.read_schema(path).metadata or {})[_META])["traces"]
    except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
        return False
    return any(live.get(int(t)) == p for t, p in traces.items())
