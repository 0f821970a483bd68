"""The report's advice: ``advise``'s verdict, then its findings sorted by estimated saving."""

from __future__ import annotations

import html

from trace_report.analyses.advise import AdviceResult, advise
from trace_report.errors import TraceReportError
from trace_report.present.report.context import ReportContext, ReportOptions
from trace_report.present.report.parts import Section, table_html
from trace_report.store.tracedb import TraceDB

FIRST_COLUMNS = ("rank", "finding", "title", "est_saving_ms_per_step", "saving_pct_of_step", "recommendation")
"""What each finding saves and what to do come before its evidence and thresholds."""


def advice_of(db: TraceDB, opts: ReportOptions) -> AdviceResult | TraceReportError:
    """``advise``'s result, computed once per report (the headline and the Advice section show it),
    or the error that stopped it."""
    try:
        return advise(db, rank=opts.rank)
    except TraceReportError as exc:
        return exc


def advice_section(advice: AdviceResult | TraceReportError) -> Section | None:
    """The verdict, then the findings sorted by estimated saving (:data:`FIRST_COLUMNS` first), with
    their numbers and thresholds."""
    if isinstance(advice, TraceReportError):
        return Section("Advice", notes=[str(advice)])
    body = f"<p><b>{html.escape(advice.verdict)}</b></p>"
    frame = advice.frame
    first = [c for c in FIRST_COLUMNS if c in frame.columns]
    frame = frame[[*first, *(c for c in frame.columns if c not in first)]]
    body += table_html(frame, name_columns=()) if len(frame) else "<p>No findings.</p>"
    return Section("Advice", body, notes=list(advice.notes))


def build(ctx: ReportContext) -> Section | None:
    """:func:`advice_section` of the advice computed once per report (:attr:`ReportContext.advice`)."""
    return None if ctx.advice is None else advice_section(ctx.advice)
