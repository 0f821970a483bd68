"""jupysql support: ``%sql`` on a TraceDB's own connection (which holds the TEMP views)."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from trace_report.store.tracedb import TraceDB


class MagicCursor:
    """A DB-API cursor over one connection that reads each result whole at ``execute``.

    DuckDB 2 refuses new work on a connection while a result is only partly fetched, and
    jupysql fetches ``displaylimit`` rows and stops; so results are materialised (Arrow) here
    and the connection is left free for ``db.sql(...)`` and the analyses.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._table: Any = None
        self._pos = 0
        self.description: list[tuple[Any, ...]] | None = None

    def execute(self, query: str, parameters: object = None) -> MagicCursor:
        rel = self._con.sql(query, params=parameters)
        self._table = rel.to_arrow_table() if rel is not None else None
        self.description = rel.description if rel is not None else None
        self._pos = 0
        return self

    @property
    def rowcount(self) -> int:
        return -1 if self._table is None else self._table.num_rows

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        if self._table is None:
            return []
        part = self._table.slice(self._pos, size)
        self._pos += part.num_rows
        return list(zip(*(col.to_pylist() for col in part.columns), strict=True))  # keeps duplicate names

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.fetchmany(self._table.num_rows - self._pos) if self._table is not None else []

    def df(self) -> pd.DataFrame:
        return self._table.to_pandas() if self._table is not None else pd.DataFrame()

    def pl(self) -> Any:
        import polars as pl  # only when asked for

        return pl.from_arrow(self._table)

    def close(self) -> None:
        self._table = None


class MagicConnection:
    """What to hand jupysql's ``%sql`` so that it queries *this* connection.

    jupysql runs every query on ``connection.cursor()``; a DuckDB cursor is a new connection to
    the same database, which does not see this connection's TEMP views (``events``,
    ``kernels``, ``regions``...) nor the run tables. This adapter's :meth:`cursor` is a
    :class:`MagicCursor` on the connection itself; ``close`` does nothing (the TraceDB owns
    the connection)::

        %load_ext sql
        conn = magic_connection(db)
        %sql conn
        %sql SELECT name, sum(dur_us) AS total_us FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 5
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def cursor(self) -> MagicCursor:
        return MagicCursor(self._con)

    def commit(self) -> None:
        """Nothing to commit: DuckDB runs each statement in its own transaction."""

    def close(self) -> None:
        """Leave the connection open: it belongs to the TraceDB."""

    def df(self) -> pd.DataFrame:  # jupysql recognises a DuckDB connection by ``df`` and ``pl``
        return self._con.df()

    def pl(self) -> Any:
        return self._con.pl()


def magic_connection(db: TraceDB) -> MagicConnection:
    """A :class:`MagicConnection` for a :class:`~trace_report.store.tracedb.TraceDB`."""
    return MagicConnection(db.con)
