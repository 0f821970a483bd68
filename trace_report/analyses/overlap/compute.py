"""The computation of ``overlap`` (its declaration: the package's ``__init__``): the rows of
:mod:`trace_report.analyses.common.comm_overlap` (``advise`` reads them there too) and the notes."""

from __future__ import annotations

from trace_report.analyses.common.comm_overlap import OVERLAP_COLUMNS, overlap_rows  # noqa: F401  (re-exported)
from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.common.selection import steps_note
from trace_report.analyses.overlap import OverlapOptions
from trace_report.store.tracedb import TraceDB


def overlap(db: TraceDB, options: OverlapOptions | None = None) -> Result:
    """Per trace: ``rank``, ``comp_us``, ``comm_us``, ``overlap_us`` (µs), ``comp_comm_overlap_pct``
    (NULL without communication kernels); ``trace_id`` too when several traces share a rank.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``.
    """
    opts = options or OverlapOptions()
    frame = drop_single_trace_ids(overlap_rows(db, opts.rank, opts.steps_only, opts.hta_rounding))
    notes = steps_note(db, opts.steps_only)
    if frame.empty:
        notes.append("no computation or communication kernels in the selection")
    elif frame["comm_us"].eq(0).all():
        notes.append("no communication (NCCL/RCCL) kernels: nothing to overlap")
    return Result(frame.reset_index(drop=True), notes)
