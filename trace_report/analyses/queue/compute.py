"""The computation of ``queue`` (its declaration: the package's ``__init__``): the rows of
:mod:`trace_report.analyses.common.launch_queue` (``advise`` reads them there too) and the notes."""

from __future__ import annotations

from trace_report.analyses.common.launch_queue import queue_rows
from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.common.selection import steps_note
from trace_report.analyses.queue import QueueOptions
from trace_report.store.tracedb import TraceDB


def queue_length(db: TraceDB, options: QueueOptions | None = None) -> Result:
    """Per trace and stream: ``rank``, ``stream``, ``mean_queue_length``, ``max_queue_length``
    (launches), ``blocked_us`` (µs); ``trace_id`` too when several traces share a rank.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank`` or a
    ``max_queue_length`` below 1.
    """
    opts = options or QueueOptions()
    frame = drop_single_trace_ids(queue_rows(db, opts.rank, opts.max_queue_length, opts.steps_only,
                                             opts.hta_rounding))
    notes = steps_note(db, opts.steps_only)
    if frame.empty:
        notes.append("no GPU operations with a launch call (cudaLaunchKernel, cudaMemcpyAsync, ...) in the selection")
    return Result(frame.reset_index(drop=True), notes)
