"""Python API for notebooks: ``trace_report.open(paths)`` (docs/report.md).

:func:`open` is the one way in for the library and the CLI alike: it asks
:func:`trace_report.inputs.resolve` what the paths are, then opens a database, an exported
dataset, or ingests traces and Nsight exports into memory, and attaches the run tables.
The handle it returns is a :class:`TraceDB` (:class:`trace_report.store.tracedb.TraceDB` with
the analyses as methods, for notebooks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path

import duckdb
import pandas as pd

from trace_report.analyses.advise import advise
from trace_report.analyses.collectives import CollectivesOptions, collectives
from trace_report.analyses.critical_path import DATA_LOADING, CriticalPathOptions, CriticalPathResult, critical_path
from trace_report.analyses.kernel_classes import FlagsOptions, flags
from trace_report.analyses.launches import LaunchOptions, launches
from trace_report.analyses.memory import MemoryOptions, memory_peaks, memory_timeline
from trace_report.analyses.modules import ModuleOptions, modules
from trace_report.analyses.ops import OpsOptions, ops
from trace_report.analyses.overlap import OverlapOptions, overlap
from trace_report.analyses.queue import QueueOptions, queue_length
from trace_report.analyses.regions import BreakdownOptions, breakdown
from trace_report.analyses.sequences import SequenceOptions, sequences
from trace_report.analyses.slice import SliceOptions, slice_trace
from trace_report.analyses.stragglers import StragglerOptions, stragglers
from trace_report.analyses.top_kernels import TopKernelsOptions, TopKernelsResult, top_kernels
from trace_report.analyses.utilization import gpu_utilization
from trace_report.ingest.pipeline import IngestOptions, open_in_memory
from trace_report.inputs import Resolution, as_paths, resolve
from trace_report.present.slice import write_chrome_trace
from trace_report.store import tracedb
from trace_report.store.database import create_schema
from trace_report.store.export import open_parquet_dataset
from trace_report.store.handle import open_database
from trace_report.store.notebook import MagicConnection, magic_connection
from trace_report.store.runs import attach_runs

PathArg = str | bytes | PathLike[str]


class TraceDB(tracedb.TraceDB):
    """Traces in DuckDB behind one connection, with the analyses as methods.

    ``con`` is the duckdb connection itself; :meth:`sql` returns a DuckDB relation
    (``.df()``, ``.arrow()``, ``.fetchall()``). Each analysis method returns the frame the
    matching command prints (same numbers, same columns).
    """

    def top_kernels(self, limit: int | None = 20, *, rank: int | None = None,
                    by_rank: bool = False, kernels_only: bool = False) -> pd.DataFrame:
        """Top GPU kernels, memcpy and memset by total time (column ``kind``), as
        ``trace-report top-kernels`` prints them; ``kernels_only`` hides the memcpy/memset rows.

        See :func:`trace_report.analyses.top_kernels.top_kernels` for columns and units.
        """
        return self.top_kernels_result(limit, rank=rank, by_rank=by_rank, kernels_only=kernels_only).frame

    def top_kernels_result(self, limit: int | None = 20, *, rank: int | None = None,
                           by_rank: bool = False, kernels_only: bool = False) -> TopKernelsResult:
        """Like :meth:`top_kernels` but also returns the note (CPU fallback, hidden memcpy/memset)."""
        return top_kernels(self, TopKernelsOptions(limit=limit, rank=rank, by_rank=by_rank,
                                                   kernels_only=kernels_only))

    def breakdown(self, *, by_step: bool = False, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Wall, GPU-kernel and idle time per region (``trace-report breakdown``); see
        :func:`trace_report.analyses.regions.breakdown`."""
        return breakdown(self, BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank)).frame

    def flags(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Flagged kernel names with their classes (``trace-report flags``); the per-class summary
        is in :func:`trace_report.analyses.kernel_classes.flags`'s result."""
        return flags(self, FlagsOptions(rank=rank, by_rank=by_rank)).frame

    def advise(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Findings with their numbers and thresholds (``trace-report advise``)."""
        return advise(self, rank=rank, by_rank=by_rank).frame

    def gpu_utilization(self, *, rank: int | None = None, by_step: bool = False) -> pd.DataFrame:
        """GPU busy % of step time per rank (or per step), the report headline's and ``advise``'s
        figure; see :func:`trace_report.analyses.utilization.gpu_utilization`."""
        return gpu_utilization(self, rank, by_step=by_step)

    def overlap(self, *, rank: int | None = None, steps_only: bool = True, hta_rounding: bool = False) -> pd.DataFrame:
        """Computation/communication overlap per rank (``trace-report overlap``); see
        :func:`trace_report.analyses.overlap.overlap`."""
        return overlap(self, OverlapOptions(rank=rank, steps_only=steps_only, hta_rounding=hta_rounding)).frame

    def queue_length(self, *, rank: int | None = None, max_queue_length: int = 1024, steps_only: bool = True,
                     hta_rounding: bool = False) -> pd.DataFrame:
        """CUDA launch queue length per rank and stream (``trace-report queue``); see
        :func:`trace_report.analyses.queue.queue_length`."""
        return queue_length(self, QueueOptions(rank=rank, max_queue_length=max_queue_length,
                                               steps_only=steps_only, hta_rounding=hta_rounding)).frame

    def memory(self, *, rank: int | None = None, device: str | None = None, timeline: bool = False) -> pd.DataFrame:
        """Peak allocated/reserved bytes per device and step, or every ``[memory]`` event with
        ``timeline`` (``trace-report memory``); see :mod:`trace_report.analyses.memory`."""
        fn = memory_timeline if timeline else memory_peaks
        return fn(self, MemoryOptions(rank=rank, device=device)).frame

    def ops(self, limit: int | None = 30, *, rank: int | None = None, by_shape: bool = False,
            all_ops: bool = False) -> pd.DataFrame:
        """The operator view (``trace-report ops``); see :func:`trace_report.analyses.ops.ops`."""
        return ops(self, OpsOptions(rank=rank, by_shape=by_shape, all_ops=all_ops, limit=limit)).frame

    def launches(self, *, rank: int | None = None, per_launch: bool = False, steps_only: bool = True,
                 hta_rounding: bool = False, all_launches: bool = False) -> pd.DataFrame:
        """Kernel launch statistics per GPU operation name or per launch (``trace-report launches``);
        see :func:`trace_report.analyses.launches.launches`."""
        return launches(self, LaunchOptions(rank=rank, per_launch=per_launch, steps_only=steps_only,
                                            hta_rounding=hta_rounding, all_launches=all_launches)).frame

    def critical_path(self, *, rank: int | None = None, step: int | None = None,
                      data_loading: tuple[str, ...] = DATA_LOADING, infer_syncs: bool = True,
                      hta_rounding: bool = False, top: int = 10) -> CriticalPathResult:
        """The critical path of each (rank, step) (``trace-report critical-path``): ``.frame`` ms on
        the path by kind, ``.operators`` the top operators on it, ``.notes``; see
        :func:`trace_report.analyses.critical_path.critical_path`."""
        return critical_path(self, CriticalPathOptions(rank=rank, step=step, data_loading=data_loading,
                                                       infer_syncs=infer_syncs, hta_rounding=hta_rounding, top=top))

    def sequences(self, *, rank: int | None = None, operator: str | None = None, min_length: int = 2,
                  max_length: int = 8, min_count: int = 2, steps_only: bool = True) -> pd.DataFrame:
        """Repeated kernel sequences per launching operator, fusion candidates flagged
        (``trace-report sequences``); see :func:`trace_report.analyses.sequences.sequences`."""
        return sequences(self, SequenceOptions(rank=rank, operator=operator, min_length=min_length,
                                               max_length=max_length, min_count=min_count,
                                               steps_only=steps_only)).frame

    def modules(self, *, rank: int | None = None, depth: int | None = None, by_step: bool = False) -> pd.DataFrame:
        """The nn.Module tree: CPU time, GPU time of what each module launched, FLOP
        (``trace-report modules``); see :func:`trace_report.analyses.modules.modules`."""
        return modules(self, ModuleOptions(depth=depth, rank=rank, by_step=by_step)).frame

    def slice(self, output: str | PathLike[str], *, steps: int | tuple[int, int] | None = None,
              window: tuple[float | None, float | None] | None = None, rank: int | None = None,
              source: bool = True, counters: bool = True) -> int:
        """Write ProfilerSteps ``steps`` (N or (first, last)) and/or the ``window`` (µs on the
        trace's clock) of one trace as a Chrome trace for Perfetto (``trace-report slice``; gzip
        when ``output`` ends in ``.gz``); returns the number of events written. See
        :func:`trace_report.analyses.slice.slice_trace`."""
        span = (steps, steps) if isinstance(steps, int) else steps
        result = slice_trace(self, SliceOptions(steps=span, window=window, rank=rank, source=source,
                                                counters=counters))
        return write_chrome_trace(Path(output), result.metadata, result.events)

    def collectives(self, *, rank: int | None = None, by_rank: bool = False) -> pd.DataFrame:
        """Collectives per kind and message size (``trace-report collectives``); see
        :func:`trace_report.analyses.collectives.collectives`."""
        return collectives(self, CollectivesOptions(rank=rank, by_rank=by_rank)).frame

    def stragglers(self, *, rank: int | None = None) -> pd.DataFrame:
        """Step time per rank against the fastest rank (``trace-report breakdown --stragglers``); see
        :func:`trace_report.analyses.stragglers.stragglers`."""
        return stragglers(self, StragglerOptions(rank=rank)).frame

    @property
    def magic(self) -> MagicConnection:
        """A connection for jupysql's ``%sql`` that sees this database's TEMP views
        (``conn = db.magic`` then ``%sql conn``); ``%sql db.con`` would open a cursor that does not."""
        return magic_connection(self)


def _as_paths(paths: PathArg | Sequence[PathArg]) -> list[Path]:
    return as_paths(paths)


def open_resolution(found: Resolution, *, read_only: bool = True, workers: int | None = None,
                    progress: Callable[[int, int], None] | None = None) -> TraceDB:
    """:func:`open` on what :func:`trace_report.inputs.resolve` found (the caller keeps
    ``found`` open while this runs: tar members live in its temporary folders)."""
    if found.dataset is not None:
        opened = open_parquet_dataset(found.dataset)  # carries its own run tables
        db = TraceDB(opened.con, opened.summary)
        db.runs()  # the trace_runs table, for SQL
        return db
    if found.database is not None:
        return open_database(found.database, read_only=read_only, cls=TraceDB)
    if found.sources:
        con, summary = open_in_memory(found, IngestOptions(workers=workers, progress=progress))
        db = TraceDB(con, summary)
    else:
        con = duckdb.connect(":memory:")
        create_schema(con, with_views=True)
        db = TraceDB(con)
        db.summary.skipped.extend(found.skipped)
        db.summary.notes.extend(found.notes)
    attach_runs(db.con, found.run_folders)
    db.runs()  # the trace_runs table, for SQL
    return db


def open(  # noqa: A001 - the name docs/report.md gives
    paths: PathArg | Sequence[PathArg],
    *,
    read_only: bool = True,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TraceDB:
    """Open traces, run folders, a ``.duckdb`` written by ``trace-report ingest``, or a Parquet
    dataset written by ``trace-report export``.

    ``paths``: one database (opened ``read_only`` unless asked otherwise) or dataset folder, or
    any number of ``.json``/``.json.gz`` traces, directories of per-rank traces, tar archives,
    Nsight exports and capture run folders (each tagged with its run id and ``run.json`` config;
    run folders without traces, captured with ``--no-profile``, still give ``runs`` rows).
    ``progress(done_bytes, total_bytes)`` is called while traces are read. Raises
    :class:`~trace_report.errors.InputError` or :class:`~trace_report.errors.DatabaseError`
    for unusable input.
    """
    with resolve(_as_paths(paths)) as found:
        return open_resolution(found, read_only=read_only, workers=workers, progress=progress)
