"""The report's communication section: overlap of computation and NCCL per rank, and the
collectives table, shown only when a trace has communication kernels.

It takes the report's ``Section`` class and ``table_html`` as arguments (:func:`build` passes
those of :mod:`trace_report.present.report.parts`).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import pandas as pd

from trace_report.analyses.collectives import CollectivesOptions, collectives
from trace_report.analyses.overlap import OverlapOptions, overlap
from trace_report.errors import TraceReportError
from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import Section, table_html
from trace_report.store.tracedb import TraceDB

COLLECTIVE_ROWS = 15


def comm_section(db: TraceDB, rank: int | None, section: Callable[..., Any],
                 table_html: Callable[..., str]) -> Any | None:
    """``section(title, body, notes=...)`` with the overlap per rank (as ``trace-report overlap``)
    and the collectives (``trace-report collectives``, first :data:`COLLECTIVE_ROWS` rows); None
    when there are no communication kernels (or the analyses do not apply)."""
    try:
        if not db.scalar("SELECT count(*) FROM gpu_op_kinds g JOIN traces t USING (trace_id) "
                         "WHERE g.kind = 'communication' AND ($rank IS NULL OR t.rank = $rank)", {"rank": rank}):
            return None
        ov = overlap(db, OverlapOptions(rank=rank))
        coll = collectives(db, CollectivesOptions(rank=rank))
    except TraceReportError:
        return None
    comm_total = float(ov.frame["comm_us"].sum())
    hidden = float(ov.frame["overlap_us"].sum())
    lead = (f"<p>{html.escape(f'{100 * hidden / comm_total:.1f}%')} of communication time runs while "
            "computation kernels run (HTA's computation/communication overlap; "
            "<code>trace-report overlap</code>).</p>") if comm_total > 0 else ""
    shown: pd.DataFrame = coll.frame.head(COLLECTIVE_ROWS)
    more = len(coll.frame) - len(shown)
    body = (lead + "<h3>Overlap per rank</h3>" + table_html(ov.frame, name_columns=())
            + "<h3>Collectives</h3>" + table_html(shown, name_columns=())
            + (f"<p>{more} more rows: <code>trace-report collectives</code>.</p>" if more > 0 else ""))
    return section("Communication", body, notes=[*ov.notes, *coll.notes])


def build(ctx: ReportContext) -> Section | None:
    """:func:`comm_section` of the report's rank(s)."""
    return comm_section(ctx.db, ctx.opts.rank, Section, table_html)
