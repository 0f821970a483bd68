"""The findings of ``trace-report advise`` for people: one block per finding as plain text (a
terminal of 80-120 columns) or as Markdown (a pull-request comment).

Both renderers are pure functions of the advise frame (columns ``rank`` or ``ranks``,
``finding``, ``title``, ``value``, ``unit``, ``threshold``, ``est_saving_ms_per_step``,
``saving_pct_of_step``, ``per``, ``evidence``, ``recommendation``, ``link``; see
``analyses/advise.py``) and its one-sentence verdict. Text wraps at word boundaries only
(:mod:`textwrap` with ``break_long_words=False`` and ``break_on_hyphens=False``): a word longer
than the line, such as a long URL, gets a line of its own, whole. CSV and JSON do not come here:
they keep every column through :func:`trace_report.present.tables.emit`.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from trace_report.analyses.advise.checks import PER_TIME
from trace_report.present import fit

if TYPE_CHECKING:
    import pandas as pd

MIN_WIDTH = 80
MAX_WIDTH = 120
"""The text blocks are laid out for a width between these, whatever the terminal's."""


def text_width() -> int:
    """The width for :func:`render_text`: the terminal's (``COLUMNS`` when piped, else 120),
    clamped to :data:`MIN_WIDTH`..:data:`MAX_WIDTH`."""
    return min(max(fit.table_width(), MIN_WIDTH), MAX_WIDTH)


# -- values --------------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    """None, NaN, pd.NA or pd.NaT (checked by name: no pandas import)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, (str, bytes, list, tuple, dict)):
        return False
    try:
        return bool(value != value)  # NaN is the one value not equal to itself
    except (TypeError, ValueError):  # an array of ranks: not one missing value
        return False


def _text(value: Any) -> str:
    """A text cell: '' for None/NaN, else the string stripped."""
    return "" if _missing(value) else str(value).strip()


def _float(value: Any) -> float | None:
    """A number cell as a finite float, None when missing or not a number."""
    if _missing(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _strip_zeros(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def number(value: float) -> str:
    """``value`` for people with 3-4 significant digits: ``1,234``, ``123``, ``84.2``, ``41``,
    ``2``, ``1.5``, ``0.123``, ``0.00123``."""
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return _strip_zeros(f"{value:.1f}")
    if size >= 1:
        return _strip_zeros(f"{value:.2f}")
    if size == 0:
        return "0"
    return _strip_zeros(f"{value:.3g}") if "e" not in f"{value:.3g}" else f"{value:.2e}"


def milliseconds(value: float) -> str:
    """A duration in ms for people: one decimal from 10 ms on (``12.3``, ``1,234.5``), else 3
    significant digits (``2.46``, ``0.3``, ``0.0123``)."""
    return f"{value:,.1f}" if abs(value) >= 10 else number(value)


def _with_unit(value: float, unit: str) -> str:
    """``84.2% of GPU time`` (a unit starting with ``%`` sticks to the number), ``340 kernels per
    step``; no unit -> the number alone."""
    if not unit:
        return number(value)
    return f"{number(value)}{unit}" if unit.startswith("%") else f"{number(value)} {unit}"


def _threshold(value: float, unit: str) -> str:
    """The threshold in the unit's first token when that is ``%`` (``2%``), else the bare number
    (the unit is on the same line, just before)."""
    return f"{number(value)}%" if unit.startswith("%") else number(value)


def ranks_label(value: Any) -> str:
    """``rank 0``; a list of ranks as ``ranks 0-3, 5`` (runs of consecutive ranks as ranges); ''
    when there is no rank."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ""
        return f"ranks {text}" if "," in text else f"rank {text}"
    if isinstance(value, Iterable):
        ranks = sorted({int(r) for r in value if _float(r) is not None})
        if not ranks:
            return ""
        if len(ranks) == 1:
            return f"rank {ranks[0]}"
        spans: list[str] = []
        start = prev = ranks[0]
        for r in [*ranks[1:], None]:
            if r is not None and r == prev + 1:
                prev = r
                continue
            spans.append(str(start) if start == prev else f"{start}-{prev}")
            if r is not None:
                start = prev = r
        return "ranks " + ", ".join(spans)
    number_ = _float(value)
    if number_ is None:
        return ""
    return f"rank {int(number_)}" if number_.is_integer() else f"rank {value}"


# -- one finding ---------------------------------------------------------------------------------

def _rows(frame: pd.DataFrame) -> list[Mapping[str, Any]]:
    return list(frame.to_dict(orient="records"))


def _heading(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """(title, finding id, ranks label) of a row; the title falls back to the id."""
    finding = _text(row.get("finding"))
    title = _text(row.get("title")) or finding
    who = ranks_label(row["ranks"] if "ranks" in row else row.get("rank"))
    return title, finding, who


def measure_line(row: Mapping[str, Any]) -> str:
    """``84.2% of GPU time (threshold 2%) · saves ~12.3 ms/step (41% of step time)`` (``ms/iteration``,
    ``ms/trace`` by the row's ``per``); the parts
    whose numbers are missing (no time saving, e.g. memory) are left out; '' when all are."""
    return " · ".join(_measure_parts(row))


def _measure_parts(row: Mapping[str, Any]) -> list[str]:
    """The value with its threshold, and the saving: the parts of :func:`measure_line`."""
    unit = _text(row.get("unit"))
    value = _float(row.get("value"))
    threshold = _float(row.get("threshold"))
    saving = _float(row.get("est_saving_ms_per_step"))
    saving_pct = _float(row.get("saving_pct_of_step"))
    parts = []
    if value is not None:
        measured = _with_unit(value, unit)
        if threshold is not None:
            measured += f" (threshold {_threshold(threshold, unit)})"
        parts.append(measured)
    elif threshold is not None:
        parts.append(f"threshold {_with_unit(threshold, unit)}")
    if saving is not None:
        per = _text(row.get("per")) or "step"  # a frame from before the column: per step
        saves = f"saves ~{milliseconds(saving)} ms/{per}"
        if saving_pct is not None:
            saves += f" ({number(saving_pct)}% of {PER_TIME.get(per, 'step time')})"
        parts.append(saves)
    return parts


# -- text ----------------------------------------------------------------------------------------

_GLUE = "\x00"
"""Stands for a space that must not break a line (``— ranks 0-3, 5`` stays whole)."""


def _glued(text: str) -> str:
    return text.replace(" ", _GLUE)


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` wrapped at spaces only (not at :data:`_GLUE`): ``first`` opens the first line,
    ``rest`` the others; a word longer than the line stands alone on its line, whole."""
    lines = textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                          break_long_words=False, break_on_hyphens=False) or [first.rstrip()]
    return [line.replace(_GLUE, " ") for line in lines]


def _measure_lines(row: Mapping[str, Any], width: int, indent: str) -> list[str]:
    """:func:`measure_line` on one line when it fits, else each of its parts on a line of its own."""
    parts = _measure_parts(row)
    line = indent + " · ".join(parts)
    if len(line) <= width:
        return [line] if parts else []
    return [wrapped for part in parts for wrapped in _wrap(part, width, indent, indent)]


def _labelled(label: str, text: str, width: int, indent: str) -> list[str]:
    """``Evidence: ...`` with the continuation lines under the text after the label."""
    head = f"{indent}{label} "
    return _wrap(text, width, head, " " * len(head))


def _link_lines(url: str, width: int, indent: str) -> list[str]:
    """``See: URL`` on one line when it fits; else ``See:`` and the URL alone on the next line."""
    head = f"{indent}See: "
    if len(head) + len(url) <= width:
        return [head + url]
    return [head.rstrip(), indent + url]


def _block_text(index: int, row: Mapping[str, Any], width: int, indent: str) -> list[str]:
    title, finding, who = _heading(row)
    head = title if not finding or finding == title else f"{title} ({finding})"
    if who:
        head += " " + _glued(f"— {who}")
    number_ = f"{index}."
    lines = _wrap(head, width, number_.ljust(len(indent)), indent)
    lines += _measure_lines(row, width, indent)
    evidence = _text(row.get("evidence"))
    if evidence:
        lines += _labelled("Evidence:", evidence, width, indent)
    recommendation = _text(row.get("recommendation"))
    if recommendation:
        lines += _labelled("Do:", recommendation, width, indent)
    link = _text(row.get("link"))
    if link:
        lines += _link_lines(link, width, indent)
    return lines


def render_text(frame: pd.DataFrame, verdict: str, width: int) -> str:
    """The findings as plain text for a terminal ``width`` columns wide: the verdict first (wrapped),
    then one block per finding in frame order, a blank line between (here at 100 columns)::

        1. Pageable host<->device copies (pageable_memcpy) — rank 0
           84.2% of GPU time (threshold 2%) · saves ~12.3 ms/step (41% of step time)
           Evidence: 37 copies per step, 24.6 ms per step (Memcpy HtoD (Pageable -> Device)); the GPU is
                     idle 0.3 ms per step during them
           Do: Allocate the host tensors in pinned memory: DataLoader(pin_memory=True), then .to(device,
               non_blocking=True)
           See: https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers

    Lines break at spaces only, so no word is ever cut; a word longer than the line (a long URL)
    stands alone on its line and is the only thing wider than ``width``; ``— ranks 0-3, 5`` is never
    split; the measure line too wide for ``width`` gives each of its parts a line. Missing numbers (a
    finding with no time saving) are left out, never printed as ``nan``. Ends with a newline."""
    rows = _rows(frame)
    indent = " " * (len(f"{len(rows)}.") + 1)
    out: list[str] = []
    verdict = (verdict or "").strip()
    if verdict:
        out += _wrap(verdict, width, "", "")
    for i, row in enumerate(rows, start=1):
        if out:
            out.append("")
        out += _block_text(i, row, width, indent)
    return "\n".join(out) + "\n" if out else ""


# -- markdown ------------------------------------------------------------------------------------

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_MARKUP = re.compile(r"([\\`*])")


def markdown_text(text: str) -> str:
    """Prose for Markdown: what a renderer would take for an HTML tag (``<float>`` in a kernel
    name) or an entity becomes an entity, and ``\\``, `````, ``*`` are escaped; ``host<->device``
    and ``->`` stay as they are. Line breaks become spaces."""
    text = " ".join(text.split())
    text = _MARKUP.sub(r"\\\1", text)
    text = _ENTITY.sub("&amp;", text)
    return _TAG_START.sub("&lt;", text)


def _link_markdown(url: str) -> str:
    """``[pytorch.org/docs/...](https://pytorch.org/docs/...)``: the URL without its scheme as the
    text; a URL with spaces or parentheses goes in ``<...>``."""
    label = re.sub(r"^[a-z][a-z0-9+.-]*://", "", url, flags=re.I).rstrip("/") or url
    label = label.replace("[", "\\[").replace("]", "\\]")
    target = f"<{url}>" if re.search(r"[\s()<>]", url) else url
    return f"[{markdown_text(label)}]({target})"


def _block_markdown(index: int, row: Mapping[str, Any]) -> list[str]:
    title, finding, who = _heading(row)
    head = f"### {index}. {markdown_text(title)}"
    if finding and finding != title:
        head += f" (`{finding}`)"
    if who:
        head += f" — {who}"
    lines = [head, ""]
    measure = measure_line(row)
    if measure:
        lines += [markdown_text(measure), ""]
    items = []
    evidence = _text(row.get("evidence"))
    if evidence:
        items.append(f"- **Evidence:** {markdown_text(evidence)}")
    recommendation = _text(row.get("recommendation"))
    if recommendation:
        items.append(f"- **Do:** {markdown_text(recommendation)}")
    link = _text(row.get("link"))
    if link:
        items.append(f"- **See:** {_link_markdown(link)}")
    if items:
        lines += [*items, ""]
    return lines


def render_markdown(frame: pd.DataFrame, verdict: str) -> str:
    """The findings as a pull-request comment: a ``## Performance findings`` heading, the verdict
    in bold, then one ``### N. Title (`finding`) — rank R`` section per finding in frame order with
    the measured value, threshold and saving on one line and Evidence / Do / See as a list (links
    as ``[text](url)``). No tables: long prose stays readable. Ends with a newline."""
    lines = ["## Performance findings", ""]
    verdict = (verdict or "").strip()
    if verdict:
        lines += [f"**{markdown_text(verdict)}**", ""]
    for i, row in enumerate(_rows(frame), start=1):
        lines += _block_markdown(i, row)
    return "\n".join(lines).rstrip("\n") + "\n"
