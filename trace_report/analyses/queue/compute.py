"""The computation of ``queue`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.common.selection import steps_note
from trace_report.analyses.queue import QUEUE_COLUMNS, QueueOptions
from trace_report.errors import UsageError
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text


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
