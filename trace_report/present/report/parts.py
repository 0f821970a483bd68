"""The report page's building blocks: :class:`Section` and :func:`table_html` (every header and
cell escaped, URLs as links, long names shortened with the whole name on hover, long tables
folded to their top rows). Shared by the page (:mod:`~trace_report.present.report.page`) and its
sections."""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from trace_report.errors import TraceReportError
from trace_report.present.charts import html as chart_html
from trace_report.present.charts.traces import short_name

NAME_CHARS = 60
"""A name in a table is shortened to this many characters (:func:`short_name`); the whole name is
its ``title`` (shown on hover)."""
NAME_COLUMNS = ("name", "kernel", "kernel_name", "kernels")
"""Columns that hold kernel or operator names (a list of names in ``kernels``)."""
WIDE_COLUMNS = 12
"""A table of more columns is set smaller (class ``wide``), so that it fits the page."""
TOP_ROWS = 5
"""Rows a long table shows before its ``<details>`` (:func:`table_html` ``top``)."""


@dataclass
class Section:
    """A part of the page: a heading, HTML (already escaped), charts and notes."""

    title: str
    body: str = ""
    charts: list[tuple[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tail: str = ""  # HTML after the charts
    inline: set[str] = field(default_factory=set)  # charts already placed in ``body``

    def inline_chart(self, name: str, chart: Any) -> str:
        """Record ``chart`` and return its HTML, for a body that interleaves charts and text."""
        self.charts.append((name, chart))
        self.inline.add(name)
        return chart_html.chart_block(f"chart-{name}", chart)


def _cell(value: Any) -> tuple[str, bool]:
    """Escaped text of a table cell and whether it is a number."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "", False
    if isinstance(value, bool):
        return str(value), False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = f"{value:,}" if isinstance(value, int) else (f"{value:,.3f}" if abs(value) < 1e12 else f"{value:.4g}")
        return text, True
    if isinstance(value, list):
        return chart_html.linkify(", ".join(map(str, value))), False
    return chart_html.linkify(str(value)), False


def _name_cell(value: Any) -> str:
    """A (kernel) name, or a list of names: each longer than :data:`NAME_CHARS` shortened
    (:func:`short_name`: the kernel function and its innermost functor kept), the whole text in
    the cell's ``title`` (hover) when anything was cut."""
    names = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    full = ", ".join(names)
    shown = ", ".join(n if len(n) <= NAME_CHARS else short_name(n, NAME_CHARS) for n in names)
    if shown == full:
        return html.escape(full)
    return f'<span title="{html.escape(full, quote=True)}">{html.escape(shown)}</span>'


def _header(column: object) -> str:
    """An escaped header that may wrap after each ``_`` (``launch_<wbr>overhead_<wbr>ms``)."""
    return f"<th>{html.escape(str(column)).replace('_', '_<wbr>')}</th>"


def _rows_html(frame: pd.DataFrame, name_columns: tuple[str, ...]) -> list[str]:
    rows = []
    for rec in frame.to_dict("records"):
        cells = []
        for col, value in rec.items():
            text, num = _cell(value.item() if hasattr(value, "item") else value)
            if col in name_columns and text:
                text = _name_cell(value)
            cls = "num" if num else ("name" if col in name_columns else "")
            cells.append(f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return rows


def _table(head: str, rows: list[str], columns: int) -> str:
    wide = ' class="wide"' if columns > WIDE_COLUMNS else ""
    return (f'<div class="table-wrap"><table{wide}><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def table_html(frame: pd.DataFrame, *, name_columns: tuple[str, ...] = NAME_COLUMNS, top: int | None = None) -> str:
    """A frame as an HTML table in its own box, every header and cell escaped, URLs as links,
    headers wrapping at ``_``, names shortened (:func:`_name_cell`), set smaller past
    :data:`WIDE_COLUMNS` columns. ``top``: a table of more rows
    shows its first ``top`` and the rest in a second table of the same columns inside a
    ``<details class="more-rows">`` (closed)."""
    head = "".join(_header(c) for c in frame.columns)
    rows = _rows_html(frame, name_columns)
    n = len(frame.columns)
    if top is None or len(rows) <= top:
        return _table(head, rows, n)
    rest = len(rows) - top
    return (_table(head, rows[:top], n) + f'<details class="more-rows"><summary>{rest} more row{"s" * (rest > 1)}'
            f"</summary>{_table(head, rows[top:], n)}</details>")


def attempt(sec: Section, what: str, build: Callable[[], Any]) -> Any:
    """Run one part of a section; an analysis that does not apply (a
    :class:`~trace_report.errors.TraceReportError`) becomes a note ``what: reason``."""
    try:
        return build()
    except TraceReportError as exc:
        sec.notes.append(f"{what}: {exc}")
        return None
