"""Computation/communication overlap per rank, as HTA's ``get_comm_comp_overlap``.

For each trace (rank): ``comp_us`` = the union of computation kernels, ``comm_us`` = the union
of communication kernels (NCCL/RCCL/HCCL), ``overlap_us`` = the time both run at once, all in µs,
and ``comp_comm_overlap_pct`` = 100 * overlap_us / comm_us: the share of communication hidden
behind computation. Kernel kinds follow HTA's name patterns (view ``gpu_op_kinds``,
``store/sql/views_comm.sql``); the query is ``analyses/overlap/overlap.sql``.

Source: HTA ``hta/analyzers/communication_analysis.py`` (TraceAnalysis.get_comm_comp_overlap),
which reports 14.31% on ``hta_a100_ddp_nccl``. By default (``steps_only``) the GPU operations
are HTA's selection: those launched before the last ProfilerStep starts. HTA also rounds
fractional (ns-resolution) timestamps to whole µs, start up and end down; ``hta_rounding``
does the same and then gives HTA's number exactly; without it times are the trace's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.common.selection import steps_note
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

OVERLAP_COLUMNS = ["rank", "comp_us", "comm_us", "overlap_us", "comp_comm_overlap_pct"]


@dataclass(frozen=True)
class OverlapOptions:
    """``rank``: only that rank; ``steps_only``: HTA's selection (drop the last ProfilerStep and
    kernels launched before the trace); ``hta_rounding``: HTA's whole-µs rounding."""

    rank: int | None = None
    steps_only: bool = True
    hta_rounding: bool = False


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
