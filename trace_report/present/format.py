"""The shared output options of every command that prints rows: ``--format
table|csv|json|markdown``, ``--limit``, ``-o FILE`` (docs/cli.md). No pandas here, so
that the command line starts fast."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path


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
    given (``sql``), else a table shows the name column last, as ``nsys stats`` does."""

    fmt: Format | None = None
    limit: int | None = None
    output: Path | None = None
    full_names: bool = False
    keep_order: bool = False

    def resolve(self) -> Format:
        """The format to use: the one asked for, else by the output file's suffix, else table."""
        if self.fmt is not None:
            return self.fmt
        return Format.table if self.output is None else _format_for(self.output)


def _format_for(path: Path) -> Format:
    suffix = path.suffix.lower()
    return {".csv": Format.csv, ".json": Format.json, ".md": Format.markdown}.get(
        suffix, Format.table
    )
