"""The shared output options of every command that prints rows: ``--format
table|csv|json|markdown``, ``--limit``, ``-o FILE`` (docs/cli.md). No pandas here, so
that the command line starts fast."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from trace_report.errors import UsageError


class Format(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


@dataclass(frozen=True)
class OutputOptions:
    """Shared output options: format (None = from ``output``'s suffix, else table), row limit
    and output file (None = stdout); ``full_names``: table and Markdown show whole kernel names
    (else short ones; CSV and JSON always hold the whole names); ``keep_order``: the columns as
    given (``sql``), else a table shows the name column last, as ``nsys stats`` does; ``raw``: CSV
    text cells as the trace has them (else a leading ``=``, ``+``, ``-``, ``@``, tab or carriage
    return gets an apostrophe and control characters are escaped: docs/security.md)."""

    fmt: Format | None = None
    limit: int | None = None
    output: Path | None = None
    full_names: bool = False
    keep_order: bool = False
    raw: bool = False

    def resolve(self) -> Format:
        """The format to use: the one asked for, else by the output file's suffix, else table."""
        if self.fmt is not None:
            return self.fmt
        return Format.table if self.output is None else _format_for(self.output)


SUFFIXES = {".csv": Format.csv, ".json": Format.json, ".md": Format.markdown, ".markdown": Format.markdown,
            ".txt": Format.table, "": Format.table}


def _format_for(path: Path) -> Format:
    """The format an output file's suffix names; an unknown suffix (``out.xlsx``) is a usage error
    rather than a box-drawn text table under that name. Devices and FIFOs
    (``/dev/stdout``) have no suffix: a table."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UsageError(f"{path}: unknown output format {suffix!r}: name the file .txt (table), .csv, .json or .md, "
                         "or give --format table|csv|json|markdown")
    return SUFFIXES[suffix]


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"),
             (1e-9, "n"))


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """``value`` with an SI prefix and ``digits`` significant digits: ``si(624e12, "FLOP/s")`` =
    ``'624 TFLOP/s'``, ``si(1.1168e-05, "s")`` = ``'11.2 µs'``, ``si(0)`` = ``'0'``; None or NaN
    -> ``''``. For tables; CSV and JSON keep plain numbers in base units."""
    if value is None or value != value:
        return ""
    if value == 0:
        return f"0 {unit}".strip()
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale * 0.9995:
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()
