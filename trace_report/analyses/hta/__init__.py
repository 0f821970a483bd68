"""Holistic Trace Analysis (HTA, PyPI ``traceinsight``, imported as ``hta``) where it is strong.

Three HTA analyses, with our column names (units in the names, docs/architecture.md, Conventions):

- :func:`hta_temporal`: ``TraceAnalysis.get_temporal_breakdown`` per rank. HTA's
  ``kernel_time(us)`` is the span from the first GPU op's start to the last one's end, so it is
  called ``span_us`` here; ``idle_us`` = span - union of GPU ops (kernels, memcpy, memset);
  ``compute_us`` = union of computation kernels; ``non_compute_us`` = the rest (communication,
  memory). HTA rounds float (ns-resolution) timestamps: start up, end down, to integer µs.
- :func:`hta_idle`: ``get_idle_time_breakdown`` per rank and stream: ``host_wait`` (the CPU did
  not enqueue work), ``kernel_wait`` (gaps between back-to-back kernels) and ``other``.
- :func:`hta_launch_stats`: ``get_cuda_kernel_launch_stats`` per rank, summarised (or per launch):
  CPU launch duration, GPU duration and launch delay by ``correlation``.

HTA reads trace files from a directory, one file per rank; the paths given (files, directories
of ranks, tar archives, or a database whose source files still exist) are linked into a
temporary directory. HTA opens local files only: traces in object storage (``s3://`` ... URLs,
or a database ingested from them) are copied into that directory, which is removed afterwards.
Ranks come from the trace's ``distributedInfo.rank``, else the file name (``rank-3``,
``worker3``), else 0. HTA's own failures on unsuitable traces (CPU-only, no kernels, a missing
rank, a trace HTA's parser trips on) become :class:`~trace_report.errors.InputError` with HTA's message on one line.

HTA's own output is contained (:func:`_quiet`): its progress prints, its log lines and the
pandas warnings it triggers (7 Pandas4Warnings on the MI250 trace of ../shared) never reach the caller's terminal unless
``HtaOptions.show_hta_output`` (the CLI's ``--debug``) asks for them. HTA parses several ranks in
a ``fork`` pool and ends it with SIGTERM: its workers get the default SIGTERM and ignore SIGINT
(:func:`_pool_worker_signals`), so that a handler the parent installed (the CLI's, which turns
SIGTERM into an exception) does not print a traceback from each worker.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import traceback
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import pandas as pd

from trace_report import storage
from trace_report.errors import InputError, UsageError
from trace_report.formats.kineto import is_gzip, open_stream
from trace_report.formats.kineto_metadata import rank_from_name
from trace_report.inputs import InputKind, Source, resolve
from trace_report.storage import Location, is_url, location
from trace_report.store.database import connect_existing

TEMPORAL_COLUMNS = ["rank", "idle_us", "compute_us", "non_compute_us", "span_us", "idle_pct", "compute_pct",
                    "non_compute_pct"]
IDLE_COLUMNS = ["rank", "stream", "idle_category", "idle_us", "idle_ratio"]
LAUNCH_SUMMARY_COLUMNS = ["rank", "launches", "gpu_shorter_than_launch", "gpu_shorter_pct", "runtime_outliers",
                          "launch_delay_outliers", "median_cpu_us", "median_gpu_us", "median_launch_delay_us"]
LAUNCH_COLUMNS = ["rank", "correlation", "cpu_us", "gpu_us", "launch_delay_us"]
HTA_LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "mtiaLaunchKernel")
"""The launch calls HTA's launch statistics pair with GPU ops by ``correlation``
(``hta/analyzers/cuda_kernel_analysis.py``, ``cuda_kernel_launch_stats``, HTA 0.6.1); ROCm's
``hipLaunchKernel`` / ``hipExtModuleLaunchKernel`` and Triton's ``cuLaunchKernel`` are not among
them, so ROCm and Triton-only traces get no launch rows."""
NO_LAUNCHES_NOTE = ("HTA paired no launch call with a GPU op: its launch statistics know only "
                    f"{', '.join(HTA_LAUNCH_CALLS)} (not ROCm's hipLaunchKernel or hipExtModuleLaunchKernel, "
                    "nor Triton's cuLaunchKernel); trace-report launches --all-launches counts those too")
"""What the ``hta launch`` command says when :func:`hta_launch_stats` has no rows."""
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
_SCAN_BYTES = 1 << 20


@dataclass(frozen=True)
class HtaOptions:
    """``ranks``: analyse only these (empty = every rank found); ``include_last_step``: keep the
    last ProfilerStep's kernels (HTA drops them by default); ``runtime_cutoff_us`` and
    ``launch_delay_cutoff_us``: HTA's outlier thresholds for launch statistics (defaults 50, 100);
    ``show_hta_output``: let HTA's prints, log lines and warnings through (else they are dropped)."""

    ranks: tuple[int, ...] = ()
    include_last_step: bool = False
    runtime_cutoff_us: float = 50.0
    launch_delay_cutoff_us: float = 100.0
    show_hta_output: bool = False


def trace_rank(path: Path) -> int | None:
    """``distributedInfo.rank`` of a trace file (scanning its text), or None."""
    tail = b""
    with open_stream(path) as fh:
        while chunk := fh.read(_SCAN_BYTES):
            buf = tail + chunk
            m = _RANK.search(buf)
            if m:
                return int(m.group(1))
            tail = buf[-4096:]
    return None


def _stored_paths(database: Path) -> list[Location]:
    """The trace files (or archives) a trace-report database was ingested from: local paths, or
    the URLs of objects (read again from there)."""
    con = connect_existing(database, read_only=True)
    try:
        stored = [row[0] for row in con.execute("SELECT path FROM traces ORDER BY trace_id").fetchall()]
    finally:
        con.close()
    out: list[Location] = []
    for label in stored:
        src = location(label.split("!", 1)[0])
        if not is_url(src) and not Path(src).exists():
            raise InputError(f"{database}: HTA needs the trace files, and {src} (ingested from) is gone")
        if src not in out:
            out.append(src)
    return out


def _trace_sources(paths: list[Location]) -> Iterator[Source]:
    """The Chrome/Kineto traces among ``paths`` (a database stands for the files it was read from)."""
    with resolve(paths, url_heads=False) as found:  # HTA reads each file by its name: objects copied whole
        if found.database is not None:
            yield from _trace_sources(_stored_paths(found.database))
            return
        if found.dataset is not None:
            raise InputError(f"{found.dataset}: HTA needs trace files, not an exported dataset")
        yield from (s for s in found.sources if s.kind is InputKind.trace)


@contextlib.contextmanager
def hta_trace_files(paths: Sequence[str | PathLike[str]]) -> Iterator[tuple[Path, dict[int, str]]]:
    """A temporary directory with the traces of ``paths`` linked in (those in object storage, or in
    an archive, copied), and HTA's ``{rank: file}``; the directory is removed on exit.

    Raises :class:`InputError` when two traces claim the same rank (HTA needs one per rank).
    """
    with tempfile.TemporaryDirectory(prefix="trace-report-hta-") as tmp:
        files: dict[int, str] = {}
        labels: dict[int, str] = {}
        for i, src in enumerate(_trace_sources([location(p) for p in paths])):
            rank = trace_rank(src.path)
            rank = rank if rank is not None else (rank_from_name(Path(src.label).name) or 0)
            if rank in files:
                raise InputError(f"{labels[rank]} and {src.label} are both rank {rank}: HTA needs one trace "
                                 "per rank (set distributedInfo.rank)")
            suffix = ".json.gz" if is_gzip(src.path) else ".json"
            link = Path(tmp) / f"rank-{rank}.{i}{suffix}"
            if src.staged is not None:  # an object's copy: its scratch folder goes with the resolution
                shutil.move(src.path, link)
            elif src.label != str(src.path):  # a tar member: its temporary file goes with the resolution
                storage.write_file(link, src.path)
            else:
                link.symlink_to(src.path.absolute())
            files[rank], labels[rank] = str(link), src.label
        if not files:
            raise InputError(f"{', '.join(map(str, paths))}: no Chrome/Kineto traces for HTA")
        yield Path(tmp), files


_HTA_FAILURES: tuple[type[BaseException], ...] = (
    ValueError, LookupError, TypeError, AttributeError, AssertionError, ArithmeticError, RuntimeError,
    EOFError, gzip.BadGzipFile, zlib.error)
"""What HTA (and pandas/numpy under it) raises on a trace it cannot handle: the TypeError of
``transform_correlation_to_index`` on tracelens_mi300_torch_compile_triton (HTA 0.6.1, pandas 3),
the ValueErrors and KeyErrors of traces without kernels, JSON and gzip errors of damaged files.
Not a bare ``Exception``: the CLI's SIGTERM exception and KeyboardInterrupt must pass."""
_MESSAGE_CHARS = 300
_hta_running = False
"""True while HTA runs in this process: forks made then are HTA's pool workers."""


def _pool_worker_signals() -> None:
    """In a process forked while HTA runs: the default SIGTERM (``Pool.terminate`` ends the
    workers with it; an inherited handler that raises would print a traceback from each) and
    SIGINT ignored (Ctrl-C is the parent's to handle; it then terminates the pool)."""
    if _hta_running:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@functools.cache
def _register_fork_hook() -> None:
    os.register_at_fork(after_in_child=_pool_worker_signals)


class _Collect(logging.Handler):
    """Keeps the messages of HTA's ERROR (and CRITICAL) log records, for the error line."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _quiet(show: bool = False) -> Iterator[list[str]]:
    """Run HTA inside: yields the list that collects HTA's error log messages.

    Unless ``show``: HTA's prints (stdout) are dropped, its log records go only to that list
    (HTA's logger may hold a handler on the real stdout, which would mix its lines into our
    tables), and every warning raised inside is dropped. Forked pool workers get default signals
    (:func:`_pool_worker_signals`) either way."""
    global _hta_running
    _register_fork_hook()
    log = logging.getLogger("hta")
    saved = (log.level, log.propagate, list(log.handlers))
    collect = _Collect()
    running = _hta_running
    _hta_running = True
    try:
        if show:
            log.addHandler(collect)
            yield collect.messages
            return
        log.handlers[:] = [collect]
        log.setLevel(logging.ERROR)
        log.propagate = False
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield collect.messages
    finally:
        _hta_running = running
        log.setLevel(saved[0])
        log.propagate = saved[1]
        log.handlers[:] = saved[2]


def _one_line(text: str) -> str:
    """``text`` on one line of at most :data:`_MESSAGE_CHARS` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _MESSAGE_CHARS else flat[:_MESSAGE_CHARS - 3] + "..."


def _hta_frame(exc: BaseException) -> str:
    """`` in hta/common/trace.py:127 (transform_correlation_to_index)``: the innermost frame of
    HTA's code (the files of the imported ``hta`` package) in ``exc``'s traceback, for a bug
    report; empty when HTA's code is not in it."""
    package = getattr(sys.modules.get("hta"), "__file__", None)
    if package is None:
        return ""
    root = Path(package).parent
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if path.is_relative_to(root):
            where = f" in hta/{path.relative_to(root).as_posix()}:{frame.lineno} ({frame.name})"
    return where


def _hta_failure(what: str, exc: BaseException, logged: Sequence[str]) -> InputError:
    """The one-line error for HTA's exception ``exc``: ``{what} ({type}: {HTA's message}) in
    {HTA's file:line}``, HTA's last error log line added when the exception says nothing."""
    message = str(exc).strip() or (logged[-1] if logged else "")
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return InputError(_one_line(f"{what} ({detail}){_hta_frame(exc)}"))


HTA_MISSING = ("HTA is not installed: the hta command needs the [hta] extra "
               "(pip install 'trace-report[hta]', or in a clone: pip install '.[hta]')")


def _analysis(tmp: Path, files: dict[int, str], opts: HtaOptions) -> tuple[Any, list[int]]:
    try:  # the [hta] extra: HTA pulls in jupyterlab, plotly and more, which nothing else needs
        from hta.trace_analysis import TraceAnalysis
    except ImportError as exc:
        raise UsageError(HTA_MISSING) from exc

    wanted = list(opts.ranks) or sorted(files)
    missing = [r for r in wanted if r not in files]
    if missing:
        raise UsageError(f"no trace of rank {', '.join(map(str, missing))} (ranks: "
                         f"{', '.join(map(str, sorted(files)))})")
    chosen = {r: files[r] for r in wanted}
    with _quiet(opts.show_hta_output) as logged:
        try:
            analysis = TraceAnalysis(trace_files=chosen, trace_dir=str(tmp),
                                     include_last_profiler_step=opts.include_last_step)
        except _HTA_FAILURES as exc:
            raise _hta_failure("HTA cannot read these traces", exc, logged) from exc
    no_gpu = [r for r in wanted if r not in analysis.t.traces or not (analysis.t.traces[r]["stream"] >= 0).any()]
    if no_gpu:
        raise InputError(f"rank {', '.join(map(str, no_gpu))}: no GPU kernels in the trace (CPU-only or GPU "
                         "activity missing); HTA's GPU analyses need kernels")
    return analysis, wanted


def _run(paths: Sequence[str | PathLike[str]], opts: HtaOptions, call: Any) -> Any:
    with hta_trace_files(paths) as (tmp, files):
        analysis, ranks = _analysis(tmp, files, opts)
        with _quiet(opts.show_hta_output) as logged:
            try:
                result = call(analysis, ranks)
            except _HTA_FAILURES as exc:
                raise _hta_failure("HTA failed on these traces", exc, logged) from exc
        if result is None:  # HTA logs an error and returns None on some inputs
            reason = f": {_one_line(logged[-1])}" if logged else ""
            raise InputError(f"HTA returned no result for these traces{reason}")
        return result


def hta_temporal(paths: Sequence[str | PathLike[str]], options: HtaOptions | None = None) -> pd.DataFrame:
    """HTA's temporal breakdown per rank (columns :data:`TEMPORAL_COLUMNS`, µs and percent)."""
    opts = options or HtaOptions()
    df = _run(paths, opts, lambda a, ranks: a.get_temporal_breakdown(visualize=False))
    df = df.rename(columns={"idle_time(us)": "idle_us", "compute_time(us)": "compute_us",
                            "non_compute_time(us)": "non_compute_us", "kernel_time(us)": "span_us",
                            "idle_time_pctg": "idle_pct", "compute_time_pctg": "compute_pct",
                            "non_compute_time_pctg": "non_compute_pct"})
    df = df[df["rank"].isin(opts.ranks)] if opts.ranks else df
    return df[TEMPORAL_COLUMNS].sort_values("rank").reset_index(drop=True)


def hta_idle(paths: Sequence[str | PathLike[str]], options: HtaOptions | None = None) -> pd.DataFrame:
    """HTA's idle-time breakdown per rank and stream (columns :data:`IDLE_COLUMNS`; ``idle_us`` in
    µs, ``idle_ratio`` the category's share of the stream's idle time)."""
    opts = options or HtaOptions()
    df, _ = _run(paths, opts, lambda a, ranks: a.get_idle_time_breakdown(ranks=ranks, visualize=False))
    df = df.rename(columns={"idle_time": "idle_us", "idle_time_ratio": "idle_ratio"})
    return df[IDLE_COLUMNS].sort_values(["rank", "stream", "idle_category"]).reset_index(drop=True)


def hta_launch_stats(paths: Sequence[str | PathLike[str]], options: HtaOptions | None = None, *,
                     per_launch: bool = False) -> pd.DataFrame:
    """HTA's kernel launch statistics: per rank summary (:data:`LAUNCH_SUMMARY_COLUMNS`), or one row
    per launch with ``per_launch`` (:data:`LAUNCH_COLUMNS`). ``gpu_shorter_than_launch``: GPU ops
    that ran shorter than the CPU call that launched them; outliers use the options' cutoffs (µs).
    No rows when no launch is one of :data:`HTA_LAUNCH_CALLS` (ROCm, Triton-only traces)."""
    opts = options or HtaOptions()
    stats = _run(paths, opts, lambda a, ranks: a.get_cuda_kernel_launch_stats(
        ranks=ranks, runtime_cutoff=int(opts.runtime_cutoff_us),
        launch_delay_cutoff=int(opts.launch_delay_cutoff_us), visualize=False))
    frames = []
    for rank, df in sorted(stats.items()):
        d = df.rename(columns={"cpu_duration": "cpu_us", "gpu_duration": "gpu_us", "launch_delay": "launch_delay_us"})
        d.insert(0, "rank", rank)
        frames.append(d[LAUNCH_COLUMNS])
    launches = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LAUNCH_COLUMNS)
    if per_launch:
        return launches
    rows = []
    for rank, d in launches.groupby("rank"):
        shorter = int((d["gpu_us"] < d["cpu_us"]).sum())
        rows.append({"rank": rank, "launches": len(d), "gpu_shorter_than_launch": shorter,
                     "gpu_shorter_pct": 100.0 * shorter / len(d) if len(d) else None,
                     "runtime_outliers": int((d["cpu_us"] > opts.runtime_cutoff_us).sum()),
                     "launch_delay_outliers": int((d["launch_delay_us"] > opts.launch_delay_cutoff_us).sum()),
                     "median_cpu_us": d["cpu_us"].median(), "median_gpu_us": d["gpu_us"].median(),
                     "median_launch_delay_us": d["launch_delay_us"].median()})
    return pd.DataFrame(rows, columns=LAUNCH_SUMMARY_COLUMNS)
