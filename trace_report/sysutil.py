"""Process-level settings: allocator and garbage-collector tuning for the command line (never
applied when used as a library) and tying decoding workers to their parent."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


def tune_allocator(mmap_threshold: int = 256 << 20, trim_threshold: int = 512 << 20, arenas: int = 2) -> bool:
    """Keep glibc from mapping and unmapping every large buffer (pieces of several MB), and the
    decoding threads on one heap beside the main thread's.

    By default glibc serves allocations over 128 KiB (growing adaptively) with ``mmap`` and
    returns them with ``munmap``, so every piece's buffers are page-faulted in again: half the
    system time of a large ingest. Raising ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD``
    (``mallopt(3)``) lets the heap reuse them. ``M_ARENA_MAX`` = ``arenas``: by default each
    thread that allocates gets a heap (arena) of its own, each kept at its own peak; with two,
    the decoding threads share one (a lower peak RSS of an ingest on 2 cores at the same speed,
    docs/benchmarks.md; DuckDB allocates through its own jemalloc, untouched).
    Must run before the threads first allocate.
    Forked decoding workers inherit the settings. Returns False where there is no glibc (macOS,
    musl): nothing changes there.
    """
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    settings = ((M_MMAP_THRESHOLD, mmap_threshold), (M_TRIM_THRESHOLD, trim_threshold), (M_ARENA_MAX, arenas))
    return all([bool(mallopt(option, value)) for option, value in settings])  # each applied, whatever the others did


GC_YOUNG_THRESHOLD = 100_000
"""Allocations of container objects between two collections of Python's youngest generation
(CPython's default: 700)."""


def tune_gc(young: int = GC_YOUNG_THRESHOLD) -> None:
    """Let Python's cyclic garbage collector run less often in a command's process
    (``gc.set_threshold(young, 10, 10)``).

    A command's start imports DuckDB, pandas, pyarrow, typer and ours: some 100k-200k container
    objects (modules, classes, functions) that all live until the process ends. With the default
    threshold each is walked by a young collection, then again by the middle generation's, and the
    whole heap by a full collection or two, which every command pays (the gc callbacks' own
    timing; docs/benchmarks.md). With 100,000, set before those imports
    (:mod:`trace_report.cli.entry`), most of those walks are gone. Cycles are still
    collected, in larger batches (reference counting frees everything else at once); the middle
    and oldest generations keep their default ratios, so a long ingest still collects them.
    Analyses that build millions of objects pause the collector themselves
    (:func:`trace_report.analyses.critical_path.gc_paused`)."""
    gc.set_threshold(young, 10, 10)


def _libc(use_errno: bool = False) -> ctypes.CDLL | None:
    """The C library on Linux (glibc's functions are looked up on it), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:  # glibc's soname first: find_library runs ldconfig in a child process at every start
        return ctypes.CDLL("libc.so.6", use_errno=use_errno)
    except OSError:
        pass
    from ctypes.util import find_library  # here: it imports tempfile, random and subprocess

    name = find_library("c")
    try:
        return ctypes.CDLL(name, use_errno=use_errno) if name else None
    except OSError:
        return None


def trim_heap() -> bool:
    """Hand the C heap's free memory back to the system (``malloc_trim(3)``): what a long
    ingest's decoding threads freed, kept by :func:`tune_allocator`'s thresholds, before the
    same process goes on to other work (the breakdown it keeps, ~0.1-0.2 GB on a 5 GB trace).
    Returns False where there is no glibc."""
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    return bool(malloc_trim(0)) if malloc_trim is not None else False


class _HidePandas:
    """A ``sys.meta_path`` finder under which ``import pandas`` fails (:func:`skip_pandas_probe`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("hidden while pyarrow probes for pandas", name=name)


def skip_pandas_probe() -> bool:
    """Keep pyarrow from importing pandas on its first ``pa.array`` of a Python list.

    ``pa.array(values)`` asks whether ``values`` is a pandas object, and the first time it asks
    it imports pandas (time and tens of MB of RSS in every process that decodes a piece; the
    decoding never holds a pandas object); so does the first inference of a value's type
    (``pc.equal(column, "kernel")``). This makes both first probes with pandas hidden, so pyarrow
    records "no pandas" for them. pyarrow's explicit pandas paths
    (``Table.from_pandas``, ``to_pandas``) still import it when called, and then ``pa.array`` of a
    pandas object is recognised again; before that it would be read as a plain sequence, so this
    is for processes that hold no pandas objects: decoding workers and the ``ingest`` command
    (never applied when trace_report is used as a library). Returns False when pandas is
    already imported (nothing to save).
    """
    if "pandas" in sys.modules:
        return False
    import pyarrow as pa

    finder = _HidePandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([], pa.int64())  # the pa.array check (Cython: pyarrow's pandas shim)
        pa.array([0.0])  # type inference (C++: pyarrow's pandas static data, e.g. pd.NA)
    finally:
        sys.meta_path.remove(finder)
    return True


def one_blas_thread() -> None:
    """Ask numpy's OpenBLAS for one thread, unless the user chose a number (``OPENBLAS_NUM_THREADS``).

    OpenBLAS starts a thread per core when numpy is imported, and they spin, taking CPU that
    the decoding workers need. The ingest does no linear algebra. Takes
    effect only before numpy is first imported."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def system_arrow_allocator() -> None:
    """Have Arrow allocate with the C library's malloc, unless the user chose a memory pool
    (``ARROW_DEFAULT_MEMORY_POOL``).

    Arrow's default pool, mimalloc, maps fresh (transparent huge) pages for each decoded piece,
    and the kernel zeroes every one of them: 15% of the CPU of an ingest of an event-dense
    trace went to ``clear_page_erms`` (perf). glibc malloc, tuned by :func:`tune_allocator`,
    reuses its heap: ~60 MB less peak memory and a little less CPU on the shapes benchmark.
    Takes effect only before pyarrow is first imported."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def decoding_settings() -> None:
    """What an ingest sets before numpy and pyarrow load: one OpenBLAS thread
    (:func:`one_blas_thread`) and Arrow on malloc (:func:`system_arrow_allocator`). The command and
    the benchmarks that stand in for it (``profile_ingest.py``, ``engines.py``) call this one function,
    so that they measure the same process: the profiler once loaded both first, and on 16 cores 15
    spinning OpenBLAS threads put 2.3 CPU-s into its start-up."""
    one_blas_thread()
    system_arrow_allocator()


def available_cpus() -> int:
    """CPUs this process may run on: its CPU set (``os.sched_getaffinity``: a container's or
    ``taskset``'s, not the whole machine's), or ``os.cpu_count()`` where there is none (macOS,
    Windows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """In a worker process: ask the kernel to SIGKILL this process when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``, Linux), ignore Ctrl-C (the parent handles it and shuts the
    workers down), and exit at once if the parent is already gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    prctl = getattr(_libc(use_errno=True), "prctl", None)
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)
