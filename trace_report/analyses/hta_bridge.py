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
temporary directory. Ranks come from the trace's
``distributedInfo.rank``, else the file name (``rank-3``, ``worker3``), else 0. HTA's own
failures on unsuitable traces (CPU-only, no kernels, a missing rank) become
:class:`~trace_report.errors.InputError`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import pandas as pd

from trace_report.errors import InputError, UsageError
from trace_report.formats.kineto import is_gzip, open_stream
from trace_report.formats.kineto_metadata import rank_from_name
from trace_report.inputs import InputKind, Source, resolve
from trace_report.store.database import connect_existing

TEMPORAL_COLUMNS = ["rank", "idle_us", "compute_us", "non_compute_us", "span_us", "idle_pct", "compute_pct",
                    "non_compute_pct"]
IDLE_COLUMNS = ["rank", "stream", "idle_category", "idle_us", "idle_ratio"]
LAUNCH_SUMMARY_COLUMNS = ["rank", "launches", "gpu_shorter_than_launch", "gpu_shorter_pct", "runtime_outliers",
                          "launch_delay_outliers", "median_cpu_us", "median_gpu_us", "median_launch_delay_us"]
LAUNCH_COLUMNS = ["rank", "correlation", "cpu_us", "gpu_us", "launch_delay_us"]
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
_SCAN_BYTES = 1 << 20


@dataclass(frozen=True)
class HtaOptions:
    """``ranks``: analyse only these (empty = every rank found); ``include_last_step``: keep the
    last ProfilerStep's kernels (HTA drops them by default); ``runtime_cutoff_us`` and
    ``launch_delay_cutoff_us``: HTA's outlier thresholds for launch statistics (defaults 50, 100)."""

    ranks: tuple[int, ...] = ()
    include_last_step: bool = False
    runtime_cutoff_us: float = 50.0
    launch_delay_cutoff_us: float = 100.0


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


def _stored_paths(database: Path) -> list[Path]:
    """The trace files (or archives) a trace-report database was ingested from."""
    con = connect_existing(database, read_only=True)
    try:
        stored = [row[0] for row in con.execute("SELECT path FROM traces ORDER BY trace_id").fetchall()]
    finally:
        con.close()
    out: list[Path] = []
    for label in stored:
        src = Path(label.split("!", 1)[0])
        if not src.exists():
            raise InputError(f"{database}: HTA needs the trace files, and {src} (ingested from) is gone")
        if src not in out:
            out.append(src)
    return out


def _trace_sources(paths: list[Path]) -> Iterator[Source]:
    """The Chrome/Kineto traces among ``paths`` (a database stands for the files it was read from)."""
    with resolve(paths) as found:
        if found.database is not None:
            yield from _trace_sources(_stored_paths(found.database))
            return
        if found.dataset is not None:
            raise InputError(f"{found.dataset}: HTA needs trace files, not an exported dataset")
        yield from (s for s in found.sources if s.kind is InputKind.trace)


@contextlib.contextmanager
def hta_trace_files(paths: Sequence[str | PathLike[str]]) -> Iterator[tuple[Path, dict[int, str]]]:
    """A temporary directory with the traces of ``paths`` linked in, and HTA's ``{rank: file}``.

    Raises :class:`InputError` when two traces claim the same rank (HTA needs one per rank).
    """
    with tempfile.TemporaryDirectory(prefix="trace-report-hta-") as tmp:
        files: dict[int, str] = {}
        labels: dict[int, str] = {}
        for i, src in enumerate(_trace_sources([Path(p) for p in paths])):
            rank = trace_rank(src.path)
            rank = rank if rank is not None else (rank_from_name(Path(src.label).name) or 0)
            if rank in files:
                raise InputError(f"{labels[rank]} and {src.label} are both rank {rank}: HTA needs one trace "
                                 "per rank (set distributedInfo.rank)")
            suffix = ".json.gz" if is_gzip(src.path) else ".json"
            link = Path(tmp) / f"rank-{rank}.{i}{suffix}"
            if src.label != str(src.path):  # a tar member: its temporary file goes with the resolution
                shutil.copyfile(src.path, link)
            else:
                link.symlink_to(src.path.absolute())
            files[rank], labels[rank] = str(link), src.label
        if not files:
            raise InputError(f"{', '.join(map(str, paths))}: no Chrome/Kineto traces for HTA")
        yield Path(tmp), files


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep HTA's log lines, prints and (pandas deprecation) warnings off our output."""
    log = logging.getLogger("hta")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


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
    try:
        with _quiet():
            analysis = TraceAnalysis(trace_files=chosen, trace_dir=str(tmp),
                                     include_last_profiler_step=opts.include_last_step)
    except (ValueError, KeyError, IndexError, AssertionError) as exc:
        raise InputError(f"HTA cannot read these traces ({type(exc).__name__}: {exc})") from exc
    no_gpu = [r for r in wanted if r not in analysis.t.traces or not (analysis.t.traces[r]["stream"] >= 0).any()]
    if no_gpu:
        raise InputError(f"rank {', '.join(map(str, no_gpu))}: no GPU kernels in the trace (CPU-only or GPU "
                         "activity missing); HTA's GPU analyses need kernels")
    return analysis, wanted


def _run(paths: Sequence[str | PathLike[str]], opts: HtaOptions, call: Any) -> Any:
    with hta_trace_files(paths) as (tmp, files):
        analysis, ranks = _analysis(tmp, files, opts)
        try:
            with _quiet():
                return call(analysis, ranks)
        except (ValueError, KeyError, IndexError, AssertionError) as exc:
            raise InputError(f"HTA failed on these traces ({type(exc).__name__}: {exc})") from exc


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
    that ran shorter than the CPU call that launched them; outliers use the options' cutoffs (µs)."""
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
