"""The view registry: the SQL artifacts in ``store/sql/`` and the TEMP views made from them.

Every connection gets the views again (they are TEMP, so read-only databases work too):
``views.sql`` then every ``views_*.sql`` in name order, then the ncu views when the
``ncu_kernels``/``ncu_metrics`` tables exist. An error in any of these files breaks every open,
so each is exercised by the tests on real data.
"""

from __future__ import annotations

from importlib import resources

import duckdb

NCU_TABLES = ("ncu_kernels", "ncu_metrics")
ROOFLINE_RULES = "views_roofline_rules.sql"


def sql_text(name: str) -> str:
    """The text of the named SQL artifact in ``trace_report/store/sql/``."""
    return resources.files("trace_report.store").joinpath("sql", name).read_text()


def view_files() -> list[str]:
    """``views.sql`` then every ``views_*.sql`` (analysis rules add theirs), sorted."""
    folder = resources.files("trace_report.store").joinpath("sql")
    extra = sorted(p.name for p in folder.iterdir() if p.name.startswith("views_"))
    return ["views.sql", *extra]


def has_ncu_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this database holds the ncu tables (any schema visible to the connection)."""
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('ncu_kernels', 'ncu_metrics')"
    ).fetchall()
    return bool(rows and rows[0][0] == len(NCU_TABLES))


def create_ncu_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the TEMP views over the ncu tables (``roofline``; works read-only), after the
    roofline rules they use."""
    con.execute(sql_text(ROOFLINE_RULES))
    con.execute(sql_text("roofline_ncu.sql"))


def ensure_ncu_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``ncu_kernels`` and ``ncu_metrics`` (idempotent) and their views."""
    as_created = views_as_created(con)
    con.execute(sql_text("tables_ncu.sql"))
    create_ncu_views(con)
    if as_created:
        record_views(con)


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the TEMP views over ``events`` on this connection, and the ncu views when
    the ncu tables exist."""
    for name in view_files():
        con.execute(sql_text(name))
    if has_ncu_tables(con):
        create_ncu_views(con)
    record_views(con)


VIEWS_VARIABLE = "trace_report_views"
"""The DuckDB variable holding :func:`views_fingerprint` as trace-report last set the views."""


def views_fingerprint(con: duckdb.DuckDBPyConnection) -> str:
    """The object ids of this connection's TEMP views (``events`` and the analysis views), as one
    string: every ``CREATE OR REPLACE`` gives a view a new id. (Ids, not the views' SQL: rendering
    80 views' SQL takes ~2.5 ms of every open, the ids 0.5 ms.)"""
    row = con.execute("SELECT string_agg(view_oid::VARCHAR, ',' ORDER BY view_oid) FROM duckdb_views() "
                      "WHERE temporary").fetchone()
    return str(row[0]) if row and row[0] else ""


def record_views(con: duckdb.DuckDBPyConnection) -> None:
    """Remember the views as trace-report made them (:func:`views_as_created`)."""
    con.execute(f"SET VARIABLE {VIEWS_VARIABLE} = $f", {"f": views_fingerprint(con)})


def views_as_created(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this connection's views are still the ones trace-report made (none redefined from a
    notebook, say ``events`` filtered to a time range): results derived through them are then the
    database's own and may be kept beside it (:mod:`trace_report.store.derived`)."""
    try:
        row = con.execute(f"SELECT getvariable('{VIEWS_VARIABLE}')").fetchone()
    except duckdb.Error:
        return False
    return bool(row and row[0]) and row[0] == views_fingerprint(con)


def materialize(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Keep the rows of the named TEMP views in TEMP tables (``<name>_materialized``) for the rest
    of this connection and point each view at its table.

    For views read several times by one analysis and expensive to compute: ``steps`` filters
    every event by name (``ProfilerStep#%``, ~0.05 s on a 2.9 M-event trace) and the region views
    read it four times in one breakdown; ``region_markers`` classifies annotation names and
    is read twice. The rows are the view's own, read once; TEMP tables work on read-only
    databases. :func:`create_views` (run whenever ``events`` is replaced) restores the plain
    views, so a copy never outlives the events it was read from. Idempotent.
    """
    done = {n for (n, sql) in con.execute(
        "SELECT view_name, sql FROM duckdb_views() WHERE temporary AND list_contains($names, view_name)",
        {"names": list(names)}).fetchall() if f"{n}_materialized" in sql}
    as_created = views_as_created(con)
    for name in names:
        if name in done:
            continue
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name}_materialized AS SELECT * FROM {name}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM {name}_materialized")
    if as_created:  # the same rows, read once: still the views trace-report made
        record_views(con)
