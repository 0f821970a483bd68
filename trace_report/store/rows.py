"""``Rows``: a small query result fetched straight from DuckDB, without pandas.

Commands print a few dozen rows; building a pandas DataFrame for them costs more than the query
(importing pandas alone is slower than most queries). A :class:`Rows` holds the column names, their DuckDB type
names and the rows as Python tuples (``cursor.fetchall()`` + ``cursor.description``);
:meth:`Rows.df` builds the pandas DataFrame (the dtypes DuckDB's ``.df()`` gives) only when a
notebook asks for it. ``trace_report.present.tables`` prints either kind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import pandas as pd

_INTEGERS = {"TINYINT": "int8", "SMALLINT": "int16", "INTEGER": "int32", "BIGINT": "int64", "UTINYINT": "uint8",
             "USMALLINT": "uint16", "UINTEGER": "uint32", "UBIGINT": "uint64"}
"""DuckDB integer types and the numpy dtype ``.df()`` gives them (the nullable ``Int32``... with NULLs)."""
_FLOATS = {"FLOAT": "float32", "DOUBLE": "float64", "HUGEINT": "float64", "UHUGEINT": "float64"}
NUMERIC_TYPES = set(_INTEGERS) | set(_FLOATS) | {"BOOLEAN"}
"""DuckDB type names printed right-aligned (what pandas' ``is_numeric_dtype`` says of their dtypes)."""


def _type_name(code: object) -> str:
    return str(code).upper()


@dataclass
class Rows:
    """Columns (``columns``, DuckDB type names in ``types``) and rows as tuples (``data``)."""

    columns: list[str]
    types: list[str]
    data: list[tuple[Any, ...]]

    @classmethod
    def fetch(cls, con: duckdb.DuckDBPyConnection, query: str, params: object = None) -> Rows:
        """Run ``query`` on ``con`` and fetch every row (``fetchall`` + ``description``)."""
        cur = con.execute(query, params)
        description = cur.description or []
        return cls([d[0] for d in description], [_type_name(d[1]) for d in description], cur.fetchall())

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.data)

    def select(self, columns: Sequence[str]) -> Rows:
        """The given columns, in that order (KeyError for a column there is not)."""
        idx = [self.columns.index(c) for c in columns]
        return Rows(list(columns), [self.types[i] for i in idx], [tuple(r[i] for i in idx) for r in self.data])

    def head(self, n: int) -> Rows:
        """The first ``n`` rows."""
        return Rows(self.columns, self.types, self.data[:n])

    def numeric(self) -> list[bool]:
        """Whether each column holds numbers (right-aligned in tables)."""
        return [t in NUMERIC_TYPES or t.startswith("DECIMAL") for t in self.types]

    def records(self) -> list[dict[str, Any]]:
        """Rows as dicts keyed by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.data]

    def df(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame with the dtypes DuckDB's ``.df()`` gives: ``int32``
        for INTEGER, ``int64`` for BIGINT (``Int32``/``Int64`` when they hold NULL),
        ``float64`` for DOUBLE and DECIMAL, pandas' string dtype for text, else object."""
        import pandas as pd  # only a notebook asking for a frame pays for pandas

        cols: dict[str, Any] = {}
        for i, (name, typ) in enumerate(zip(self.columns, self.types, strict=True)):
            values = [r[i] for r in self.data]
            cols[name] = pd.Series(values, dtype=_dtype(typ, values))
        return pd.DataFrame(cols, columns=self.columns)

    @property
    def frame(self) -> pd.DataFrame:
        """Same as :meth:`df`."""
        return self.df()


def _dtype(typ: str, values: list[Any]) -> str:
    has_null = any(v is None for v in values)
    if typ in _INTEGERS:
        return _INTEGERS[typ].capitalize() if has_null else _INTEGERS[typ]
    if typ in _FLOATS or typ.startswith("DECIMAL"):
        return _FLOATS.get(typ, "float64")
    if typ == "BOOLEAN":
        return "boolean" if has_null else "bool"
    if typ == "VARCHAR" and not all(v is None for v in values):
        return "str"
    return "object"
