"""Text and names written into DuckDB SQL where a statement takes no parameter: file paths of
``read_parquet`` lists kept in a view's text and of ``COPY ... TO``, and identifiers (catalog and
column names). SQL's own quoting: a quote inside is doubled (``'`` in a string literal, ``"`` in
an identifier); nothing else needs escaping in DuckDB's parser."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def literal(text: str | Path) -> str:
    """``text`` as a SQL string literal: ``it's`` -> ``'it''s'``."""
    return "'" + str(text).replace("'", "''") + "'"


def literal_list(texts: Iterable[str | Path]) -> str:
    """A SQL list of string literals: ``['a.parquet', 'b.parquet']``."""
    return "[" + ", ".join(literal(t) for t in texts) + "]"


def identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier: ``my"db`` -> ``"my""db"``."""
    return '"' + name.replace('"', '""') + '"'
