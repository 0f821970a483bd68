"""The start of an ingest, before DuckDB loads: options, sizes, and the jobs submitted early.

:func:`begin_ingest` resolves the inputs, takes the database lock, removes what a killed writer
left and, into a new database, submits the decoding jobs (:func:`prestart`), all without
importing DuckDB (:mod:`trace_report.store.layout`, :mod:`trace_report.store.pieces`);
:func:`trace_report.ingest.pipeline.finish_ingest` then opens the database and writes the
catalog. ``trace-report ingest`` imports the pipeline (DuckDB and the rest, one core busy) only
once the jobs run, so that the other cores decode meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trace_report.formats.kineto import MAX_RATIO, PIECE_BYTES, TraceEnvelope
from trace_report.ingest.decoding import Job, JobResult, decode_file, run_job
from trace_report.ingest.engine import Engine, JobFuture, local_engine
from trace_report.ingest.files import source_decoded_size, stored_size
from trace_report.inputs import InputKind, Resolution, Source, resolve
from trace_report.storage import Location, is_url, location
from trace_report.store.layout import database_lock, database_path, may_have_leftovers
from trace_report.store.pieces import ParquetStore
from trace_report.store.remote_pieces import prepare as prepare_pieces
from trace_report.sysutil import available_cpus

if TYPE_CHECKING:  # DuckDB: the start of an ingest runs before it is imported
    from trace_report.store.memory import MemoryStore

PARALLEL_MIN_BYTES = 48 << 20
"""Inputs smaller than this in total (decoded: a gzip trace counts as its decompressed size,
:func:`~trace_report.ingest.files.decoded_size`) are decoded in the calling process."""
SMALL_INPUT_BYTES = 128 << 20
"""An ingest of fewer decoded bytes than this in total is cut into :data:`SMALL_PIECE_BYTES` pieces."""
SMALL_PIECE_BYTES = 4 << 20
WHOLE_FILE_PIECES = 8
"""With several inputs, a trace of up to this many pieces (decoded; pieces of the size asked for,
else of the default size) goes whole to one worker, which reads and decodes it alone: the ranks
of a run decode side by side and the main process reads none of their bytes (cut into pieces, a
30 MB rank was mostly decoded by the main process)."""


@dataclass(frozen=True)
class IngestOptions:
    """Options of an ingest: ``workers`` = decoding workers (default: :func:`default_workers`;
    threads, or processes past 3 on Linux, :func:`~trace_report.ingest.engine.local_engine`);
    ``progress(done_bytes, total_bytes)`` is called as files are read; ``force`` and
    ``append_versions``: see :mod:`trace_report.ingest.versions`; ``max_ratio``: the largest
    decompression ratio accepted for a gzip trace (0 = no limit; see
    :data:`~trace_report.formats.kineto.MAX_RATIO`)."""

    workers: int | None = None
    piece_bytes: int | None = None
    """Size of the pieces a large file is cut into; None: :func:`piece_bytes_for` the input."""
    progress: Callable[[int, int], None] | None = None
    force: bool = False
    """Read files again even when their path, size and time are unchanged (replacing them)."""
    append_versions: bool = False
    """Keep the old trace of a changed file beside the new one instead of replacing it."""
    max_ratio: float = MAX_RATIO
    pieces: str | None = None
    """Where the event pieces go: None, beside the database (``<db>.events/``); else an
    object-store prefix (``--pieces s3://...``, :mod:`trace_report.store.remote_pieces`)."""


def piece_bytes_for(total: int) -> int:
    """The piece size of an ingest of ``total`` decoded bytes (:func:`~trace_report.ingest.files.decoded_size`).

    A decoding thread holds about three times its piece at once (bytes, columns, Parquet pages),
    and glibc keeps each thread's heap at its peak. Beside the ~0.15 GB that the process takes
    before reading anything (pyarrow, numpy, DuckDB and a connection), two threads' 8 MB pieces
    are a third of the peak of a 113 MB ingest; 4 MB pieces take 12% off it at the same speed.
    Larger inputs keep :data:`~trace_report.formats.kineto.PIECE_BYTES`: 4 MB pieces made a 205 MB
    ingest 5% slower and a 1.13 GB database's queries 15-35% slower (twice the event files).
    Measured on 2 cores (docs/benchmarks.md, "Piece sizes")."""
    return SMALL_PIECE_BYTES if total < SMALL_INPUT_BYTES else PIECE_BYTES


def default_workers(total: int, files: int, piece_bytes: int) -> int:
    """Decoding workers when none are asked for: the CPUs this process may run on
    (:func:`~trace_report.sysutil.available_cpus`: a container's or ``taskset``'s CPU set, not
    the machine's), and no more than the jobs of ``files`` traces of ``total`` decoded bytes
    cut into ``piece_bytes`` pieces could keep busy. Past 3 workers they are forked processes
    (:func:`~trace_report.ingest.engine.local_engine`), ~0.13 GB each and all started at once:
    a 200 MB trace on a 64-CPU machine starts 24, not 64."""
    jobs = max(files, -(-total // max(1, piece_bytes)))
    return max(1, min(available_cpus(), jobs))


def local_engine_for(total: int, opts: IngestOptions, files: int, piece_bytes: int) -> Engine | None:
    """Decoding on this machine for an ingest of ``files`` traces of ``total`` decoded bytes cut
    into ``piece_bytes`` pieces: ``opts.workers`` workers (default: :func:`default_workers`), or
    None (the calling thread) below :data:`PARALLEL_MIN_BYTES`."""
    if total < PARALLEL_MIN_BYTES:
        return None
    workers = opts.workers if opts.workers is not None else default_workers(total, files, piece_bytes)
    return local_engine(workers)


Futures = dict[Source, tuple[Location | None, JobFuture]]


def submit_files(todo: list[Source], ids: dict[Source, int], pool: Engine | None, opts: IngestOptions,
                 piece_bytes: int, store: ParquetStore | MemoryStore) -> Futures:
    """Submit the files that go to one job each, before any is awaited: every small trace
    (kind ``file``) and, with an engine that has ``file_tasks`` and at least ``slots`` large
    traces to write, every large one (kind ``pieces``); the others are cut by the driver.
    With an engine that ``reads_urls``, every trace in object storage goes to one ``url`` job,
    which reads the object itself (nothing of it is read on the driver but its head); else a trace
    streamed from object storage (:attr:`~trace_report.inputs.Source.location`) is read by the
    driver, its pieces decoded by the workers (a forked worker does not open object storage).
    Returns each submitted source's output path (None: the job names its pieces) and future."""
    if pool is None:
        return {}
    traces = [s for s in todo if s.kind is InputKind.trace]
    futures = _submit_urls([s for s in traces if s.staged is not None], ids, pool, opts, piece_bytes, store)
    traces = [s for s in traces if s not in futures and not is_url(s.location)]  # streamed by the driver
    whole_bytes = (opts.piece_bytes or PIECE_BYTES) * (WHOLE_FILE_PIECES if len(todo) > 1 else 1)
    small = [s for s in traces if source_decoded_size(s) < whole_bytes]
    large = [s for s in traces if s not in small]
    whole = (pool.file_tasks and isinstance(store, ParquetStore) and len(large) >= pool.slots)
    for s in small:
        out = store.path_for(ids[s], 0) if isinstance(store, ParquetStore) else None
        job = Job("file", ids[s], 0, s.label, path=s.path, out=out, max_ratio=opts.max_ratio,
                  piece_bytes=piece_bytes)
        futures[s] = (job.out, pool.submit(run_job, job))
    for s in large if whole else []:
        assert isinstance(store, ParquetStore)
        job = Job("pieces", ids[s], 0, s.label, path=s.path, max_ratio=opts.max_ratio,
                  store=store.sibling(), piece_bytes=piece_bytes)
        futures[s] = (None, pool.submit(run_job, job))
    return futures


def _submit_urls(objects: list[Source], ids: dict[Source, int], pool: Engine, opts: IngestOptions,
                 piece_bytes: int, store: ParquetStore | MemoryStore) -> Futures:
    """One ``url`` job per object, where the engine's tasks read object storage themselves."""
    if not getattr(pool, "reads_urls", False) or not isinstance(store, ParquetStore):
        return {}
    futures: Futures = {}
    for s in objects:
        assert s.staged is not None
        job = Job("url", ids[s], 0, s.label, url=s.staged.url, identity=s.identity, max_ratio=opts.max_ratio,
                  store=store.sibling(), piece_bytes=piece_bytes)
        futures[s] = (None, pool.submit(run_job, job))
    return futures


Decoded = tuple[TraceEnvelope, list[tuple[Job, JobResult]]]
"""What :func:`~trace_report.ingest.decoding.decode_file` returns."""


@dataclass
class Prestart:
    """Decoding submitted before a new database is opened, so that importing DuckDB, its
    connection and schema overlap it: ``pool`` runs the jobs, ``ids`` are the trace ids they
    write under (1..N: a new database skips nothing), ``futures`` as :func:`submit_files`
    returns them, and ``driven``: the first trace cut into pieces, decoded by ``driver`` (a
    thread running :func:`~trace_report.ingest.decoding.decode_file` on ``pool``) into
    ``decoded``."""

    pool: Engine
    ids: dict[Source, int]
    futures: Futures
    driven: Source | None = None
    decoded: Future[Decoded] = field(default_factory=Future)
    driver: threading.Thread | None = None

    def stop(self) -> None:
        """Cancel what has not started, and wait for what has (nothing writes afterwards)."""
        self.pool.shutdown(cancel_futures=True)  # the driver's next submit fails: it returns
        if self.driver is not None:
            self.driver.join()


def prestart(found: Resolution, store: ParquetStore, options: IngestOptions | None) -> Prestart | None:
    """The jobs of an ingest into a new database, submitted at once (None where the ingest
    decodes in the calling thread, or has an input other than traces): the whole-file jobs,
    and the first trace that is cut into pieces, driven from a thread of its own."""
    opts = options or IngestOptions()
    sources = found.sources
    if not sources or any(s.kind is not InputKind.trace for s in sources):
        return None
    total = sum(source_decoded_size(s) for s in sources)
    piece_bytes = opts.piece_bytes or piece_bytes_for(total)
    pool = local_engine_for(total, opts, len(sources), piece_bytes)
    if pool is None:
        return None
    ids = {s: i for i, s in enumerate(sources, 1)}
    try:
        early = Prestart(pool, ids, submit_files(sources, ids, pool, opts, piece_bytes, store))
        early.driven = next((s for s in sources if s not in early.futures), None)
        if early.driven is not None:
            total_on_disk = sum(stored_size(s) for s in sources)
            early.driver = _drive(early, early.driven, store, opts, piece_bytes,
                                  total_on_disk if early.driven is sources[0] else None)
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise
    return early


def _drive(early: Prestart, src: Source, store: ParquetStore, opts: IngestOptions, piece_bytes: int,
           total: int | None) -> threading.Thread:
    """Start the thread that decodes ``src`` (cut into pieces) on ``early.pool``; its outcome,
    or its exception, goes to ``early.decoded``. With ``total`` (the bytes of all the traces on
    disk; given when ``src`` is the first of them) it reports progress as the main thread would."""
    progress = opts.progress
    on_piece = (lambda pos: progress(pos, total)) if progress is not None and total is not None else None

    def run() -> None:
        try:
            result = decode_file(src.location, src.label, early.ids[src], piece_bytes=piece_bytes, pool=early.pool,
                                 store=store, on_piece=on_piece, max_ratio=opts.max_ratio)
        except BaseException as exc:  # handed to the main thread, which raises it
            early.decoded.set_exception(exc)
        else:
            early.decoded.set_result(result)

    thread = threading.Thread(target=run, name="trace-report-driver", daemon=True)
    thread.start()
    return thread


@dataclass
class Started:
    """An ingest begun by :func:`begin_ingest`: the database file (symbolic links followed), the
    resolved inputs, where the pieces go, the early jobs (None: none) and the notes so far."""

    db_path: Path
    found: Resolution
    store: ParquetStore
    early: Prestart | None
    notes: list[str]


@contextmanager
def begin_ingest(paths: Sequence[Location], db_path: Path, clean_leftovers: Callable[[Path], list[str]],
                 options: IngestOptions | None = None, engine: Engine | None = None) -> Iterator[Started]:
    """Resolve ``paths`` (local paths, or URLs: :func:`trace_report.storage.location`), hold the
    database's lock, remove what a killed writer left
    (``clean_leftovers``: :func:`trace_report.store.database.clean_leftovers`, which reads an
    existing database's ``event_files`` with DuckDB; called only where there may be leftovers,
    :func:`~trace_report.store.layout.may_have_leftovers`) and, into a new database decoded on
    this machine (``engine`` None), submit the jobs (:func:`prestart`). With pieces in object
    storage (``options.pieces``, or a database that records a prefix) the prefix is checked and
    cleaned first (:func:`~trace_report.store.remote_pieces.prepare`).

    On leaving, the pieces are committed; on an exception (or interrupt) the early jobs are
    stopped and every piece this ingest wrote is removed before it propagates. Raises
    :class:`~trace_report.errors.InputError` for unusable inputs and
    :class:`~trace_report.errors.DatabaseError` for a database locked by another writer.
    """
    db_path = database_path(db_path)
    limit = (options or IngestOptions()).max_ratio  # --max-ratio covers archive members too
    with resolve([location(p) for p in paths], allow_database=False, max_ratio=limit) as found, \
            database_lock(db_path, "writing"):
        notes = clean_leftovers(db_path) if may_have_leftovers(db_path) else []
        plan = prepare_pieces(db_path, (options or IngestOptions()).pieces)
        notes += plan.notes
        store = ParquetStore(db_path, plan.folder, plan.pieces_id)
        early = prestart(found, store, options) if engine is None and not db_path.exists() else None
        try:
            yield Started(db_path, found, store, early, notes)
        except BaseException:
            if early is not None:  # its jobs stop writing before their files are removed
                early.stop()
            store.rollback()
            raise
        store.commit()
