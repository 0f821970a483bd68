"""The report's list of runs (:mod:`trace_report.store.run_identity`) when each is analysed alone."""

from __future__ import annotations

from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import Section, table_html
from trace_report.store.tracedb import TraceDB


def runs_section(db: TraceDB) -> Section:
    """The runs of the input (:mod:`trace_report.store.run_identity`), one row each."""
    frame = db.con.execute(
        "SELECT r.run, any_value(r.run_source) AS grouped_by, count(*) AS traces, "
        "string_agg(DISTINCT CAST(t.rank AS VARCHAR), ', ') AS ranks, "
        "string_agg(DISTINCT t.device_name, ', ') AS gpu, min(t.trace_id) AS first_trace "
        "FROM trace_runs r JOIN traces t USING (trace_id) GROUP BY r.run ORDER BY first_trace").df()
    sec = Section("Runs", table_html(frame.drop(columns=["first_trace"])))
    sec.notes.append("each run is analysed alone below (trace-report report --merge-runs for one analysis of all)")
    return sec


def build(ctx: ReportContext) -> Section | None:
    """:func:`runs_section` of the report's input."""
    return runs_section(ctx.db)
