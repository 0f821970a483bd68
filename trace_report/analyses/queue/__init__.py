"""CUDA launch queue length per rank and stream, as HTA's queue-length analysis.

The queue of a stream grows by one at each launch call (``cudaLaunchKernel``,
``cudaMemcpyAsync``, ``cudaMemsetAsync``, ``cuLaunchKernel``, the ``hip*`` equivalents) and
shrinks by one when the GPU operation it launched (same ``correlation``) starts. Columns:
``mean_queue_length`` and ``max_queue_length`` over the series of values at each change
(HTA's ``describe()`` of the time series, so the mean is per change, not per µs) and
``blocked_us``: µs the queue stayed at ``max_queue_length`` (CUDA's 1024 launches per stream,
HTA's ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``) or more, when the CPU blocks on a full queue.
The query is ``analyses/queue/queue.sql``.

Source: HTA ``hta/analyzers/trace_counters.py`` (get_queue_length_summary,
get_time_spent_blocked_on_full_queue). ``steps_only`` and ``hta_rounding`` select and round
as in :mod:`trace_report.analyses.overlap`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.common.selection import steps_note
from trace_report.errors import UsageError
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

QUEUE_COLUMNS = ["rank", "stream", "mean_queue_length", "max_queue_length", "blocked_us"]
CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024


@dataclass(frozen=True)
class QueueOptions:
    """``rank``: only that rank; ``max_queue_length``: the length counted as full;
    ``steps_only`` / ``hta_rounding``: as :class:`~trace_report.analyses.overlap.OverlapOptions`."""

    rank: int | None = None
    max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM
    steps_only: bool = True
    hta_rounding: bool = False


def queue_length(db: TraceDB, options: QueueOptions | None = None) -> Result:
    """Per trace and stream: ``rank``, ``stream``, ``mean_queue_length``, ``max_queue_length``
    (launches), ``blocked_us`` (µs); ``trace_id`` too when several traces share a rank.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank`` or a
    ``max_queue_length`` below 1.
    """
    opts = options or QueueOptions()
    db.check_rank(opts.rank)
    if opts.max_queue_length < 1:
        raise UsageError(f"max queue length must be at least 1 (got {opts.max_queue_length})")
    params = {"rank": opts.rank, "steps_only": opts.steps_only, "hta_rounding": opts.hta_rounding,
              "max_queue_length": opts.max_queue_length}
    frame = db.con.execute(sql_text("queue.sql", __package__), params).df()
    frame = drop_single_trace_ids(frame[[*QUEUE_COLUMNS, "trace_id"]].astype({"rank": "int64", "stream": "int64"}))
    notes = steps_note(db, opts.steps_only)
    if frame.empty:
        notes.append("no GPU operations with a launch call (cudaLaunchKernel, cudaMemcpyAsync, ...) in the selection")
    return Result(frame.reset_index(drop=True), notes)
