"""The report's "Operators" section: :func:`~trace_report.analyses.ops.ops`, the top ``aten::``
operators by GPU time with FLOP and TFLOP/s where the trace has input shapes, as ``trace-report ops``."""

from __future__ import annotations

import html

import pandas as pd

from trace_report.analyses.ops import OpsOptions, ops
from trace_report.errors import TraceReportError
from trace_report.present.format import si
from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import TOP_ROWS, Section, table_html
from trace_report.store.tracedb import TraceDB

OPS_ROWS = 15
def _more(shown: int, total: int, command: str) -> str:
    return f"<p>{total - shown} more rows: <code>{html.escape(command)}</code>.</p>" if total > shown else ""


def ops_section(db: TraceDB, rank: int | None) -> Section | None:
    """The top :data:`OPS_ROWS` ``aten::`` operators by GPU time: ``name``, ``count``,
    ``self_cpu_us``, ``gpu_self_us``, ``gpu_us`` (µs), ``flop`` and ``tflop_per_s`` (SI text, empty
    where the trace has no shapes). None without operators or without GPU time."""
    try:
        result = ops(db, OpsOptions(rank=rank, limit=OPS_ROWS))
    except TraceReportError:
        return None
    frame = result.frame
    if frame.empty or not frame["gpu_us"].fillna(0).gt(0).any():
        return None
    shown = frame[["name", "count", "self_cpu_us", "gpu_self_us", "gpu_us"]].copy()
    shown["flop"] = [si(v, "FLOP") for v in frame["flop"]]
    shown["tflop_per_s"] = [f"{v:,.2f}" if pd.notna(v) else "" for v in frame["tflop_per_s"]]
    body = (f"<p>Top {len(shown)} <code>aten::</code> operators by GPU time (<code>gpu_us</code>: the kernels, "
            "copies and memsets they launched, with those of the operators nested in them; "
            "<code>gpu_self_us</code>: their own launches only).</p>"
            + table_html(shown, top=TOP_ROWS)
            + "<p>Every operator, by input shape: <code>trace-report ops --by-shape</code>.</p>")
    return Section("Operators", body, notes=list(result.notes))


def build(ctx: ReportContext) -> Section | None:
    """:func:`ops_section` of the report's rank(s)."""
    return ops_section(ctx.db, ctx.opts.rank)
