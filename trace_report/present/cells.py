"""Cells that hold lists, written as text for a format (the ``display`` of a declared command).

JSON keeps lists as arrays; table, Markdown and CSV get one text per cell.
"""

from __future__ import annotations

import pandas as pd

from trace_report.present import fit
from trace_report.present.format import Format

SEPARATOR = " | "
"""Between the kernels of a sequence in table, Markdown and CSV output (HTA joins its pattern
with ``|``); JSON keeps the list."""
SHORT_WIDTH = 36
"""Characters per kernel in a table's sequence (a sequence holds up to 8 names)."""


def kernel_text(frame: pd.DataFrame, fmt: Format, full_names: bool) -> pd.DataFrame:
    """``frame`` with its ``kernels`` lists as one text per row for every format but JSON: short
    kernel names (told apart across the whole table) in table and Markdown unless ``full_names``,
    the whole names in CSV."""
    if fmt is Format.json or "kernels" not in frame:
        return frame
    names = sorted({k for ks in frame["kernels"] for k in ks})
    short = dict(zip(names, names, strict=True))
    if fmt is not Format.csv and not full_names:
        short = dict(zip(names, fit.short_names(names, SHORT_WIDTH), strict=True))
    return frame.assign(kernels=[SEPARATOR.join(short[k] for k in ks) for ks in frame["kernels"]])
