"""The report's "Step time per rank" section (several ranks):
:func:`~trace_report.analyses.common.stragglers.stragglers`, the rows of ``trace-report breakdown
--stragglers`` and the spread per step."""

from __future__ import annotations

import html

from trace_report.analyses.common.stragglers import StragglerOptions, stragglers
from trace_report.errors import TraceReportError
from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import Section, table_html
from trace_report.store.tracedb import TraceDB

STRAGGLER_ROWS = 48
def _more(shown: int, total: int, command: str) -> str:
    return f"<p>{total - shown} more rows: <code>{html.escape(command)}</code>.</p>" if total > shown else ""


def stragglers_section(db: TraceDB, rank: int | None) -> Section | None:
    """Step time per rank (several ranks only, and no ``rank`` chosen): ``step``, ``rank``,
    ``step_us``, ``behind_us``/``behind_pct`` (behind the fastest rank of that step), ``slowest``;
    the spread per step in the lead. None on one rank or without steps on several ranks."""
    if rank is not None or len(db.ranks()) < 2:
        return None
    try:
        result = stragglers(db, StragglerOptions())
    except TraceReportError:
        return None
    frame = result.frame
    if frame.empty or frame.groupby("step")["rank"].nunique().max() < 2:
        return None
    spread = [n for n in result.notes if n.startswith("step ")]
    lead = "".join(f"<p>{html.escape(line)}</p>" for line in spread[:3])
    if len(spread) > 3:
        lead += f"<p>... and {len(spread) - 3} more steps.</p>"
    shown = frame.head(STRAGGLER_ROWS)
    body = (lead + table_html(shown, name_columns=())
            + _more(len(shown), len(frame), "trace-report breakdown --stragglers"))
    notes = ["step_us: the ProfilerStep's duration on each rank (CPU side); behind: longer than the fastest rank "
             "of the same step", *[n for n in result.notes if not n.startswith("step ")]]
    return Section("Step time per rank", body, notes=notes)


def build(ctx: ReportContext) -> Section | None:
    """:func:`stragglers_section` of the report's rank(s)."""
    return stragglers_section(ctx.db, ctx.opts.rank)
