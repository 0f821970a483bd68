"""Row output shared by every command: table, csv, json, markdown (docs/cli.md).

Prints a pandas DataFrame or a :class:`~trace_report.store.rows.Rows` (a result fetched straight
from DuckDB) the same way; this module does not import pandas, so a command whose analysis
returns rows starts without it.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

from trace_report.errors import InputError
from trace_report.present import box_table, fit
from trace_report.present.format import Format, OutputOptions
from trace_report.present.format import si as format_si
from trace_report.present.safe_text import csv_text, markdown_text, terminal_text
from trace_report.store.rows import Rows

if TYPE_CHECKING:
    import pandas as pd

Printable: TypeAlias = "pd.DataFrame | Rows"
"""What :func:`emit` prints: a pandas DataFrame or rows fetched from DuckDB."""

_PANDAS_MISSING = ("NAType", "NaTType")



def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if type(value).__name__ in _PANDAS_MISSING:  # pd.NA, pd.NaT (checked by name: no pandas import)
        return None
    if isinstance(value, Decimal):
        return _clean(float(value))
    if isinstance(value, dict):  # DuckDB STRUCT / MAP
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):  # DuckDB LIST
        return [_clean(v) for v in value]
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:  # a LIST column through pandas: ndarray
        return [_clean(v) for v in value.tolist()]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (ValueError, AttributeError):
            return value
    return value


def records(frame: Printable) -> list[dict[str, Any]]:
    """Rows as plain Python dicts (NaN -> None, numpy scalars -> Python)."""
    dicts = frame.records() if isinstance(frame, Rows) else frame.to_dict(orient="records")
    return [{k: _clean(v) for k, v in row.items()} for row in dicts]


def _columns(frame: Printable) -> list[str]:
    return list(frame.columns)


def _tuples(frame: Printable) -> Iterable[tuple[Any, ...]]:
    return iter(frame) if isinstance(frame, Rows) else frame.itertuples(index=False)


def _numeric(frame: Printable) -> list[bool]:
    if isinstance(frame, Rows):
        return frame.numeric()
    from pandas.api.types import is_numeric_dtype  # a frame's caller has loaded pandas already

    return [bool(is_numeric_dtype(frame[c])) for c in frame.columns]


def _csv_cell(value: Any, raw: bool = False) -> Any:
    """A CSV cell: empty for None/NaN, LIST and STRUCT values as JSON text (``[1, 2, 3]``,
    ``{"a": 1}``), never a numpy repr (``[1 2 3]``); text through :func:`csv_text` (no formula,
    no terminal control) unless ``raw``. Numbers stay numbers (``-1.5``)."""
    value = _clean(value)
    if value is None:
        return ""
    if isinstance(value, list | dict):
        value = json.dumps(value, default=str)
    return value if raw or not isinstance(value, str) else csv_text(value)


def _csv(frame: Printable, raw: bool = False) -> str:
    if not isinstance(frame, Rows):
        text = [c for c in frame.columns if frame[c].dtype == object or str(frame[c].dtype) in ("string", "str")]
        if text:
            frame = frame.assign(**{c: frame[c].map(lambda v: _csv_cell(v, raw)) for c in text})
        header = list(frame.columns) if raw else [csv_text(str(c)) for c in frame.columns]
        quoting = _quoting(v for c in text for v in frame[c])
        return str(frame.to_csv(index=False, header=header, quoting=quoting))
    rows = [[_csv_cell(v, raw) for v in row] for row in frame]
    buf = io.StringIO()  # as pandas' to_csv writes them: repr of floats, empty for None/NaN
    writer = csv.writer(buf, lineterminator="\n", quoting=_quoting(v for row in rows for v in row))
    writer.writerow(frame.columns if raw else [csv_text(str(c)) for c in frame.columns])
    writer.writerows(rows)
    return buf.getvalue()


def _quoting(cells: Iterable[Any]) -> int:
    """Every text cell quoted when one holds a carriage return (``--raw`` only): the csv module
    quotes a field for the characters of its line terminator, ``\\n`` here, so a lone ``\\r``
    would end the row for a reader."""
    cr = any(isinstance(v, str) and "\r" in v for v in cells)
    return csv.QUOTE_NONNUMERIC if cr else csv.QUOTE_MINIMAL


_IEC = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def _iec(value: float) -> str:
    """Bytes for people: ``2707847680`` -> ``'2.52 GiB'`` (binary prefixes, 3 significant digits)."""
    for scale, unit in _IEC:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def _plain(value: float, digits: int = 4) -> str:
    """``digits`` significant digits, thousands separated, never an exponent below 1e15:
    ``80756.0`` -> ``'80,756'``, ``1.23456`` -> ``'1.235'``, ``0.000123`` -> ``'0.000123'``."""
    if abs(value) >= 1e15:
        return f"{value:.6g}"
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    text = f"{value:.{digits}g}"
    if "e" in text:  # tiny: as a decimal
        return f"{value:.{digits - 1 - math.floor(math.log10(abs(value)))}f}".rstrip("0")
    return text


def _fmt_cell(value: Any, column: str = "") -> str:
    """A table or Markdown cell for people, by the column's unit (CSV and JSON keep raw numbers):
    ``*bytes`` in KiB/MiB/GiB, ``*flop`` and ``*_per_s`` rates with SI prefixes, percentages with 3
    significant digits, every other number with 4 (times in µs of µs-resolution traces then
    show no made-up decimals: ``80,756``, not ``80,756.000``)."""
    value = _clean(value)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else terminal_text(str(value))
    col = column.lower()
    if col == "bytes" or col.endswith("_bytes"):
        return _iec(float(value))
    if col.endswith("bytes_per_s"):
        return format_si(float(value), "B/s")
    if (col == "flop" or col.endswith("_flop")) or (col.endswith("flop_per_s") and not col.startswith("tflop")):
        return format_si(float(value), "FLOP/s" if col.endswith("_per_s") else "FLOP")
    if isinstance(value, int):
        return str(value)
    if "pct" in col or col.endswith("_ratio") or col.endswith("_share"):
        return "<0.001" if 0 < abs(value) < 0.001 else (f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}")
    return _plain(value)


def markdown_cell(text: str) -> str:
    """One Markdown table cell of our own text (a header, a formatted number, a path): HTML's ``&``,
    ``<``, ``>`` as entities (kernel names are full of C++ templates, which a renderer would take
    for tags), ``|`` escaped, line breaks as ``<br>``, controls as escapes (:func:`terminal_text`).
    Trace text goes through :func:`~trace_report.present.safe_text.markdown_text`."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return terminal_text(text.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>"))


def _markdown_value(value: Any, column: str) -> str:
    """A Markdown body cell: text from the trace escaped whole (:func:`markdown_text`), numbers
    formatted (:func:`_fmt_cell`)."""
    value = _clean(value)
    return markdown_text(value) if isinstance(value, str) else markdown_cell(_fmt_cell(value, column))


def render(frame: Printable, fmt: Format, title: str | None = None, *, full_names: bool = False,
           keep_order: bool = False, raw: bool = False) -> str:
    """The text of ``frame`` in ``fmt``. JSON is an array of objects keyed by column name.

    Text from the trace is made safe (:mod:`~trace_report.present.safe_text`): JSON escapes it,
    a table shows control and bidirectional characters as escapes, CSV puts an apostrophe before
    a leading formula character, Markdown escapes its punctuation; ``raw`` leaves CSV text as
    the trace has it.

    Table and Markdown show short kernel names unless ``full_names`` (:mod:`present.fit`); a
    table fits the terminal width (``COLUMNS`` when piped), at most two lines per row, with the
    name column last unless ``keep_order``; ``full_names`` rows may take more lines."""
    if fmt is Format.json:
        return json.dumps(records(frame), indent=2, default=str) + "\n"
    if fmt is Format.csv:
        return _csv(frame, raw)
    if not full_names:
        frame = _short_names(frame)
    if fmt is Format.markdown:
        head = "| " + " | ".join(markdown_cell(str(c)) for c in _columns(frame)) + " |"
        sep = "|" + "|".join("---" for _ in _columns(frame)) + "|"
        body = [
            "| " + " | ".join(_markdown_value(v, str(c)) for v, c in zip(row, _columns(frame), strict=True))
            + " |" for row in _tuples(frame)
        ]
        return "\n".join([head, sep, *body]) + "\n"
    columns = _columns(frame)
    if "name" in columns and not keep_order:  # long kernel names read best last, as in `nsys stats`
        columns = [c for c in columns if c != "name"] + ["name"]
        frame = frame.select(columns) if isinstance(frame, Rows) else frame[columns]
    headers = [terminal_text(str(c)) for c in columns]
    title = None if title is None else terminal_text(title)
    rows = [[_fmt_cell(v, c) for v, c in zip(row, headers, strict=True)] for row in _tuples(frame)]
    numeric = [num or fit.is_quantity([r[i] for r in rows]) for i, num in enumerate(_numeric(frame))]
    widths, width = fit.fit_widths(headers, rows, numeric, fit.table_width())
    shown = [col if w is None else fit.header_lines(col, w) for col, w in zip(headers, widths, strict=True)]
    fitted = fit.fit_rows(rows, widths, None if full_names else fit.MAX_LINES, headers)
    drawn = box_table.draw(title, shown, fitted, numeric, widths, width)  # Rich's text, ~100x faster
    return drawn if drawn is not None else _rich_table(title, shown, fitted, numeric, widths, width)


def _rich_table(title: str | None, headers: list[str], rows: list[list[str]], numeric: list[bool],
                widths: list[int | None], width: int) -> str:
    """The table drawn by Rich: text as it is (no markup, emoji codes or highlighting: a kernel
    named ``k[abc]`` keeps its brackets). Only for tables :mod:`~trace_report.present.box_table`
    leaves to Rich."""
    from rich.console import Console  # slow to import: most tables never need it
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col, num, w in zip(headers, numeric, widths, strict=True):
        table.add_column(col, justify="right" if num else "left", overflow="fold", width=w)
    for row in rows:
        table.add_row(*row, end_section=False)
    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=False, highlight=False, markup=False, emoji=False).print(table)
    return buf.getvalue()


def _short_names(frame: Printable) -> Printable:
    """The name columns (:data:`fit.NAME_COLUMNS` holding text) as short kernel names."""
    columns = _columns(frame)
    numeric = _numeric(frame)
    idx = [i for i, c in enumerate(columns) if c in fit.NAME_COLUMNS and not numeric[i]]
    if not idx:
        return frame
    if isinstance(frame, Rows):
        data = [list(r) for r in frame.data]
        for i in idx:
            short = fit.short_names([r[i] if isinstance(r[i], str) else "" for r in data])
            for r, s in zip(data, short, strict=True):
                r[i] = s if isinstance(r[i], str) else r[i]
        return Rows(frame.columns, frame.types, [tuple(r) for r in data])
    out = frame.copy()
    for i in idx:
        col = columns[i]
        values = list(out[col])
        short = fit.short_names([v if isinstance(v, str) else "" for v in values])
        out[col] = [s if isinstance(v, str) else v for v, s in zip(values, short, strict=True)]
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_DESCRIPTOR = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/fd/\d+")
"""Names of a descriptor of this process: whatever file it holds, it is written where it is."""


def _names_a_descriptor(path: Path) -> bool:
    """Whether ``path``, or a symbolic link on its way, is ``/dev/stdout``, ``/dev/fd/N`` or
    ``/proc/self/fd/N``."""
    name = os.path.abspath(path)
    for _ in range(40):
        if _DESCRIPTOR.fullmatch(name):
            return True
        try:
            link = os.readlink(name)
        except OSError:
            return False
        name = os.path.normpath(os.path.join(os.path.dirname(name), link))
    return False


def writes_in_place(path: Path) -> bool:
    """Whether :func:`write_atomic` writes ``path`` where it is instead of renaming a new file
    over it: an existing FIFO, device (``/dev/null``, ``/dev/full``, a terminal) or socket, and
    a descriptor of this process (``/dev/stdout``, ``/dev/fd/3``) whatever it holds."""
    if _names_a_descriptor(path):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # a new file
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_in_place(path: Path, data: bytes) -> None:
    """Open ``path`` for writing without creating, truncating or renaming anything (a FIFO
    keeps its reader, a device stays a device) and write ``data``; a regular file behind a
    descriptor name (``-o /dev/stdout >> log``) is appended to, as the shell's descriptor would.
    A reader that went away (EPIPE) raises :class:`BrokenPipeError`, as on stdout
    (:func:`trace_report.cli.app.run` exits quietly)."""
    try:
        append = os.O_APPEND if stat.S_ISREG(os.stat(path).st_mode) else 0
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY | append)
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, data)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def _write_all(fh: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` and flush. A buffered write returns less than it was given when the
    disk filled up or the reader of a pipe went away part way (and drops the rest without an
    error): writing the rest raises the error."""
    view = memoryview(data)
    while view:
        n = fh.write(view)
        if not n:
            raise OSError(errno.EIO, "the write made no progress")
        view = view[n:]
    fh.flush()


def _bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` (UTF-8) or bytes to ``path`` through a temporary file and a rename; the
    file gets the mode a plain ``open(path, "w")`` would give (0666 less the umask), or keeps the
    mode of the file it replaces. A FIFO, a device or a descriptor name (``/dev/stdout``) is
    written where it is, with nothing created beside it (:func:`writes_in_place`)."""
    if writes_in_place(path):
        _write_in_place(path, _bytes(text))
        return
    with atomic_output(path) as fh:
        _write_all(fh, _bytes(text))


@contextmanager
def atomic_output(path: Path) -> Iterator[IO[bytes]]:
    """A binary file whose content becomes ``path`` when the block ends without an error: written
    to a temporary file beside it and renamed (a reader never sees half of it); the mode is what a
    plain ``open(path, "w")`` would give (0666 less the umask), or the mode of the file replaced.
    On any failure the temporary file is removed and ``path`` is untouched; :class:`InputError`
    for a missing folder or a failed write (a full disk included). For regular files: check
    :func:`writes_in_place` first."""
    path = path.absolute()
    if not path.parent.is_dir():
        raise InputError(f"{path.parent}: no such directory")
    mode = path.stat().st_mode & 0o7777 if path.is_file() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(output: Path | None, text: str) -> None:
    """``text`` on stdout (all of it and flushed: a full disk is an error here, not lost at
    exit), or written to ``output`` (:func:`write_atomic`). A closed pipe raises
    :class:`BrokenPipeError` (:func:`trace_report.cli.app.run` exits quietly)."""
    if output is not None:
        write_atomic(output, text)
        return
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    try:
        if buffer is None:  # not a file (a StringIO)
            out.write(text)
            out.flush()
        else:
            out.flush()
            _write_all(buffer, text.encode(out.encoding or "utf-8", out.errors or "strict"))
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError(f"stdout: cannot write ({exc.strerror or exc})") from exc


def emit(frame: Printable, opts: OutputOptions, title: str | None = None) -> None:
    """Print ``frame`` (cut to ``opts.limit`` rows) or write it to ``opts.output``. A table with no
    rows printed to the terminal is left out (the command's note says why): no empty box; CSV,
    JSON, Markdown and files keep their header or ``[]``."""
    if opts.limit is not None:
        frame = frame.head(opts.limit)
    if opts.output is None and opts.resolve() is Format.table and not len(frame):
        return
    text = render(frame, opts.resolve(), title, full_names=opts.full_names, keep_order=opts.keep_order,
                  raw=opts.raw)
    write_text(opts.output, text)


def text_lists(frame: pd.DataFrame, fmt: Format, columns: list[str]) -> pd.DataFrame:
    """List columns as ``a, b`` text for every format but JSON (which keeps lists)."""
    if fmt is Format.json:
        return frame
    out = frame.copy()
    for col in columns:
        if col in out:
            out[col] = out[col].map(lambda v: ", ".join(map(str, v)) if isinstance(v, list) else v)
    return out
