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

from trace_report.ingest.catalog import Catalog
from trace_report.inputs import Source
from trace_report.store.pieces import ParquetStore
from trace_report.store.tracedb import IngestSummary


@dataclass
class Versions:
    """The decisions of one ingest about files it may have seen before, made on the traces the
    ``catalog`` knows (stored, and added by this ingest)."""

    catalog: Catalog
    summary: IngestSummary
    force: bool = False
    append_versions: bool = False

    def unchanged(self, src: Source) -> bool:
        """Same path, size and modification time as a trace already stored (and no ``--force``)."""
        if self.force:
            return False
        if src.staged is not None:  # an object: its size, not its copy's (maybe only its head)
            size, mtime_ns = src.staged.info.size, src.staged.info.mtime_ns
        else:
            st = src.path.stat()
            size, mtime_ns = st.st_size, st.st_mtime_ns
        return any(k.file_bytes == size and k.file_mtime_ns == mtime_ns for k in self.catalog.with_path(src.label))

    def skip_reason(self, label: str, sha256: str) -> str | None:
        """Why a decoded file with this content is not stored again, or None to store it."""
        for k in self.catalog.with_content(sha256):
            if k.path != label:
                return f"same content as trace {k.trace_id}"
            if not self.force:
                return f"content unchanged (trace {k.trace_id}); only its size or time stamp differ"
        return None

    def replace_previous(self, label: str) -> None:
        """Remove the traces stored from ``label`` before (unless ``--append-versions``); their
        pieces are deleted only once the new database is in place."""
        if self.append_versions:
            return
        replaced = self.catalog.with_path(label)
        if not replaced:
            return
        old = [k.trace_id for k in replaced]
        catalog, con = self.catalog, self.catalog.con
        catalog.flush()  # rows of this ingest included: the database then holds every known trace
        for trace_id in old:
            if isinstance(catalog.store, ParquetStore):
                catalog.store.retire(con, trace_id)
            con.execute("DELETE FROM traces WHERE trace_id = ?", [trace_id])
        catalog.forget(replaced)
        why = "read again (--force)" if self.force else "its content changed"
        self.summary.notes.append(f"{label}: replaced trace {', '.join(map(str, old))} ({why})")
