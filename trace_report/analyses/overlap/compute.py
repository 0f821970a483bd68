"""The computation of ``overlap`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.common.selection import steps_note
from trace_report.analyses.overlap import OVERLAP_COLUMNS, OverlapOptions
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text


def overlap(db: TraceDB, options: OverlapOptions | None = None) -> Result:
    """Per trace: ``rank``, ``comp_us``, ``comm_us``, ``overlap_us`` (µs), ``comp_comm_overlap_pct``
    (NULL without communication kernels); ``trace_id`` too when several traces share a rank.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``.
    """
    opts = options or OverlapOptions()
    db.check_rank(opts.rank)
    params = {"rank": opts.rank, "steps_only": opts.steps_only, "hta_rounding": opts.hta_rounding}
    frame = db.con.execute(sql_text("overlap.sql", __package__), params).df()
    frame = drop_single_trace_ids(frame[[*OVERLAP_COLUMNS, "trace_id"]].astype({"rank": "int64"}))
    notes = steps_note(db, opts.steps_only)
    if frame.empty:
        notes.append("no computation or communication kernels in the selection")
    elif frame["comm_us"].eq(0).all():
        notes.append("no communication (NCCL/RCCL) kernels: nothing to overlap")
    return Result(frame.reset_index(drop=True), notes)
