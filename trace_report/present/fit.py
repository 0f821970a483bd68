"""Fitting a text table into the terminal: short kernel names, column widths, at most two lines
per row. Plain Python on lists of cell strings (no pandas), used by :mod:`present.tables`.

- Width: the terminal's on a TTY; for piped output ``COLUMNS`` when set (as ``ls`` and ``git``
  honour it), else :data:`PIPE_WIDTH`.
- Names: the name columns (:data:`NAME_COLUMNS`) show :func:`short_kernel_name` unless
  ``--full-names``; different names that shorten alike get `` [2]``, `` [3]``... suffixes.
- Rows: when the table is wider than the width, headers wrap at ``_`` and the text columns share
  what the numbers leave (numbers never wrap: a table whose numbers alone do not fit is wider
  than the width rather than taller); a cell longer than :data:`MAX_LINES` lines of its column is cut in
  the middle with ``…`` (the end often tells kernels apart) and folded to whole lines.
"""

from __future__ import annotations

import os
import re
import sys

from trace_report.formats.names import short_kernel_name

NAME_COLUMNS = ("name", "kernel", "kernel_name")
PIPE_WIDTH = 200
MAX_LINES = 2
MIN_TEXT_WIDTH = 12
SHORT_TEXT = 20
"""Text columns at most this wide (regions, statuses, kinds) never wrap."""


def table_width() -> int:
    """Columns available: the terminal's on a TTY, else ``COLUMNS``, else :data:`PIPE_WIDTH`."""
    if sys.stdout.isatty():
        return os.get_terminal_size(sys.stdout.fileno()).columns
    try:
        value = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return PIPE_WIDTH
    return value if value >= 20 else PIPE_WIDTH


_QUANTITY = re.compile(r"^-?[0-9][0-9.,]*(e[+-]?[0-9]+)? ?[PTGMkmµn]?[A-Za-z/]{0,8}$")


def is_quantity(cells: list[str]) -> bool:
    """Whether a text column holds numbers with SI prefixes (``624 T``, ``11.2 µs``): laid out as
    numbers (right-aligned, never wrapped)."""
    filled = [c for c in cells if c]
    return bool(filled) and all(_QUANTITY.match(c) for c in filled)


def short_names(names: list[str]) -> list[str]:
    """:func:`short_kernel_name` of each name, made unique with `` [2]``, `` [3]``... suffixes."""
    seen: dict[str, int] = {}
    short: dict[str, str] = {}
    out = []
    for name in names:
        if name not in short:
            label = short_kernel_name(name) if name else name
            seen[label] = seen.get(label, 0) + 1
            short[name] = label if seen[label] == 1 else f"{label} [{seen[label]}]"
        out.append(short[name])
    return out


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters in the middle, marked ``…``."""
    if len(text) <= limit:
        return text
    head = (2 * limit) // 3
    return text[:head] + "…" + text[len(text) - (limit - head - 1):]


def _fold(text: str, width: int, max_lines: int | None = MAX_LINES) -> str:
    """``text`` as lines of at most ``width`` characters: at spaces where a line would be at
    least half full, else hard cut; hard cuts only when breaking at spaces needs more than
    ``max_lines`` lines (None: any number of lines)."""
    lines, rest = [], text
    while len(rest) > width:
        cut = rest.rfind(" ", 0, width + 1)
        cut = cut if cut >= width // 2 else width
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if max_lines is not None and len(lines) + 1 > max_lines:
        lines, rest = [text[k:k + width] for k in range(0, len(text) - width, width)], ""
        rest = text[len(lines) * width:]
    return "\n".join([*lines, rest])


def header_lines(header: str, width: int) -> str:
    """A column header wrapped at ``_`` (never inside a word) into lines of about ``width``."""
    chunks = [c + "_" for c in header.split("_")[:-1]] + [header.split("_")[-1]]
    lines = [""]
    for chunk in chunks:
        if lines[-1] and len(lines[-1]) + len(chunk) > width:
            lines.append("")
        lines[-1] += chunk
    return "\n".join(lines)


def _header_min(header: str) -> int:
    """The narrowest a header can be when wrapped at ``_`` into at most :data:`MAX_LINES` lines."""
    w = max(len(c) for c in header.split("_")) + 1
    while w < len(header) and header_lines(header, w).count("\n") >= MAX_LINES:
        w += 1
    return min(w, len(header))


def fit_widths(headers: list[str], rows: list[list[str]], numeric: list[bool],
               width: int) -> tuple[list[int | None], int]:
    """The width of each column (None = as wide as it needs) and the table's width.

    Numbers never wrap: a numeric column is as wide as its widest cell and its header (the
    header wraps at ``_`` when the numbers would not fit otherwise). Text columns share the rest
    (at least :data:`MIN_TEXT_WIDTH` each), the narrow ones keeping theirs (water-filling). A
    table whose numbers alone do not fit is wider than ``width`` rather than taller."""
    cells = [max((max((len(line) for line in r[i].split("\n")), default=0) for r in rows), default=0)
             for i in range(len(headers))]
    natural = [max(c, len(h)) for c, h in zip(cells, headers, strict=True)]
    overhead = 3 * len(headers) + 1  # rich: a border and two spaces of padding per column
    if sum(natural) + overhead <= width:
        return [None] * len(headers), width
    text = [i for i, num in enumerate(numeric) if not num]
    fixed = [max(c, len(h)) if num else 0 for c, h, num in zip(cells, headers, numeric, strict=True)]
    if sum(fixed) + overhead + MIN_TEXT_WIDTH * len(text) > width:  # headers wrap only when they must
        fixed = [max(c, _header_min(h)) if num else 0 for c, h, num in zip(cells, headers, numeric, strict=True)]
    budget = width - overhead - sum(fixed)
    out: list[int | None] = [f if num else None for f, num in zip(fixed, numeric, strict=True)]
    pending = sorted(text, key=lambda i: natural[i])
    while pending:
        share = max(MIN_TEXT_WIDTH, budget // len(pending))
        i = pending.pop(0)
        out[i] = natural[i] if natural[i] <= SHORT_TEXT else min(natural[i], share)
        budget -= out[i]
    return out, max(width, overhead + sum(w or 0 for w in out))


def fit_rows(rows: list[list[str]], widths: list[int | None], lines: int | None = MAX_LINES) -> list[list[str]]:
    """Each cell of a column with a width cut to ``lines`` lines of that width and folded (None:
    folded, never cut)."""
    out = []
    for row in rows:
        cells = []
        for text, w in zip(row, widths, strict=True):
            if w is None or len(text) <= w:
                cells.append(text)
            else:
                cells.append(_fold(text if lines is None else _cut(text, w * lines - lines), w, lines))
        out.append(cells)
    return out
