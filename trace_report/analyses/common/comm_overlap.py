"""Computation/communication overlap per trace, as HTA's ``get_comm_comp_overlap``: the rows
``trace-report overlap`` shows (its declaration and what the columns mean:
:mod:`trace_report.analyses.overlap`) and ``advise``'s exposed-communication finding reads. The
query is ``overlap.sql`` beside this module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trace_report.store.views import sql_text

if TYPE_CHECKING:
    import pandas as pd

    from trace_report.store.tracedb import TraceDB

OVERLAP_COLUMNS = ["rank", "comp_us", "comm_us", "overlap_us", "comp_comm_overlap_pct"]


def overlap_rows(db: TraceDB, rank: int | None = None, steps_only: bool = True,
                 hta_rounding: bool = False) -> pd.DataFrame:
    """Per trace of ``rank`` (None = all): :data:`OVERLAP_COLUMNS` (``comp_us``, ``comm_us``,
    ``overlap_us`` in µs; ``comp_comm_overlap_pct`` NULL without communication kernels) and
    ``trace_id``. ``steps_only``: HTA's selection (view ``steps_only_gpu_ops``); ``hta_rounding``:
    HTA's whole-µs rounding. Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``."""
    db.check_rank(rank)
    params = {"rank": rank, "steps_only": steps_only, "hta_rounding": hta_rounding}
    frame = db.con.execute(sql_text("overlap.sql", __package__), params).df()
    return frame[[*OVERLAP_COLUMNS, "trace_id"]].astype({"rank": "int64"})
