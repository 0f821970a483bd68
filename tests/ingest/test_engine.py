"""Decoding engines on this machine: threads (the compiled scanner releases the GIL) and, where
the scanner is missing, forked processes; both write the rows of the serial ingest."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import events_of, load_json, trace_file

from trace_report.errors import DatabaseError
from trace_report.formats import kineto
from trace_report.ingest import engine as engine_mod
from trace_report.ingest import pipeline, start
from trace_report.ingest.engine import LocalEngine, ThreadEngine, local_engine
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

Q = ("SELECT count(*), sum(dur_us), sum(ts_us), count(DISTINCT name), sum(correlation), "
     "count(*) FILTER (WHERE cat = 'kernel') FROM events")


def _rows(db: Path) -> tuple:
    import duckdb

    from trace_report.store.events_view import create_events_view_from_files, events_dir_for

    con = duckdb.connect(str(db), read_only=True)
    try:
        create_events_view_from_files(con, events_dir_for(db))
        return con.execute(Q).fetchone()
    finally:
        con.close()


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_each_engine_writes_the_rows_of_the_serial_ingest(engine: str, tmp_path: Path) -> None:
    path = trace_file("hta_a100_ddp_nccl")
    plain = tmp_path / "plain.json"  # byte ranges read by the jobs themselves
    plain.write_bytes(gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes())
    events = [e for e in events_of(load_json(path)) if e.get("ph") == "X"]
    opts = IngestOptions(workers=2, piece_bytes=64 << 10)
    ingest_to_database([plain], tmp_path / "serial.duckdb", IngestOptions(workers=1, piece_bytes=64 << 10))
    reference = _rows(tmp_path / "serial.duckdb")
    # independently: the JSON's complete events and kernels
    assert reference[0] >= len(events)
    assert reference[5] == sum(1 for e in events if e.get("cat") == "kernel")
    for src in (plain, path):  # plain: ranges; gz: pieces inflated by this process
        db = tmp_path / f"{engine}-{src.name}.duckdb"
        pool = ThreadEngine(2) if engine == "threads" else LocalEngine(2)  # shut down by the ingest
        ingest_to_database([src], db, opts, engine=pool)
        assert _rows(db) == pytest.approx(reference)


def test_threads_for_few_workers_where_the_scanner_is_installed_else_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert local_engine(1) is None  # one worker: the calling thread decodes
    pool = local_engine(2)
    try:
        assert isinstance(pool, ThreadEngine if kineto.has_compiled_scanner() else LocalEngine)
        assert pool.slots == 2
    finally:
        if pool is not None:
            pool.shutdown()
    many = engine_mod.THREADS_UP_TO + 1  # threads stop gaining on many cores: processes there, on Linux
    for platform, kind in (("linux", LocalEngine), ("darwin", ThreadEngine), ("win32", ThreadEngine)):
        pool = local_engine(many, platform)
        try:
            assert type(pool) is (kind if kineto.has_compiled_scanner() else LocalEngine), platform
            assert pool.slots == many and pool.inflight == many + 2
        finally:
            pool.shutdown()
    monkeypatch.setattr(engine_mod, "has_compiled_scanner", lambda: False)
    pool = local_engine(2)
    try:
        assert isinstance(pool, LocalEngine)
    finally:
        pool.shutdown()


def test_the_scan_runs_without_the_gil() -> None:
    """While one thread scans a large piece, the main thread runs Python code: it could not in
    the middle of the scan if the scanner held the GIL (a C call never yields it)."""
    import threading
    import time

    if not kineto.has_compiled_scanner():
        pytest.skip("the compiled scanner is not installed")
    events = events_of(load_json(trace_file("hta_a100_ddp_nccl")))
    piece = json.dumps(events * max(1, 300_000 // max(len(events), 1))).encode()
    span: list[float] = []

    def scan() -> None:
        span.append(time.perf_counter())
        assert kineto._scan.scan_events(piece, b"cpu_instant_event") is not None
        span.append(time.perf_counter())

    worker = threading.Thread(target=scan)
    stamps = []
    worker.start()
    while worker.is_alive():
        stamps.append(time.perf_counter())
        time.sleep(0.0005)
    worker.join()
    start, end = span
    assert end - start > 0.02, "the piece scans too fast to tell: make it larger"
    middle = [t for t in stamps if start + 0.3 * (end - start) < t < start + 0.7 * (end - start)]
    assert middle, f"the main thread never ran during the {end - start:.3f} s scan"


# ------------------------------------------------------------------ jobs submitted before the database opens

CAPTURES = sorted((Path(__file__).resolve().parents[2] / "traces").glob("h100-2026-11-25/*/*.pt.trace.json.gz"))


def _decode_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("trace-report-decode")]


def _spy_on_the_start(monkeypatch: pytest.MonkeyPatch, what_started: Callable[[start.Prestart], object],
                      at_connect: Callable[[], str]) -> list[str]:
    """Decoding threads for any input; the order of ``prestart`` (and ``what_started`` of its
    outcome) and the database's connection (with ``at_connect()``), as it happens."""
    order: list[str] = []
    real_prestart, real_atomic = start.prestart, pipeline.atomic_database

    def spy_prestart(*args, **kwargs):
        early = real_prestart(*args, **kwargs)
        order.append(f"prestart {what_started(early) if early else None}")
        return early

    @contextlib.contextmanager
    def spy_atomic(path):
        order.append(f"connect {at_connect()}")
        with real_atomic(path) as con:
            yield con

    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(start, "prestart", spy_prestart)
    monkeypatch.setattr(pipeline, "atomic_database", spy_atomic)
    return order


def test_a_new_database_gets_its_jobs_before_duckdb_opens_and_the_same_rows(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert len(CAPTURES) == 4
    reference = tmp_path / "serial.duckdb"
    ingest_to_database(CAPTURES, reference, IngestOptions(workers=1))
    order = _spy_on_the_start(monkeypatch, lambda early: len(early.futures), lambda: "")
    early = tmp_path / "early.duckdb"
    summary = ingest_to_database(CAPTURES, early, IngestOptions(workers=2))
    assert order == ["prestart 4", "connect "]
    assert [t for t, _ in summary.ingested] == [1, 2, 3, 4]
    assert _rows(early) == pytest.approx(_rows(reference))
    order.clear()  # into an existing database nothing is submitted before it opens
    ingest_to_database(CAPTURES, early, IngestOptions(workers=2))
    assert order == ["connect "]


def _driver_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trace-report-driver"]


def test_a_single_trace_is_cut_and_decoded_from_a_thread_before_duckdb_opens(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One trace cut into pieces: its pieces are submitted by a driver thread that starts before
    the database opens (``trace-report ingest`` imports DuckDB meanwhile), with the serial rows."""
    trace, opts = CAPTURES[0], {"piece_bytes": 64_000}
    reference = tmp_path / "serial.duckdb"
    ingest_to_database([trace], reference, IngestOptions(workers=1, **opts))
    order = _spy_on_the_start(monkeypatch, lambda early: early.driven and early.driven.label,
                              lambda: str(len(_driver_threads())))
    early = tmp_path / "early.duckdb"
    summary = ingest_to_database([trace], early, IngestOptions(workers=2, **opts))
    assert order[0] == f"prestart {trace}" and order[1] in ("connect 0", "connect 1")
    assert summary.ingested == [(1, str(trace))] and not _driver_threads()
    assert _rows(early) == pytest.approx(_rows(reference))
    with duckdb_connect(early) as con:
        (pieces,) = con.execute("SELECT count(*) FROM event_files").fetchone()
    assert pieces > 3  # cut into pieces, not one whole-file job


@contextlib.contextmanager
def duckdb_connect(db: Path):
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        yield con
    finally:
        con.close()


@pytest.mark.parametrize("inputs", ["four traces", "one trace cut into pieces"])
@pytest.mark.parametrize("failure", [DatabaseError("the database cannot be created"), KeyboardInterrupt()])
def test_a_failed_open_stops_the_early_jobs_and_removes_their_files(
        failure: BaseException, inputs: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_prestart = start.prestart
    started: list[start.Prestart] = []

    def spy_prestart(*args, **kwargs):
        early = real_prestart(*args, **kwargs)
        started.append(early)
        return early

    @contextlib.contextmanager
    def failing_atomic(path):
        raise failure
        yield  # pragma: no cover

    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(start, "prestart", spy_prestart)
    monkeypatch.setattr(pipeline, "atomic_database", failing_atomic)
    db = tmp_path / "new.duckdb"
    paths, opts = (CAPTURES, {}) if inputs == "four traces" else (CAPTURES[:1], {"piece_bytes": 64_000})
    with pytest.raises(type(failure)):
        ingest_to_database(paths, db, IngestOptions(workers=2, **opts))
    assert started and started[0] is not None  # jobs had been submitted
    assert (started[0].driven is None) == (inputs == "four traces")
    assert all(f.done() for _, f in started[0].futures.values())
    assert not _decode_threads() and not _driver_threads()
    assert not db.exists() and not list(tmp_path.rglob("*.parquet"))


def test_every_worker_gets_a_piece_of_one_large_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Pieces are accepted in order; with a fixed 4 in flight, 12 of 16 workers sat idle on a single
    large file (docs/benchmarks.md, "Worker count"). Each of the first 8 jobs waits until all 8 run
    at once: with fewer submitted, the barrier breaks."""
    from trace_report.ingest import decoding

    path = trace_file("hta_a100_ddp_nccl")
    plain = tmp_path / "plain.json"  # byte ranges: no stream look-ahead in the way
    plain.write_bytes(gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes())
    workers = 8
    barrier = threading.Barrier(workers, timeout=20)
    started = []
    lock = threading.Lock()
    real = decoding.run_job

    def run_job(job: decoding.Job) -> decoding.JobResult:
        with lock:
            started.append(job.piece)
            first = len(started) <= workers
        if first:
            barrier.wait()  # BrokenBarrierError (the job's error) unless 8 jobs run at once
        return real(job)

    monkeypatch.setattr(decoding, "run_job", run_job)
    pool = ThreadEngine(workers)
    try:
        assert pool.inflight >= workers + 1
        _, results = decoding.decode_file(plain, "plain.json", 1, piece_bytes=256 << 10, pool=pool)
    finally:
        pool.shutdown()
    assert len(started) > workers and not barrier.broken
    assert sum(r.table.num_rows for _, r in results if r.table is not None) > 0


def test_default_workers_are_the_usable_cpus_and_no_more_than_the_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start, "available_cpus", lambda: 64)
    mib8 = 8 << 20
    assert start.default_workers(200_000_000, 1, mib8) == 24  # 200 MB in 8 MiB pieces: 24 jobs
    assert start.default_workers(2_000_000_000, 1, mib8) == 64
    assert start.default_workers(30_000_000, 16, 4 << 20) == 16  # 16 files, each a job
    monkeypatch.setattr(start, "available_cpus", lambda: 2)
    assert start.default_workers(2_000_000_000, 1, mib8) == 2


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU sets: Linux")
def test_usable_cpus_follow_the_cpu_set_not_the_machine() -> None:
    """A container's or taskset's CPU set bounds the decoding workers, not os.cpu_count()."""
    import subprocess
    import sys

    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from trace_report.sysutil import available_cpus; print(available_cpus(), os.cpu_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "1" and int(out[1]) >= 1
