"""Tables drawn as Rich draws them, at the cost of string joins.

Rich lays out every cell through its renderable pipeline (measure, wrap, pad, crop), so
``trace-report roofline`` on a 1M-event trace spent most of its time drawing its rows, and
importing it is a visible part of every command's start. The
tables of :func:`trace_report.present.tables.render` are simple enough to draw directly: Rich's
default box (``box.HEAVY_HEAD``), one space of padding each side, header cells aligned to the
bottom and body cells to the top, each column justified left or right, cells already cut into
lines no wider than their column (:func:`trace_report.present.fit.fit_rows`), the title centred
above. :func:`draw` returns the same text as Rich for such a table (tests/present/test_box_table.py
compares them) and None for anything else (a line wider than its column, a table wider than the
console, tabs or control characters, a title that would wrap): the caller then uses Rich.
"""

from __future__ import annotations

import functools
import re
from types import ModuleType

_PLAIN = re.compile("[\x00-\x09\x0b-\x1f\x7f\x85\xa0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000]")
"""Characters Rich would expand or strip (tabs, control codes, spaces other than U+0020): such a
table is left to Rich."""


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes, as Rich counts them (``rich.cells.cell_len``; ASCII: its length)."""
    return len(text) if text.isascii() else _rich_cells().cell_len(text)


@functools.cache
def _rich_cells() -> ModuleType:
    import rich.cells  # its import is not free: only for text that is not ASCII

    return rich.cells


def draw(title: str | None, headers: list[str], rows: list[list[str]], right: list[bool],
         widths: list[int | None], console_width: int) -> str | None:
    """The table as Rich prints it (``Table(title=title, show_lines=False)``, columns with
    ``justify`` right where ``right``, ``overflow="fold"`` and ``width``; a Console of
    ``console_width`` without markup, emoji or highlighting), or None where it may differ."""
    if not headers or any(_PLAIN.search(h) for h in headers) or (title is not None and _PLAIN.search(title)):
        return None
    head = [h.split("\n") for h in headers]
    body = []
    for row in rows:
        if any(_PLAIN.search(c) for c in row):
            return None
        body.append([c.split("\n") for c in row])
    sizes = _sizes(head, body, widths)
    if sizes is None:
        return None
    total = sum(sizes) + 3 * len(sizes) + 1
    if total > console_width or (title is not None and cell_len(title) > total):
        return None
    out = []
    if title is not None:
        left = (total - cell_len(title)) // 2
        out.append(" " * left + title + " " * (total - left - cell_len(title)))
    out.append("┏" + "┳".join("━" * (w + 2) for w in sizes) + "┓")
    out += _lines(head, sizes, right, "┃", bottom=True)
    out.append("┡" + "╇".join("━" * (w + 2) for w in sizes) + "┩")
    for cells in body:
        out += _lines(cells, sizes, right, "│", bottom=False)
    out.append("└" + "┴".join("─" * (w + 2) for w in sizes) + "┘")
    return "\n".join(out) + "\n"


def _sizes(head: list[list[str]], body: list[list[list[str]]], widths: list[int | None]) -> list[int] | None:
    """Each column's content width: its given width (None where a line is wider), else its widest line."""
    sizes = []
    for i, w in enumerate(widths):
        widest = max([cell_len(x) for x in head[i]] + [cell_len(x) for cells in body for x in cells[i]])
        if w is not None and widest > w:
            return None
        sizes.append(widest if w is None else w)
    return sizes


def _lines(cells: list[list[str]], sizes: list[int], right: list[bool], edge: str, *, bottom: bool) -> list[str]:
    height = max(len(c) for c in cells)
    columns = []
    for lines, w, r in zip(cells, sizes, right, strict=True):
        pad = [""] * (height - len(lines))
        lines = pad + lines if bottom else lines + pad
        lines = [x.rstrip(" ") for x in lines] if r else lines  # Rich drops the spaces a right-justified line ends in
        columns.append([(" " * (w - cell_len(x)) + x) if r else (x + " " * (w - cell_len(x))) for x in lines])
    return [edge + " " + f" {edge} ".join(col[k] for col in columns) + f" {edge}" for k in range(height)]
