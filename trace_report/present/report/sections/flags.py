"""The report's kernel-class section: the share of GPU time per kernel class, per run when there
are several (:func:`~trace_report.analyses.flags.flags_summary`, as ``trace-report flags``)."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pandas as pd

from trace_report.errors import TraceReportError
from trace_report.present.report.context import ReportContext, ReportOptions, flags_by_run, trace_runs
from trace_report.present.report.parts import Section, table_html
from trace_report.store.tracedb import TraceDB


def flags_section(db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
                  classes: Callable[[], tuple[pd.DataFrame, list[str]]] | None = None) -> Section | None:
    """Share of GPU time per kernel class (TF32, tensor core, layout conversion...), per run when
    there are several. ``classes``: as
    :func:`~trace_report.present.report.sections.trace_charts.trace_charts_section`'s."""
    try:
        summary, notes = classes() if classes else flags_by_run(db, opts, trace_runs(con))
    except TraceReportError:
        return None
    if not summary["gpu_us"].fillna(0).gt(0).any():
        return None
    return Section("Kernel classes", table_html(summary), notes=notes)


def build(ctx: ReportContext) -> Section | None:
    """:func:`flags_section` of the report's traces."""
    return flags_section(ctx.db, ctx.con, ctx.opts, ctx.classes)
