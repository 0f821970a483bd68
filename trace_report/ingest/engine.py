"""Where decoding jobs run: the engine seam of the ingest pipeline (``docs/architecture.md``).

The pipeline (:mod:`trace_report.ingest.pipeline`) cuts sources into typed jobs (a whole small
file, a byte range or a piece of a large file) and hands each one to an *engine* with
``submit(run_job, job)``; it reads the outcome with ``future.result()``. Everything around the
jobs (dedup and changed-file rules, the ``traces`` rows, the catalog of Parquet pieces, the
atomic replacement of the database under its lock) stays on the calling process, the *driver*,
whatever the engine.

- :class:`ThreadEngine`: decoding threads in this process, for up to :data:`THREADS_UP_TO`
  workers (2 cores, the common laptop and CI case). The compiled scanner (``formats/_scan.pyx``)
  reads a piece without the GIL, and inflating, Arrow compute and Parquet writing release it
  too, so two threads decode about as fast as two processes while the libraries (~100 MB of
  pyarrow, numpy and DuckDB) are mapped once, not once per worker.
- :class:`LocalEngine`: forked worker processes, for more workers on Linux, and wherever the
  compiled scanner is missing (msgspec, which then decodes everything, holds the GIL). What still holds
  the GIL per piece (Arrow arrays, normalising, the Python around each piece) caps the speed-up
  of threads on many cores, whatever their number (:data:`THREADS_UP_TO`).
- ``RayEngine`` (:mod:`trace_report.ingest.engine_ray`, optional extra ``[ray]``): the same
  jobs as Ray tasks on a cluster; every task writes its Parquet piece itself, so the pieces
  folder must be on a filesystem the workers share with the driver.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol

from trace_report.formats.kineto import has_compiled_scanner
from trace_report.store.layout import close_inherited_locks
from trace_report.sysutil import die_with_parent, skip_pandas_probe

INFLIGHT = 4
"""Fewest pieces of one file submitted to the local workers and not yet accepted (a local engine
keeps :func:`inflight_for` its workers): with the stream's own look-ahead, a streamed (gzip) file
holds about ``inflight + 3`` pieces of decoded bytes at once."""


def inflight_for(workers: int) -> int:
    """Pieces of one file in flight for ``workers`` decoding workers: one running on each worker and
    two waiting, at least :data:`INFLIGHT`. Pieces are accepted in order, so each waiting one lets a
    worker go on while the oldest piece is still running. A fixed 4 left all but 4 of 16 workers idle
    (docs/benchmarks.md, "Worker count")."""
    return max(INFLIGHT, workers + 2)


class JobFuture(Protocol):
    """What ``submit`` returns: ``result()`` waits for the job's outcome (a ``JobResult``)."""

    def result(self) -> Any: ...


class Engine(Protocol):
    """An executor of decoding jobs.

    ``slots``: jobs that run at once; ``inflight``: pieces of one file submitted and not yet
    accepted; ``file_tasks``: whether a large file may go to one job whole (its pieces decoded
    and written by that job) when there are at least ``slots`` large files, so that the driver
    never streams them. An engine with a true ``reads_urls`` attribute (optional) has each trace in
    object storage read by its job from the URL (:mod:`trace_report.ingest.decoding`, kind ``url``).
    """

    slots: int
    inflight: int
    file_tasks: bool

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> JobFuture: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


def _worker_init(parent_pid: int) -> None:
    """Each decoding worker dies with its parent (even after ``kill -9``), leaves Ctrl-C to the
    parent, drops the database lock descriptor it inherited through ``fork``, and never
    imports pandas (:func:`~trace_report.sysutil.skip_pandas_probe`)."""
    close_inherited_locks()
    die_with_parent(parent_pid)
    skip_pandas_probe()


class LocalEngine(ProcessPoolExecutor):
    """``workers`` forked decoding processes on this machine: more than :data:`THREADS_UP_TO`
    workers, or no compiled scanner (see :func:`local_engine`)."""

    file_tasks = False

    def __init__(self, workers: int) -> None:
        super().__init__(workers, mp_context=multiprocessing.get_context("fork"),
                         initializer=_worker_init, initargs=(os.getpid(),))
        self.slots = workers
        self.inflight = inflight_for(workers)


class ThreadEngine(ThreadPoolExecutor):
    """``workers`` decoding threads in this process (up to :data:`THREADS_UP_TO`, see :func:`local_engine`).

    Measured on the shapes benchmark (docs/benchmarks.md, 2 cores): as fast as two forked
    workers or faster (the gzip rows: no pieces sent between processes) at 0.6-0.7 of their
    summed memory. Jobs are the same :class:`~trace_report.ingest.decoding.Job` objects, not
    pickled. A job that holds the GIL (a piece the scanner declines, decoded by msgspec) runs
    while the others wait, so such traces decode at one thread's speed.
    """

    file_tasks = False

    def __init__(self, workers: int) -> None:
        super().__init__(workers, thread_name_prefix="trace-report-decode")
        self.slots = workers
        self.inflight = inflight_for(workers)


THREADS_UP_TO = 3
"""Most workers that decode as threads (with the compiled scanner); more decode as forked processes.

On 2 cores, 2 threads beat 2 processes at two thirds of the memory; on many cores processes beat
threads from 4 workers on, and threads stop gaining past 8 while processes go on, at about three
times the memory (docs/benchmarks.md, "Worker count"; ``benchmarks/engines.py``)."""


def local_engine(workers: int, platform: str = sys.platform) -> ThreadEngine | LocalEngine | None:
    """Decoding on this machine: a :class:`ThreadEngine` of ``workers`` threads up to
    :data:`THREADS_UP_TO` workers, else (and wherever the compiled scanner is missing) a
    :class:`LocalEngine` of forked processes; None (decode in the calling thread) for one worker.

    More workers go to processes on Linux only: elsewhere they stay threads, as before. macOS
    makes ``fork`` unsafe once system frameworks have started threads (Python's default there is
    ``spawn`` since 3.8, for this reason), and these processes are forked after numpy and pyarrow
    are loaded; Windows has no ``fork``."""
    if workers <= 1:
        return None
    if not has_compiled_scanner():
        return LocalEngine(workers)
    many = workers > THREADS_UP_TO and platform.startswith("linux")
    return LocalEngine(workers) if many else ThreadEngine(workers)
