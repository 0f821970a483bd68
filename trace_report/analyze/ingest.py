"""Ingest Chrome/Kineto trace files into the DuckDB schema (``docs/schema.md``).

Pipeline: find trace files -> cut each file's ``traceEvents`` into pieces -> decode pieces
with msgspec into Arrow (in worker processes when the input is large) -> append to DuckDB.
A plain ``.json`` file is cut by byte ranges that workers read themselves, so it is never
held whole; a ``.json.gz`` file is decompressed in one stream and its pieces are decoded in
parallel; many small files are decoded one file per worker.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import msgspec
import pyarrow as pa

from trace_report.analyze import names
from trace_report.analyze.chrome import BLOCK_BYTES, Piece, PieceStream, TraceEnvelope, decode_piece
from trace_report.analyze.metadata import device_for, trace_facts
from trace_report.analyze.sources import TraceSource, find_sources
from trace_report.analyze.split import plan_ranges, read_range
from trace_report.errors import TraceFormatError

PARALLEL_MIN_BYTES = 48 << 20
"""Inputs smaller than this (in total) are decoded in the calling process."""

_NORMALISE = """
INSERT INTO events
SELECT $trace_id, event_id,
       CASE cat WHEN 'Kernel' THEN 'kernel' WHEN 'Operator' THEN 'cpu_op'
                WHEN 'Runtime' THEN 'cuda_runtime' WHEN 'Driver' THEN 'cuda_driver'
                WHEN 'Memcpy' THEN 'gpu_memcpy' WHEN 'Memset' THEN 'gpu_memset' ELSE cat END,
       name, pid, tid, ts_us, dur_us,
       coalesce(stream, CASE WHEN tid LIKE 'stream %' THEN TRY_CAST(substr(tid, 8) AS BIGINT) END),
       device, correlation, external_id, args
FROM piece
"""


@dataclass(frozen=True)
class IngestOptions:
    """Options of an ingest. ``workers`` = decoding processes (default: CPU count)."""

    workers: int | None = None
    piece_bytes: int = BLOCK_BYTES
    progress: Callable[[int, int], None] | None = None


@dataclass
class IngestReport:
    """What an ingest did: (trace_id, label) of new traces, skipped labels, warnings."""

    ingested: list[tuple[int, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- decoding (any process)


def _decode_or_none(data: bytes) -> Piece | None:
    try:
        return decode_piece(data)
    except msgspec.DecodeError:
        return None


def _join(a: bytes, b: bytes) -> bytes:
    if b == b"[]":
        return a
    if a == b"[]":
        return b
    return a[:-1] + b"," + b[1:]


def decode_stream(pieces: Iterator[bytes], label: str) -> Iterator[Piece]:
    """Decode raw pieces in order; a piece that is not valid JSON is merged with the next."""
    pending = b""
    for data in pieces:
        if pending:
            data = _join(pending, data)
        piece = _decode_or_none(data)
        if piece is None:
            pending = data
            continue
        pending = b""
        yield piece
    if pending:
        _raise_invalid(pending, label)


def _raise_invalid(data: bytes, label: str) -> None:
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{label}: invalid JSON ({str(exc).split(' (byte')[0]})") from exc
    raise TraceFormatError(f"{label}: invalid trace events")


def _concat(pieces: list[Piece]) -> Piece:
    tables = [p.table for p in pieces]
    table = pa.concat_tables(tables) if tables else decode_piece(b"[]").table
    return Piece(table, sum(p.n_events for p in pieces), sum(p.n_missing_time for p in pieces))


def read_whole(path: Path, label: str) -> tuple[TraceEnvelope, Piece]:
    """Read and decode one trace file in this process (small files, and worker tasks)."""
    stream = PieceStream(path)
    piece = _concat(list(decode_stream(iter(stream), label)))
    return stream.envelope, piece


def _work(task: tuple) -> object:
    kind = task[0]
    try:
        if kind == "file":
            return read_whole(task[1], task[2])
        data = task[1] if kind == "bytes" else read_range(task[1], task[2], task[3])
        return _decode_or_none(data)
    except TraceFormatError as exc:
        return exc


# ---------------------------------------------------------------- parallel ordering


def _task_bytes(task: tuple) -> bytes:
    return task[1] if task[0] == "bytes" else read_range(task[1], task[2], task[3])


def _ordered(
    pool: ProcessPoolExecutor | None, tasks: Iterator[tuple], label: str, inflight: int
) -> Iterator[Piece]:
    """Decode ``tasks`` (in workers when ``pool``) and yield pieces in task order."""
    if pool is None:
        yield from decode_stream((_task_bytes(t) for t in tasks), label)
        return
    queue: deque[tuple[tuple, Future]] = deque()
    pending = b""
    for task in tasks:
        queue.append((task, pool.submit(_work, task)))
        while len(queue) >= inflight:
            pending = yield from _drain_one(queue, pending)
    while queue:
        pending = yield from _drain_one(queue, pending)
    if pending:
        _raise_invalid(pending, label)


def _drain_one(queue: deque[tuple[tuple, Future]], pending: bytes) -> Iterator[Piece]:
    task, future = queue.popleft()
    result = future.result()
    if isinstance(result, Exception):
        raise result
    if pending:  # an earlier piece was cut inside an event: merge and decode here
        pending = _join(pending, _task_bytes(task))
        piece = _decode_or_none(pending)
        if piece is None:
            return pending
        yield piece
        return b""
    if result is None:
        return _task_bytes(task)
    yield result
    return b""


# ---------------------------------------------------------------- per-file plans


def _hash_file(path: Path, out: list[str]) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(8 << 20):
            digest.update(block)
    out.append(digest.hexdigest())


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


class _FileReader:
    """Decode one large file with the pool; afterwards ``envelope`` is complete."""

    def __init__(self, src: TraceSource, opts: IngestOptions, pool: ProcessPoolExecutor | None):
        self.src = src
        self.opts = opts
        self.pool = pool
        self.envelope = TraceEnvelope()
        self.done_bytes = 0

    def pieces(self) -> Iterator[Piece]:
        if _is_gzip(self.src.path):
            yield from self._gzip_pieces()
            return
        try:
            plan = plan_ranges(self.src.path, self.opts.piece_bytes)
        except TraceFormatError:
            yield from self._gzip_pieces()  # the sequential reader gives the precise error
            return
        digest: list[str] = []
        hasher = threading.Thread(target=_hash_file, args=(self.src.path, digest), daemon=True)
        hasher.start()
        tasks = (("range", self.src.path, a, b) for a, b in plan.ranges)
        yield from _ordered(self.pool, tasks, self.src.label, 4)
        yield from decode_stream(iter([plan.last_piece]), self.src.label)
        hasher.join()
        self.envelope = plan.envelope
        self.envelope.sha256 = digest[0]

    def _gzip_pieces(self) -> Iterator[Piece]:
        stream = PieceStream(self.src.path, self.opts.piece_bytes)
        tasks = (("bytes", data) for data in stream)
        yield from _ordered(self.pool, tasks, self.src.label, 4)
        self.envelope = stream.envelope


# ---------------------------------------------------------------- database side


class _Writer:
    """Appends decoded traces to an open connection and fills the ``traces`` table."""

    def __init__(self, con: duckdb.DuckDBPyConnection, report: IngestReport) -> None:
        self.con = con
        self.report = report
        row = con.execute("SELECT coalesce(max(trace_id), 0) FROM traces").fetchone()
        self.next_id = int(row[0]) + 1 if row else 1

    def seen(self, src: TraceSource) -> bool:
        st = src.path.stat()
        row = self.con.execute(
            "SELECT 1 FROM traces WHERE path = ? AND file_bytes = ? AND file_mtime_ns = ?",
            [src.label, st.st_size, st.st_mtime_ns],
        ).fetchone()
        return row is not None

    def append(self, trace_id: int, base: int, piece: Piece) -> int:
        n = piece.table.num_rows
        if n:
            ids = pa.array(range(base, base + n), pa.int64())
            piece_tbl = piece.table.append_column("event_id", ids)
            self.con.register("piece", piece_tbl)
            try:
                self.con.execute(_NORMALISE, {"trace_id": trace_id})
            finally:
                self.con.unregister("piece")
        return base + n

    def finish(self, trace_id: int, src: TraceSource, env: TraceEnvelope, n_events: int,
               n_complete: int, n_missing: int) -> None:
        if n_events == 0:
            raise TraceFormatError(f"{src.label}: the trace has no events")
        if n_missing:
            raise TraceFormatError(
                f"{src.label}: {n_missing} complete events have no 'ts' or no 'dur'"
            )
        dup = self.con.execute(
            "SELECT trace_id FROM traces WHERE sha256 = ?", [env.sha256]
        ).fetchone()
        if dup:
            self.con.execute("DELETE FROM events WHERE trace_id = ?", [trace_id])
            self.report.skipped.append(f"{src.label} (same content as trace {dup[0]})")
            return
        names.demangle_trace(self.con, trace_id)
        self._insert_trace_row(trace_id, src, env, n_events, n_complete)
        self.report.ingested.append((trace_id, src.label))

    def _insert_trace_row(self, trace_id: int, src: TraceSource, env: TraceEnvelope,
                          n_events: int, n_complete: int) -> None:
        facts, warning = trace_facts(env.metadata, src.label, src.run_dir)
        if warning:
            self.report.warnings.append(warning)
        if facts.redacted_keys:
            self.report.warnings.append(
                f"{src.label}: redacted {len(facts.redacted_keys)} secret-looking metadata "
                f"value(s): {', '.join(facts.redacted_keys[:5])}"
            )
        n_kernels, device = self.con.execute(
            "SELECT count(*), mode(device) FROM events WHERE trace_id = ? AND cat = 'kernel'",
            [trace_id],
        ).fetchone()
        device_name, cc = device_for(env.metadata, device)
        st = src.path.stat()
        self.con.execute(
            "INSERT INTO traces VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " now()::TIMESTAMP)",
            [trace_id, src.label, facts.run_id, facts.rank, facts.rank_source, facts.world_size,
             facts.host, device_name, cc, facts.torch_version, facts.schema_version, n_events,
             n_complete, n_kernels, env.sha256, st.st_size, st.st_mtime_ns,
             facts.metadata_json, facts.redacted_keys],
        )


def _make_pool(workers: int) -> ProcessPoolExecutor | None:
    if workers <= 1:
        return None
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def ingest_into(con: duckdb.DuckDBPyConnection, paths: list[Path],
                options: IngestOptions | None = None) -> IngestReport:
    """Ingest the traces found in ``paths`` into ``con`` (schema already created).

    Unchanged files already in the database (same path, size and mtime, or same SHA-256)
    are skipped. Raises :class:`~trace_report.errors.InputError` (and its subclass
    ``TraceFormatError``) for missing paths and unreadable traces; the caller decides what
    happens to what was written (``ingest`` discards it all).
    """
    opts = options or IngestOptions()
    report = IngestReport()
    scratch: list[tempfile.TemporaryDirectory[str]] = []
    try:
        sources = find_sources([Path(p) for p in paths], scratch)
        total = sum(s.path.stat().st_size for s in sources)
        workers = opts.workers if opts.workers is not None else (os.cpu_count() or 1)
        pool = _make_pool(workers) if total >= PARALLEL_MIN_BYTES else None
        try:
            _ingest_sources(con, sources, opts, pool, report, total)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    finally:
        for tmp in scratch:
            tmp.cleanup()
    return report


def _ingest_sources(con: duckdb.DuckDBPyConnection, sources: list[TraceSource],
                    opts: IngestOptions, pool: ProcessPoolExecutor | None,
                    report: IngestReport, total: int) -> None:
    writer = _Writer(con, report)
    todo = []
    for src in sources:
        if writer.seen(src):
            report.skipped.append(f"{src.label} (already ingested)")
        else:
            todo.append(src)
    small = [s for s in todo if pool is not None and s.path.stat().st_size < opts.piece_bytes]
    futures = {s: pool.submit(_work, ("file", s.path, s.label)) for s in small} if pool else {}
    done = 0
    for src in todo:
        trace_id = writer.next_id
        writer.next_id += 1
        if src in futures:
            result = futures[src].result()
            if isinstance(result, Exception):
                raise result
            env, piece = result
            pieces: Iterator[Piece] = iter([piece])
            reader = None
        else:
            reader = _FileReader(src, opts, pool)
            pieces = reader.pieces()
        base = n_events = n_missing = 0
        for piece in pieces:
            base = writer.append(trace_id, base, piece)
            n_events += piece.n_events
            n_missing += piece.n_missing_time
            if opts.progress:
                opts.progress(done + min(src.path.stat().st_size, base), total)
        if reader is not None:
            env = reader.envelope
        writer.finish(trace_id, src, env, n_events, base, n_missing)
        done += src.path.stat().st_size
        if opts.progress:
            opts.progress(done, total)
