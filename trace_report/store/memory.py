"""Events kept in memory: Arrow tables behind the ``events`` view of an in-memory database (an
analysis of raw traces, :func:`trace_report.ingest.pipeline.open_in_memory`)."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from trace_report.store.events_view import empty_events_view


class MemoryStore:
    """Events kept as Arrow tables; ``events`` is a view over their concatenation."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []

    def add(self, tables: list[pa.Table]) -> None:
        self.tables.extend(t for t in tables if t.num_rows)

    def publish(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.tables:
            empty_events_view(con)
            return
        con.register("_events_arrow", pa.concat_tables(self.tables))
        con.execute("CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM _events_arrow")
