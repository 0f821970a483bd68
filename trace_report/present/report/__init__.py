"""``trace-report report``: one self-contained HTML page for runs or traces.
(:mod:`~trace_report.present.report.page` assembles it from the modules of ``sections/``)."""

from trace_report.present.report.context import ReportContext, ReportOptions, trace_runs
from trace_report.present.report.page import Report, build_report, check_output, render_html, write_report
from trace_report.present.report.parts import Section, attempt, table_html
from trace_report.present.report.sections.advice import advice_of, advice_section
from trace_report.present.report.sections.headline import headline_section
from trace_report.present.report.sections.trace_charts import trace_charts_section

__all__ = ["Report", "ReportContext", "ReportOptions", "Section", "advice_of", "advice_section", "attempt",
           "build_report", "check_output", "headline_section", "render_html", "table_html",
           "trace_charts_section", "trace_runs", "write_report"]
