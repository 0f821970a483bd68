"""The catalog rows of one ingest (``traces``, ``event_files``, ``kernel_names``), written at its
end in one statement per table, and what the database already holds, read once.

Each DuckDB statement costs CPU while the decoding workers keep both cores busy, and five per
trace (three lookups, two inserts) added up on a folder of many ranks.
The duplicate and changed-file rules (:mod:`trace_report.ingest.versions`)
look traces up here instead (:meth:`Catalog.with_path`, :meth:`Catalog.with_content`), among the
stored traces and those added by this ingest. Nothing is lost by writing late: an ingest is
all or nothing (the database is a temporary copy until it succeeds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from trace_report.redact import redact_json_text, redact_text
from trace_report.storage import Location
from trace_report.store.memory import MemoryStore
from trace_report.store.pieces import ParquetStore

TRACE_VALUES = 19
"""Values of a ``traces`` row as the ingest gives them: every column but ``ingested_at`` (set when
the rows are written), in table order (``store/sql/schema.sql``)."""
CHUNK_ROWS = 100
"""Rows per INSERT statement (a few thousand parameters at most)."""
TRACE_TEXT_COLUMNS = {1: "path", 2: "run_id", 4: "rank_source", 6: "host", 7: "device_name",
                      8: "compute_capability", 9: "torch_version", 10: "schema_version", 14: "sha256",
                      17: "metadata"}
"""The text values of a ``traces`` row (position -> column) that :meth:`Catalog.add_trace`
screens for secrets; position 18 is ``redacted_keys`` (what was redacted, never a value)."""


@dataclass(frozen=True)
class KnownTrace:
    """What the rules compare of a trace: id, path as given, SHA-256, size and time of its file."""

    trace_id: int
    path: str
    sha256: str | None
    file_bytes: int | None
    file_mtime_ns: int | None


@dataclass
class Catalog:
    """Catalog rows waiting to be written (:meth:`flush`) and the traces known so far, by path
    and by content."""

    con: duckdb.DuckDBPyConnection
    store: ParquetStore | MemoryStore
    traces: list[list[Any]] = field(default_factory=list)
    files: list[tuple[int, Location, int]] = field(default_factory=list)
    kernel_names: dict[str, str] = field(default_factory=dict)
    _by_path: dict[str, list[KnownTrace]] = field(default_factory=dict)
    _by_sha: dict[str | None, list[KnownTrace]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for row in self.con.execute(
                "SELECT trace_id, path, sha256, file_bytes, file_mtime_ns FROM traces ORDER BY trace_id").fetchall():
            self._know(KnownTrace(*row))

    def _know(self, trace: KnownTrace) -> None:
        self._by_path.setdefault(trace.path, []).append(trace)
        self._by_sha.setdefault(trace.sha256, []).append(trace)

    def with_path(self, path: str) -> list[KnownTrace]:
        """The known traces read from ``path`` (as given), by trace id."""
        return list(self._by_path.get(path, []))

    def with_content(self, sha256: str) -> list[KnownTrace]:
        """The known traces whose file had this SHA-256, by trace id."""
        return list(self._by_sha.get(sha256, []))

    def forget(self, traces: list[KnownTrace]) -> None:
        """Traces removed from the database (:meth:`flush` first if they were added here)."""
        for trace in traces:
            self._by_path[trace.path].remove(trace)
            self._by_sha[trace.sha256].remove(trace)

    def add_trace(self, values: list[Any]) -> None:
        """One ``traces`` row (:data:`TRACE_VALUES` values, table order).

        Every text value (:data:`TRACE_TEXT_COLUMNS`) goes through the secret screen of
        :mod:`trace_report.redact` on its way in, whatever the reader did before (Kineto
        ``deviceProperties`` names, nsys host names, run folder names...): what it replaces is
        added to ``redacted_keys`` as ``kind@traces.<column>``. The rules of
        :mod:`~trace_report.ingest.versions` keep comparing the path as given."""
        assert len(values) == TRACE_VALUES
        self._know(KnownTrace(values[0], values[1], values[14], values[15], values[16]))
        self.traces.append(screen_trace_row(values))

    def add_files(self, trace_id: int, files: list[tuple[Location, int]]) -> None:
        """A trace's Parquet pieces (path, rows), for ``event_files``."""
        self.files.extend((trace_id, path, rows) for path, rows in files)

    def add_kernel_names(self, mangled: dict[str, str]) -> None:
        """Raw (mangled) kernel names and their demangled form, for ``kernel_names``."""
        self.kernel_names.update(mangled)

    def last_trace_id(self) -> int:
        """The largest trace id known (0 for none): the database's, then this ingest's."""
        return max((t.trace_id for ts in self._by_path.values() for t in ts), default=0)

    def flush(self) -> None:
        """Write the waiting rows; kernel names already in ``kernel_names`` are not added twice."""
        row = "(" + ", ".join(["?"] * TRACE_VALUES) + ", now()::TIMESTAMP)"
        for chunk in _chunks(self.traces, CHUNK_ROWS):
            self.con.execute("INSERT INTO traces VALUES " + ", ".join([row] * len(chunk)),
                             [v for values in chunk for v in values])
        if isinstance(self.store, ParquetStore):
            for chunk in _chunks(self.files, CHUNK_ROWS * 10):
                self.store.record(self.con, chunk)
            self.store.record_location(self.con)
        for chunk in _chunks(list(self.kernel_names.items()), CHUNK_ROWS * 10):
            self.con.execute(
                "INSERT INTO kernel_names SELECT v.name, v.raw_name FROM (VALUES "
                + ", ".join(["(?, ?)"] * len(chunk)) + ") v(raw_name, name) "
                "WHERE NOT EXISTS (SELECT 1 FROM kernel_names k WHERE k.raw_name = v.raw_name)",
                [x for raw, nice in chunk for x in (raw, nice)])
        self.traces.clear()
        self.files.clear()
        self.kernel_names.clear()


def screen_trace_row(values: list[Any]) -> list[Any]:
    """A copy of a ``traces`` row with secrets in its text values replaced (``metadata`` as JSON,
    keys counting) and ``kind@traces.<column>`` added to its ``redacted_keys`` (position 18)."""
    out = list(values)
    found: list[str] = []
    for pos, column in TRACE_TEXT_COLUMNS.items():
        value = out[pos]
        if isinstance(value, str):
            redact = redact_json_text if column == "metadata" else redact_text
            out[pos], hits = redact(value, f"traces.{column}")
            found.extend(str(r) for r in hits)
    if found:
        out[18] = list(dict.fromkeys([*(out[18] or []), *found]))
    return out


def _chunks(rows: list[Any], size: int) -> list[list[Any]]:
    return [rows[i:i + size] for i in range(0, len(rows), size)]
