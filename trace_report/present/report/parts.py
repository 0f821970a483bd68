"""The report page's building blocks: :class:`Section` and :func:`table_html` (every header and
cell escaped, URLs as links, long names folded away). Shared by the page
(:mod:`~trace_report.present.report.page`) and its sections."""

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

NAME_CHARS = 100


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
    """A (kernel) name: shortened, with the whole name in a ``<details>`` when it is long."""
    full = str(value)
    if len(full) <= NAME_CHARS:
        return html.escape(full)
    return f"<details><summary>{html.escape(short_name(full, NAME_CHARS))}</summary>{html.escape(full)}</details>"


def table_html(frame: pd.DataFrame, *, name_columns: tuple[str, ...] = ("name",)) -> str:
    """A frame as an HTML table in its own horizontally scrolling box (a wide table never widens
    the page), every header and cell escaped, URLs as links; long names fold away."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
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
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def attempt(sec: Section, what: str, build: Callable[[], Any]) -> Any:
    """Run one part of a section; an analysis that does not apply (a
    :class:`~trace_report.errors.TraceReportError`) becomes a note ``what: reason``."""
    try:
        return build()
    except TraceReportError as exc:
        sec.notes.append(f"{what}: {exc}")
        return None
