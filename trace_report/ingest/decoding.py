"""Decoding jobs and the order of their pieces (the worker side of :mod:`trace_report.ingest.pipeline`).

A :class:`Job` is one unit of decoding work (a piece of bytes, a byte range of a plain file, a
whole small file, or a whole large file cut where the job runs); an engine
(:mod:`trace_report.ingest.engine`: local processes or Ray tasks) runs it with :func:`run_job`,
which returns a :class:`JobResult` (never raising for bad input). :class:`PieceRunner` hands one
file's pieces to the engine in order, at most ``inflight`` at a time, merges a piece cut inside
an event with the next one, and drops each piece's bytes once it is accepted; :func:`decode_file`
decodes one file with it.

A ``url`` job (an engine whose tasks read object storage themselves: ``--engine ray``) copies the
object to the task's own temporary folder, checks that it is the version the driver found, and
decodes it as a ``pieces`` job into that folder; the Parquet pieces come back to the driver as
bytes (:attr:`JobResult.files`), so the driver and the workers share no path. Where the database's
pieces are in object storage (``ingest --pieces``) the job writes them there itself.
"""
from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pyarrow as pa

from trace_report import storage
from trace_report.errors import InputError, TraceFormatError
from trace_report.formats.kineto import (
    MAX_EVENT_BYTES,
    MAX_RATIO,
    PIECE_BYTES,
    TOO_DEEP,
    Piece,
    TraceEnvelope,
    decode_piece,
    is_utf8_error,
    replace_bad_utf8,
)
from trace_report.ingest.engine import INFLIGHT, Engine, JobFuture
from trace_report.ingest.files import FileReader
from trace_report.ingest.normalize import PieceStats, count_duplicates, finalize
from trace_report.staging import identity_of
from trace_report.storage import Location
from trace_report.store.pieces import ParquetStore, read_piece, write_parquet


@dataclass
class Job:
    """One unit of decoding work. ``kind``: ``bytes`` (a piece), ``range`` (bytes of a plain
    file), ``file`` (a whole small file), ``pieces`` (a whole large file cut and written into
    ``store`` by the job itself, for engines with ``file_tasks``) or ``url`` (an object at ``url``
    read by the job itself, its pieces named as ``store`` names them and returned as bytes).
    ``out``: Parquet path, or None to return the table."""

    kind: str
    trace_id: int
    piece: int
    label: str
    data: bytes = b""
    path: storage.Location | None = None
    """Kinds ``range``, ``file`` and ``pieces``: the file (kinds ``file`` and ``pieces``: local)."""
    start: int = 0
    end: int = 0
    out: Location | None = None
    split_tail: Callable[[bytes], bytes] | None = None  # kind 'tail' only, never sent to workers
    max_ratio: float = MAX_RATIO  # kinds 'file' and 'pieces'
    store: ParquetStore | None = None  # kind 'pieces' only: where its pieces go
    piece_bytes: int = PIECE_BYTES  # kinds 'file', 'pieces' and 'url': the pieces it is cut into where it is read
    url: str = ""  # kind 'url' only
    identity: tuple[int | str, int, int, int] | None = None
    """Kind ``url``: the object's (ETag, 0, size, time in ns) when the driver found it
    (:func:`~trace_report.staging.identity_of`); another version is refused."""

    def raw(self) -> bytes:
        if self.kind == "bytes":
            return self.data
        assert self.path is not None
        size = self.end - self.start
        buf = bytearray(size + 2)
        buf[0], buf[-1] = 0x5B, 0x5D  # '[' ... ']'
        with storage.open_ranges(self.path) as src:
            src.readinto(self.start, memoryview(buf)[1:-1])
        return bytes(buf) if size < 4096 else buf  # type: ignore[return-value]


@dataclass
class JobResult:
    """Outcome of a :class:`Job`: ``ok`` False when its bytes were not valid JSON on their own."""

    ok: bool
    stats: PieceStats = field(default_factory=PieceStats)
    table: pa.Table | None = None
    envelope: TraceEnvelope | None = None
    error: Exception | None = None
    parts: list[tuple[Location | None, JobResult]] | None = None
    """Kind ``pieces``: each piece's Parquet path and result, in order."""
    duplicates: int | None = None
    """Kinds ``file`` and ``pieces``: events that exactly repeat an earlier one of the file
    (:func:`~trace_report.ingest.normalize.count_duplicates`), counted where the job ran so that
    the driver need not read the pieces again."""
    files: dict[str, bytes] | None = None
    """Kind ``url``: each Parquet piece's bytes by its name (the names of :attr:`parts`)."""


# ---------------------------------------------------------------- decoding (any process)


def _finish(piece: Piece, job: Job) -> JobResult:
    """The rows of a decoded piece, written to ``job.out`` or returned; takes the table out of
    ``piece`` (the decoded columns are let go as soon as their normalised rows exist)."""
    decoded, piece.table = piece.table, None  # type: ignore[assignment]
    table, stats = finalize(decoded, job.trace_id, job.piece, piece.n_events, piece.n_missing_time,
                            n_not_objects=piece.n_not_objects, n_bad_utf8=piece.n_bad_utf8,
                            args_suspects=piece.args_suspects)
    del decoded  # the columns finalize replaced (names, categories) go before the file is written
    if job.out is not None:
        write_parquet(table, job.out)
        return JobResult(True, stats)
    return JobResult(True, stats, table)


def decode_bytes(data: bytes, job: Job) -> JobResult:
    """Decode one piece; ``ok=False`` (not an exception) when it is not valid JSON alone."""
    piece = _decode(data, job)
    return JobResult(False) if piece is None else _finish(piece, job)


def _decode(data: bytes, job: Job) -> Piece | None:
    try:
        return decode_piece(data)
    except msgspec.DecodeError:
        return None
    except TraceFormatError as exc:
        raise TraceFormatError(f"{job.label}: {exc}") from None


def decode_range(job: Job) -> JobResult:
    """Decode the bytes of a ``range`` job (read here) as :func:`decode_bytes` does, letting go of
    them before the rows are normalised and written: a piece's bytes are not held beside its
    columns and its Parquet pages (a decoding thread's peak memory, with it its heap's size)."""
    data = job.raw()
    piece = _decode(data, job)
    del data
    return JobResult(False) if piece is None else _finish(piece, job)


def join_pieces(a: bytes, b: bytes) -> bytes:
    """Two JSON arrays of events as one (a piece cut inside an event, merged with the next)."""
    if b == b"[]":
        return a
    if a == b"[]":
        return b
    return a[:-1] + b"," + b[1:]


def raise_invalid(data: bytes, label: str) -> None:
    try:
        msgspec.json.decode(data)
    except RecursionError:
        raise TraceFormatError(f"{label}: {TOO_DEEP}") from None
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        if is_utf8_error(exc, data):
            raise_invalid(replace_bad_utf8(data)[0], label)
        raise TraceFormatError(f"{label}: invalid JSON ({str(exc).split(' (byte')[0]})") from exc
    raise TraceFormatError(f"{label}: invalid trace events")


def read_whole(job: Job) -> JobResult:
    """Decode a whole (small) file in this process into one table or one Parquet file."""
    assert job.path is not None
    envelope, results = decode_file(job.path, job.label, job.trace_id, piece_bytes=job.piece_bytes,
                                    max_ratio=job.max_ratio)
    stats = PieceStats()
    for _, r in results:
        stats.add(r.stats)
    table: pa.Table | None = pa.concat_tables([r.table for _, r in results if r.table is not None])
    assert table is not None
    duplicates = count_duplicates(lambda columns: [table.select(columns)], stats.dup_keys or None)
    if job.out is not None:
        write_parquet(table, job.out)
        table = None
    return JobResult(True, stats, table, envelope, duplicates=duplicates)


def read_pieces(job: Job) -> JobResult:
    """Cut, decode and write a whole (large) file in this process, a piece at a time, into
    ``job.store``; the driver then records the pieces as it records those it cut itself."""
    assert job.path is not None and job.store is not None
    envelope, results = decode_file(job.path, job.label, job.trace_id, piece_bytes=job.piece_bytes,
                                    store=job.store, max_ratio=job.max_ratio)
    parts = [(j.out, r) for j, r in results]
    keys = [k for _, r in parts for k in r.stats.dup_keys]
    duplicates = count_duplicates(lambda columns: (read_piece(p, columns) for p, _ in parts if p),
                                  keys or None)
    return JobResult(True, envelope=envelope, parts=parts, duplicates=duplicates)


def read_object(job: Job) -> JobResult:
    """Copy the object at ``job.url`` to a temporary folder of this process (one buffered stream,
    :func:`trace_report.storage.download`; credentials from this process's environment), decode
    it a piece at a time into Parquet pieces there, and return them as bytes. Raises
    :class:`InputError` when the object is not the version the driver found (uploaded again)."""
    assert job.store is not None
    with tempfile.TemporaryDirectory(prefix="trace-report-object-") as tmp:
        local = Path(tmp) / (storage.name_of(job.url) or "object")
        info = storage.download(job.url, local)
        if job.identity is not None and identity_of(info) != job.identity:
            raise InputError(f"{job.label}: the object changed since the ingest found it (its ETag, size or "
                             "time differ); nothing was stored: ingest it again once it is complete")
        store = job.store.sibling()
        if store.remote:  # the pieces go to object storage from here: nothing comes back but their names
            return read_pieces(Job("pieces", job.trace_id, 0, job.label, path=local, store=store,
                                   max_ratio=job.max_ratio, piece_bytes=job.piece_bytes))
        store.folder = Path(tmp) / "events"
        result = read_pieces(Job("pieces", job.trace_id, 0, job.label, path=local, store=store,
                                 max_ratio=job.max_ratio, piece_bytes=job.piece_bytes))
        assert result.parts is not None
        result.files = {storage.name_of(p): storage.read_bytes(p) for p, _ in result.parts if p is not None}
        result.parts = [(Path(storage.name_of(p)) if p is not None else None, r) for p, r in result.parts]
    return result


def run_job(job: Job) -> JobResult:
    """Worker entry point: never raises for bad input, returns the error instead."""
    try:
        if job.kind == "url":
            return read_object(job)
        if job.kind == "file":
            return read_whole(job)
        if job.kind == "pieces":
            return read_pieces(job)
        return decode_range(job) if job.kind == "range" else decode_bytes(job.raw(), job)
    except TraceFormatError as exc:
        return JobResult(False, error=exc)


# ---------------------------------------------------------------- ordering and merging


class PieceRunner:
    """Runs the piece jobs of one file (in a pool or here) and merges bad cuts, in order.

    At most ``inflight`` jobs are submitted and not yet accepted; the next job is pulled from
    the (lazy) job iterator only when one is accepted, so a streamed file is read no faster than
    it is decoded. An accepted job's bytes are dropped (``results`` keeps only where each piece
    went); the bytes of a piece cut inside an event are kept until the next piece completes it,
    and refused past ``MAX_EVENT_BYTES`` plus two pieces (an invalid file, not a long event).
    """

    def __init__(self, pool: Engine | None, store: ParquetStore | None, label: str,
                 piece_bytes: int = PIECE_BYTES):
        self.pool = pool
        self.store = store
        self.label = label
        self.results: list[tuple[Job, JobResult]] = []
        self._pending: Job | None = None
        self._pending_bytes = b""
        self._max_pending = MAX_EVENT_BYTES + 2 * piece_bytes

    def run(self, jobs: Iterator[Job], inflight: int = INFLIGHT) -> None:
        queue: deque[tuple[Job, JobFuture | None]] = deque()
        for job in jobs:
            if job.kind == "tail":
                while queue:
                    self._accept(*queue.popleft())
                self._tail(job)
                continue
            queue.append((job, None if self.pool is None else self.pool.submit(run_job, job)))
            while len(queue) >= (inflight if self.pool is not None else 1):
                self._accept(*queue.popleft())
        while queue:
            self._accept(*queue.popleft())
        if self._pending is not None:
            raise_invalid(self._pending_bytes, self.label)

    def _tail(self, job: Job) -> None:
        """The end of a streamed file: merge any pending piece, find the array's end, decode."""
        assert job.split_tail is not None
        if self._pending is not None:
            data = job.split_tail(self._pending_bytes[1:-1] + b"," + job.data)
            job = self._pending
            self._pending, self._pending_bytes = None, b""
        else:
            data = job.split_tail(job.data)
        job.data = b""
        result = decode_bytes(data, job)
        if not result.ok:
            raise_invalid(data, self.label)
        self.results.append((job, result))

    def _accept(self, job: Job, future: JobFuture | None) -> None:
        result = run_job(job) if future is None else future.result()
        if result.error is not None:
            raise result.error
        if self._pending is not None:  # merge with the earlier piece that was cut inside an event
            if result.ok and job.out is not None:
                assert self.store is not None
                self.store.forget(job.out)
            self._pending_bytes = join_pieces(self._pending_bytes, job.raw())
            job.data = b""
            merged = decode_bytes(self._pending_bytes, self._pending)
            if merged.ok:
                self.results.append((self._pending, merged))
                self._pending, self._pending_bytes = None, b""
            elif len(self._pending_bytes) > self._max_pending:
                raise_invalid(self._pending_bytes, self.label)
            return
        if result.ok:
            self.results.append((job, result))
        else:
            self._pending, self._pending_bytes = job, job.raw()
        job.data = b""  # the piece is written (or kept in _pending_bytes): drop its bytes


def decode_file(
    path: storage.Location,
    label: str,
    trace_id: int,
    *,
    piece_bytes: int = PIECE_BYTES,
    pool: Engine | None = None,
    store: ParquetStore | None = None,
    on_piece: Callable[[int], None] | None = None,
    max_ratio: float = MAX_RATIO,
) -> tuple[TraceEnvelope, list[tuple[Job, JobResult]]]:
    """Cut one file, or stream one object (``path`` a URL), into jobs (:class:`FileReader`),
    decode them in order (:class:`PieceRunner`).

    Pieces go to ``store`` as Parquet files when given, else their tables stay in the results.
    ``on_piece(bytes of the file handed out so far)`` is called after each job.
    """
    runner = PieceRunner(pool, store, label, piece_bytes)
    reader = FileReader(path, piece_bytes, max_ratio)

    def jobs() -> Iterator[Job]:
        for k, (kind, payload) in enumerate(reader.pieces()):
            job = Job(kind, trace_id, k, label, out=store.path_for(trace_id, k) if store else None)
            if kind == "tail":
                job.data, job.split_tail = payload  # type: ignore[misc]
            elif kind == "bytes":
                job.data = payload  # type: ignore[assignment]
            else:
                job.path, job.start, job.end = payload  # type: ignore[misc]
            yield job
            if on_piece:
                on_piece(reader.position())

    runner.run(jobs(), pool.inflight if pool is not None else INFLIGHT)
    return reader.envelope, runner.results
