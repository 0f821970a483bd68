"""Inputs in object storage, seen as local files by the folder search and the kind detection.

:meth:`Stager.stage` copies the object at a URL, or every object under a prefix (a "folder" of
ranks, a run folder), into a :class:`~trace_report.archives.Scratch` folder under the same
relative names (the prefix's own last name kept, so a run's folder name and the rank in a file
name read as they would locally), each as one buffered stream (:func:`trace_report.storage.download`),
or, for a trace or tar archive larger than the stager's ``heads``, only its first bytes.
Each copy remembers its URL and the object's (ETag, size, modification time) as it was found:
the URL is what the user sees and ``traces.path`` stores, and an object whose identity differs
once it has been read was changed during the ingest (:meth:`Staged.identity_now`).

Objects under a hidden name (a part starting with ``.``) and Parquet files (a database's or a
dataset's own) are not copied, as the folder search would not read them; nor, under a prefix, an
object whose first bytes are none of an input's (:func:`may_be_input`): a run's prefix may hold
checkpoints of gigabytes, which the folder search reads only the start of.

A :class:`Stager` made with ``heads`` (what :func:`trace_report.inputs.resolve` does unless a
reader needs whole files) copies only the first ``heads`` bytes of a JSON or gzip trace or a tar
archive larger than that (:attr:`Staged.whole` False): enough to tell its kind
(:func:`trace_report.inputs.detect` reads at most :data:`~trace_report.inputs.HEAD_BYTES`), while
the events are streamed from the URL as they are decoded (by the ingest, or by a task that reads
URLs itself, ``--engine ray``) and an archive is unpacked from its stream. SQLite, Nsight Compute
and CSV objects, run manifests and objects no larger than ``heads`` (the head is the whole object:
one request) are copied whole: SQLite and ``ncu_report`` open a file by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from trace_report import storage
from trace_report.archives import Scratch
from trace_report.errors import InputError
from trace_report.formats.magic import GZIP_MAGIC

_SKIPPED_SUFFIXES = (".parquet", ".duckdb.wal")
SNIFF_BYTES = 512
"""Bytes of an object under a prefix read (one ranged request) to decide whether to copy it."""
_TEXT_SUFFIXES = (".json", ".csv", ".txt", ".ncu-rep", ".sqlite")
_WHOLE_SUFFIXES = (".sqlite", ".ncu-rep", ".csv", ".txt")
"""Objects a head-only stager still copies whole: their readers open a local file by name."""


def may_be_input(name: str, head: bytes) -> bool:
    """Whether an object named ``name`` whose content starts with ``head`` could be an input
    (:func:`trace_report.inputs.detect` decides once it is copied): JSON (``{`` or ``[``), gzip,
    SQLite, a tar archive (``ustar`` at offset 257), or a name that ncu, nsys or a run folder uses."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return (text[:1] in (b"{", b"[") or head.startswith((GZIP_MAGIC, b"SQLite format 3\x00"))
            or head[257:262] == b"ustar" or name.lower().endswith(_TEXT_SUFFIXES))


def _streamed(head: bytes) -> bool:
    """Whether content starting with ``head`` may be a JSON trace (plain or gzip) or a tar archive
    (gzip, or ``ustar`` at offset 257): the kinds read as a stream from their URL."""
    return (head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[") or head.startswith(GZIP_MAGIC)
            or head[257:262] == b"ustar")


@dataclass(frozen=True)
class Staged:
    """One object copied to ``path``: its URL and its :class:`~trace_report.storage.ObjectInfo` when found."""

    path: Path
    url: str
    info: storage.ObjectInfo
    whole: bool = True
    """False: ``path`` holds only the object's first bytes (a head-only :class:`Stager`)."""

    def identity_now(self) -> tuple[str, int, int, int] | None:
        """(ETag, 0, size, modification time in ns) of the object now; None when it is gone or
        cannot be reached."""
        try:
            now = storage.stat(self.url)
        except InputError:
            return None
        return identity_of(now)


def identity_of(info: storage.ObjectInfo) -> tuple[str, int, int, int]:
    """An object's identity in the shape of a local file's (device, inode, size, time): (ETag, 0,
    size, modification time in ns)."""
    return info.etag or "", 0, info.size, info.mtime_ns


@dataclass
class Stager:
    """Copies of the URLs of one resolution, each URL copied once, into one scratch folder."""

    scratch: Scratch | None = None
    by_path: dict[Path, Staged] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(URL, reason) of each object under a prefix that was not copied."""
    roots: dict[str, Path] = field(default_factory=dict)
    """Each URL given (an object or a prefix) and its local copy (a file or a folder)."""
    heads: int | None = None
    """Copy only this many first bytes of a trace-like object (None: every object whole)."""

    def stage(self, url: str) -> Path:
        """The local copy of ``url`` (an object, or a prefix copied whole as a folder). Raises
        :class:`InputError` for a missing object, prefix or bucket, denied access or an
        unreachable endpoint, and for a prefix holding an exported dataset (not read in place)."""
        if url in self.roots:
            return self.roots[url]
        if self.scratch is None:
            self.scratch = Scratch()
        base = self.scratch.path / str(len(self.roots))
        local = base / (storage.name_of(url) or "bucket")
        base.mkdir()
        if storage.is_prefix(url):
            self._prefix(url, local)
        else:
            self.by_path[local] = self._copy(url, local)
        self.roots[url] = local
        return local

    def _prefix(self, url: str, local: Path) -> None:
        root = url.rstrip("/")
        local.mkdir()
        objects = storage.list_prefix(root)
        names = {str(o.location)[len(root) + 1:] for o in objects}
        if "traces.parquet" in names and any(n.startswith("events/") for n in names):
            raise InputError(f"{storage.shown(url)}: a Parquet dataset in object storage is not read in place; "
                             "copy it to a local folder")
        for obj in objects:
            rel = str(obj.location)[len(root) + 1:]
            if not rel or any(part.startswith(".") for part in rel.split("/")) or rel.endswith(_SKIPPED_SUFFIXES):
                continue
            if not may_be_input(rel, storage.read_range(obj.location, 0, SNIFF_BYTES)):
                self.skipped.append((str(obj.location), "not a trace, archive or Nsight export (by its first bytes)"))
                continue
            dest = local.joinpath(*rel.split("/"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.by_path[dest] = self._copy(str(obj.location), dest)

    def _copy(self, url: str, dest: Path) -> Staged:
        """``url`` copied to ``dest``: whole, or its head only (see :attr:`heads`)."""
        name = dest.name.lower()
        if self.heads is None or name.endswith(_WHOLE_SUFFIXES) or name == "run.json" or name.startswith("run-rank"):
            return Staged(dest, url, storage.download(url, dest))
        info = storage.stat(url)
        head = storage.read_range(url, 0, self.heads)
        whole = len(head) >= info.size  # a small object: the head is all of it (one request)
        if not whole and not _streamed(head):  # SQLite, ...: copied whole
            return Staged(dest, url, storage.download(url, dest))
        storage.write_bytes(dest, head)
        os.utime(dest, ns=(info.mtime_ns, info.mtime_ns))
        return Staged(dest, url, info, whole=whole)

    def label(self, path: Path) -> str | None:
        """The URL of the copy at ``path``, or of the folder copy it lies in; None for a local file."""
        if (staged := self.by_path.get(path)) is not None:
            return staged.url
        for url, local in self.roots.items():
            if local == path or local in path.parents:
                return storage.join(url, path.relative_to(local).as_posix()) if local != path else url
        return None
