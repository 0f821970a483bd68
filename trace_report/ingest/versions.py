"""A file that is already in the database: skip it, replace its old trace, or keep both.

Rules (``docs/schema.md``, "Duplicates and changed files"):

- same path, size and modification time: skipped as "already ingested" (``--force`` reads it
  again and replaces the old trace);
- same path, changed size or time, same SHA-256: skipped ("content unchanged");
- same path, changed content: the new trace replaces the old one (rows and pieces), with a note;
  ``--append-versions`` keeps both;
- identical content under another path (in the database or earlier in the same call): skipped,
  naming the trace it duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from trace_report.inputs import Source
from trace_report.store.pieces import MemoryStore, ParquetStore
from trace_report.store.tracedb import IngestSummary


@dataclass
class Versions:
    """The decisions of one ingest about files it may have seen before."""

    con: duckdb.DuckDBPyConnection
    store: ParquetStore | MemoryStore
    summary: IngestSummary
    force: bool = False
    append_versions: bool = False

    def unchanged(self, src: Source) -> bool:
        """Same path, size and modification time as a trace already stored (and no ``--force``)."""
        if self.force:
            return False
        st = src.path.stat()
        row = self.con.execute(
            "SELECT 1 FROM traces WHERE path = ? AND file_bytes = ? AND file_mtime_ns = ?",
            [src.label, st.st_size, st.st_mtime_ns],
        ).fetchone()
        return row is not None

    def skip_reason(self, label: str, sha256: str) -> str | None:
        """Why a decoded file with this content is not stored again, or None to store it."""
        for trace_id, path in self.con.execute(
                "SELECT trace_id, path FROM traces WHERE sha256 = ? ORDER BY trace_id", [sha256]).fetchall():
            if path != label:
                return f"same content as trace {trace_id}"
            if not self.force:
                return f"content unchanged (trace {trace_id}); only its size or time stamp differ"
        return None

    def replace_previous(self, label: str) -> None:
        """Remove the traces stored from ``label`` before (unless ``--append-versions``); their
        pieces are deleted only once the new database is in place."""
        if self.append_versions:
            return
        old = [t for (t,) in self.con.execute("SELECT trace_id FROM traces WHERE path = ?", [label]).fetchall()]
        for trace_id in old:
            if isinstance(self.store, ParquetStore):
                self.store.retire(self.con, trace_id)
            self.con.execute("DELETE FROM traces WHERE trace_id = ?", [trace_id])
        if old:
            why = "read again (--force)" if self.force else "its content changed"
            self.summary.notes.append(f"{label}: replaced trace {', '.join(map(str, old))} ({why})")
