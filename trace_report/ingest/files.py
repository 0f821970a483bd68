"""Cut one trace file into decoding jobs: byte ranges of a plain file, or pieces of a gzip stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from trace_report import storage
from trace_report.errors import InputError, TraceFormatError
from trace_report.formats.kineto import MAX_RATIO, PieceStream, TailBytes, TraceEnvelope, is_gzip
from trace_report.formats.kineto_pieces import plan_ranges
from trace_report.ingest.digests import claim, sha256_file
from trace_report.inputs import Source
from trace_report.storage import Location


def _hash_file(path: Path, out: list[str]) -> None:
    out.append(sha256_file(path))


def check_unchanged(src: Source) -> tuple[int | str, int, int, int]:
    """The identity (:func:`~trace_report.inputs.file_identity`; for an object in object storage
    its ETag, size and time, :func:`~trace_report.staging.identity_of`) of ``src``'s file once it
    has been read. Raises :class:`InputError` when it is not the identity it had when it was found:
    the file was written to or replaced (an atomic rename, a new upload) while it was read, so its
    events, its SHA-256 and its size may come from different versions; nothing of it is stored."""
    now = src.identity_now()
    if now is None or (src.identity is not None and now != src.identity):
        what = "ETag, size or time" if src.staged is not None else "size, time or inode"
        raise InputError(f"{src.label}: the file changed while it was read (its {what} differ); "
                         "nothing was stored: ingest it again once it is complete")
    return now


GZIP_RATIO_GUESS = 8
"""Least ratio assumed for a gzip trace when guessing its decoded size (real ones: 10-30)."""


def decoded_size(path: Path) -> int:
    """About how many bytes ``path`` decodes to, for choosing between one process and workers:
    its size, or for gzip the larger of its trailer's ISIZE (the last member's size modulo 4 GiB)
    and :data:`GZIP_RATIO_GUESS` times its size. A guess only: limits are enforced while reading."""
    size = storage.stat(path).size
    if size < 18 or not is_gzip(path):
        return size
    isize = int.from_bytes(storage.read_range(path, size - 4, 4), "little")
    return max(isize, GZIP_RATIO_GUESS * size)


def stored_size(src: Source) -> int:
    """Bytes of ``src`` as stored (an object's size where only its head was copied)."""
    if src.staged is not None and not src.staged.whole:
        return src.staged.info.size
    return storage.stat(src.path).size


def source_decoded_size(src: Source) -> int:
    """:func:`decoded_size` of ``src``; for an object of which only the head was copied, its size
    (times :data:`GZIP_RATIO_GUESS` for gzip), the trailer being in object storage."""
    if src.staged is not None and not src.staged.whole:
        return src.staged.info.size * (GZIP_RATIO_GUESS if is_gzip(src.path) else 1)
    return decoded_size(src.path)


class FileReader:
    """Yields ``("range", (path, start, end))``, ``("bytes", piece)`` and, last for a streamed
    file, ``("tail", (raw end, splitter))`` for one file.

    Plain local files are planned by byte ranges (workers read them) while a thread computes the
    file's SHA-256 (or takes the one :mod:`trace_report.ingest.digests` computed ahead); gzip
    files, plain files the planner cannot cut and objects in object storage (``path`` a URL: one
    GET read once, hashed as it goes, where ranges would read it twice) are streamed, a piece at a
    time as the caller asks for the next one (``max_ratio``: see
    :data:`~trace_report.formats.kineto.MAX_RATIO`).
    After iteration :attr:`envelope` holds the metadata and digest.
    """

    def __init__(self, path: Location, piece_bytes: int, max_ratio: float = MAX_RATIO) -> None:
        self.path = path
        self.piece_bytes = piece_bytes
        self.max_ratio = max_ratio
        self.envelope = TraceEnvelope()
        self._stream: PieceStream | None = None
        self._pos = 0

    def position(self) -> int:
        """Bytes of the file (as stored) handed out so far."""
        if self._stream is not None:
            return self._stream.envelope.raw_bytes or self._stream.bytes_read()
        return self._pos

    def pieces(self) -> Iterator[tuple[str, object]]:
        if not storage.is_url(self.path) and not is_gzip(self.path):
            try:
                plan = plan_ranges(self.path, self.piece_bytes)
            except TraceFormatError:
                plan = None  # the streaming reader reports the precise error
            if plan is not None:
                yield from self._ranges(plan)
                return
        self._stream = PieceStream(self.path, self.piece_bytes, max_ratio=self.max_ratio)
        for data in self._stream:
            if isinstance(data, TailBytes):
                yield "tail", (bytes(data), self._stream.split_tail)
            else:
                yield "bytes", data
        self.envelope = self._stream.envelope

    def _ranges(self, plan) -> Iterator[tuple[str, object]]:  # noqa: ANN001 - RangePlan
        ahead = claim(self.path)
        digest: list[str] = []
        hasher = None
        if ahead is None:
            hasher = threading.Thread(target=_hash_file, args=(self.path, digest), daemon=True)
            hasher.start()
        for start, end in plan.ranges:
            self._pos = end
            yield "range", (self.path, start, end)
        yield "bytes", plan.last_piece
        if hasher is not None:
            hasher.join()
        self.envelope = plan.envelope
        self.envelope.sha256 = digest[0] if ahead is None else ahead()
        self._pos = storage.stat(self.path).size
