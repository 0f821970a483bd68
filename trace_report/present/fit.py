"""Fitting a text table into the terminal: short kernel names, column widths, at most two lines
per row. Plain Python on lists of cell strings (no pandas), used by :mod:`present.tables`.

- Width: the terminal's on a TTY; for piped output ``COLUMNS`` when set (as ``ls`` and ``git``
  honour it), else :data:`PIPE_WIDTH`.
- Names: the name columns (:data:`NAME_COLUMNS`) show :func:`short_names` unless
  ``--full-names``: generic parts go first (namespaces, ``std::array<…>``, literal template
  arguments, wrappers), the kernel function and its innermost functor stay
  (``vectorized_elementwise_kernel<MulFunctor<float>>``), and different names never share a label.
- Rows: when the table is wider than the width, headers wrap at ``_`` and the text columns share
  what the numbers leave (numbers never wrap: a table whose numbers alone do not fit is wider
  than the width rather than taller; a name column keeps :data:`MIN_NAME_WIDTH`); a name longer
  than :data:`MAX_LINES` lines of its column is shortened to them again, with its column
  (:func:`fit_rows`), another cell is cut in the middle with ``…``; both fold to whole lines.
"""

from __future__ import annotations

import os
import re
import sys

from trace_report.formats.names import PREFERRED, cut_form, cut_name, name_forms

NAME_COLUMNS = ("name", "kernel", "kernel_name")
PIPE_WIDTH = 120  # piped output 600 columns wide was unreadable in a pager
MAX_LINES = 2
MIN_TEXT_WIDTH = 12
MIN_NAME_WIDTH = 30
"""A name column is at least this wide (two lines: a 58-character short name), even when that
makes a table of many numbers (``compare``) wider than the terminal."""
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


def short_names(names: list[str], width: int | None = None, *, identity: bool = False,
                avoid: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Each name as a label of at most ``width`` characters (:data:`NAME_WIDTH` when None),
    shortened together: different names get different labels, equal names the same one.

    Each name takes the most detailed of its forms that fits (:func:`name_forms`: namespaces,
    scaffolding and literal template arguments, wrappers go first, so that
    ``vectorized_elementwise_kernel<MulFunctor<float>>`` and ``gpuKernel<calc_energy>`` keep the
    words that tell kernels apart); a form still too long is cut in its kernel function before its
    arguments (:func:`cut_name`). Names that come out alike are told apart with the smallest part
    that differs: a more detailed form when it fits, else the differing words kept in the cut
    (:func:`_window`), else `` [2]``, `` [3]``... suffixes. ``identity``: never cut the innermost
    argument (a headline), even past ``width``. No label is one of ``avoid`` (other cells of
    the column)."""
    width = NAME_WIDTH if width is None else max(width, 8)
    distinct = list(dict.fromkeys(n for n in names if n))
    labels = _labels(distinct, width, identity, set(avoid))
    return [labels[n] if n else n for n in names]


NAME_WIDTH = 100
"""Characters of a short name where no width is given (Markdown, a table before fitting)."""


def _labels(names: list[str], width: int, identity: bool, avoid: set[str]) -> dict[str, str]:
    forms = {n: name_forms(n) for n in names}
    label: dict[str, str] = {}
    for n in names:
        k = next((k for k in PREFERRED if len(forms[n][k]) <= width), None)
        label[n] = cut_name(n, width, identity=identity) if k is None else forms[n][k]
    for _ in range(3):
        groups = _collisions(label, avoid)
        if not groups:
            return label
        left = [g for g in groups if not _repair(g, forms, label, width, identity, avoid) and len(g) > 1]
        windowed = [n for g in left for n in g]  # told apart from each other, across groups
        for group in left:
            apart = _apart(group, forms)
            k = apart[0] if apart else 0  # the least detailed form on which they differ
            texts = {n: forms[n][k] for n in windowed}
            bare = {n: _QUALIFIER.sub("", t) for n, t in texts.items()}  # cutlass::Kernel<…> -> Kernel<…>
            texts = bare if len(set(bare.values())) == len(set(texts.values())) else texts
            for n in group:
                must = [w for w in re.findall(r"\w+", forms[n][-1]) if len(w) > 3]
                label[n] = _window(texts[n], [t for m, t in texts.items() if m != n], width, must[-1:])
    taken = set(avoid)
    for n in names:  # the last resort: numbered
        text, i = label[n], 1
        while text in taken:
            i += 1
            text = _cut(label[n], width - len(f" [{i}]")) + f" [{i}]"
        label[n] = text
        taken.add(text)
    return label


def _collisions(label: dict[str, str], avoid: set[str]) -> list[list[str]]:
    """Names whose labels are alike, or one of ``avoid``."""
    by: dict[str, list[str]] = {}
    for n, text in label.items():
        by.setdefault(text, []).append(n)
    return [g for t, g in by.items() if len(g) > 1 or t in avoid]


def _apart(group: list[str], forms: dict[str, tuple[str, ...]]) -> list[int]:
    """The forms (least detailed first) on which the names of ``group`` all differ."""
    return [k for k in range(len(forms[group[0]]) - 1, 0, -1) if len({forms[n][k] for n in group}) == len(group)]


def _repair(group: list[str], forms: dict[str, tuple[str, ...]], label: dict[str, str], width: int,
            identity: bool, avoid: set[str]) -> bool:
    """Labels for names that came out alike: the shortest of their forms on which they all differ
    and fit; else the least detailed form on which they differ, cut (:func:`cut_form`) when the
    cuts still differ. False when neither does (the caller keeps their differing words,
    :func:`_window`)."""
    taken = {t for n, t in label.items() if n not in group} | avoid
    apart = _apart(group, forms)
    fits = [k for k in apart if all(len(forms[n][k]) <= width for n in group)
            and not taken & {forms[n][k] for n in group}]
    if fits:
        k = min(fits, key=lambda k: sum(len(forms[n][k]) for n in group))
        for n in group:
            label[n] = forms[n][k]
        return True
    for k in apart:
        cut = [cut_form(forms[n][k], width, identity=identity) for n in group]
        if len(set(cut)) == len(group) and not taken & set(cut) and (identity or max(map(len, cut)) <= width):
            for n, t in zip(group, cut, strict=True):
                label[n] = t
            return True
    return False


_QUALIFIER = re.compile(r"^(?:\w+::)+(?=\w+<)")


_TOKEN = re.compile(r"[A-Za-z0-9]+|.", re.S)
_FINE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+|.", re.S)  # CamelCase words and numbers


def _window(text: str, others: list[str], width: int, must: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` cut to ``width`` characters keeping, for each of ``others`` (the most alike
    first, while there is room), the word where it first differs from it (a run of letters and
    digits, ``tilesize128x64x64``, or in a long one its CamelCase part or number; with the word
    after a differing ``_`` or bracket, ``_nocast``, and the mark before a number, ``#12``), then
    the ``must`` words (the innermost argument), the rest of the room going to its start and
    end; gaps marked ``…``."""
    if len(text) <= width:
        return text
    coarse = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    fine = [(m.start(), m.end()) for m in _FINE.finditer(text)]
    found: dict[tuple[int, int], int] = {}
    for other in others:
        p = min(len(os.path.commonprefix([text, other])), len(text) - 1)
        toks = coarse
        i = next(k for k, (a, b) in enumerate(toks) if a <= p < b)
        if toks[i][1] - toks[i][0] > width // 3:  # a long word: the CamelCase part or number in it
            toks = fine
            i = next(k for k, (a, b) in enumerate(toks) if a <= p < b)
        a, b = toks[i]
        if text[a:b].isdigit() and i:
            a = toks[i - 1][0]
        if not text[a].isalnum() and i + 1 < len(toks):
            b = toks[i + 1][1]
        found[(a, b)] = max(found.get((a, b), 0), p)
    keep = sorted(found, key=lambda s: -found[s])  # the most alike names' differences first
    keep += [(k, k + len(w)) for w in must if (k := text.rfind(w)) >= 0]
    spans: list[list[int]] = []
    for span in keep:
        trial = _merge([*map(tuple, spans), span])
        if sum(b - a for a, b in trial) + len(trial) + 1 <= width:
            spans = trial
    if not spans:
        return _cut(text, width)
    kept = [False] * len(text)
    for a, b in spans:
        kept[a:b] = [True] * (b - a)
    ends = [0, len(text) - 1]  # the next character to keep from the start and from the end
    turn = 0
    while True:  # the room left goes to the start and the end, two characters to one
        side = 0 if turn % 3 < 2 else 1
        for _ in range(2):
            while 0 <= ends[side] < len(text) and kept[ends[side]]:
                ends[side] += 1 if side == 0 else -1
            if 0 <= ends[side] < len(text):
                break
            side = 1 - side
        else:
            break
        kept[ends[side]] = True
        if _rendered(kept) > width:
            kept[ends[side]] = False
            break
        turn += 1
    out = "".join(ch if keep else ("…" if i == 0 or kept[i - 1] else "") for i, (ch, keep) in enumerate(
        zip(text, kept, strict=True)))
    return out if len(out) <= width else _cut(out, width)


def _rendered(kept: list[bool]) -> int:
    """Characters of a text showing ``kept`` ones, each run of the others one ``…``."""
    return sum(kept) + sum(1 for i, k in enumerate(kept) if not k and (i == 0 or kept[i - 1]))


def _merge(spans: list[tuple[int, int]]) -> list[list[int]]:
    """Spans sorted and merged where they touch or one character apart."""
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
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
    floor = [min(natural[i], MIN_NAME_WIDTH if headers[i] in NAME_COLUMNS else MIN_TEXT_WIDTH)
             for i in range(len(headers))]
    fixed = [max(c, len(h)) if num else 0 for c, h, num in zip(cells, headers, numeric, strict=True)]
    if sum(fixed) + overhead + sum(floor[i] for i in text) > width:  # headers wrap only when they must
        fixed = [max(c, _header_min(h)) if num else 0 for c, h, num in zip(cells, headers, numeric, strict=True)]
    budget = width - overhead - sum(fixed)
    out: list[int | None] = [f if num else None for f, num in zip(fixed, numeric, strict=True)]
    pending = sorted(text, key=lambda i: natural[i])
    while pending:
        share = budget // len(pending)
        i = pending.pop(0)
        out[i] = natural[i] if natural[i] <= SHORT_TEXT else min(natural[i], max(floor[i], MIN_TEXT_WIDTH, share))
        budget -= out[i]
    return out, max(width, overhead + sum(w or 0 for w in out))


def fit_rows(rows: list[list[str]], widths: list[int | None], lines: int | None = MAX_LINES,
             headers: list[str] | None = None) -> list[list[str]]:
    """Each cell of a column with a width cut to ``lines`` lines of that width and folded (None:
    folded, never cut). The cells of a name column (``headers`` in :data:`NAME_COLUMNS`) that do
    not fit are shortened together (:func:`short_names`, which keeps what tells kernels apart),
    the others cut in the middle."""
    names = [h in NAME_COLUMNS for h in headers] if headers is not None else [False] * len(widths)
    fitted = [list(row) for row in rows]
    for i, w in enumerate(widths):
        if names[i] and w is not None and lines is not None:
            column = [row[i] for row in rows]
            for row, text in zip(fitted, _fit_names(column, w * lines - lines), strict=True):
                row[i] = text
    out = []
    for row in fitted:
        cells = []
        for text, w in zip(row, widths, strict=True):
            if w is None or len(text) <= w:
                cells.append(text)
            else:
                cells.append(_fold(text if lines is None else _cut(text, w * lines - lines), w, lines))
        out.append(cells)
    return out


def _fit_names(column: list[str], limit: int) -> list[str]:
    """The cells longer than ``limit`` shortened to it, apart from each other and from the cells
    that fit (kept as they are)."""
    long = [c for c in dict.fromkeys(column) if len(c) > limit]
    if not long:
        return column
    kept = set(column) - set(long)
    labels = dict(zip(long, short_names(long, limit, avoid=kept), strict=True))
    return [labels.get(c, c) for c in column]
