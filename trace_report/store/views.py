"""The view registry: the SQL artifacts in ``store/sql/`` and the TEMP views made from them.

Every connection gets the views again (they are TEMP, so read-only databases work too):
``views.sql`` then every ``views_*.sql`` in name order, then the ncu views when the
``ncu_kernels``/``ncu_metrics`` tables exist. An error in any of these files breaks every open,
so each is exercised by the tests on real data.

A command that reads a few views may ask for those alone (``create_views(con, only=...)``):
they are created with every view and macro they read, in the same order (:func:`statements`).
Binding all of them is most of ``top-kernels`` on a small database.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from importlib import resources

import duckdb

NCU_TABLES = ("ncu_kernels", "ncu_metrics")
ROOFLINE_RULES = "views_roofline_rules.sql"
NCU_VIEWS = "roofline_ncu.sql"


def sql_text(name: str, package: str | None = None) -> str:
    """The text of the named SQL artifact: in ``trace_report/store/sql/`` (the views and tables
    several analyses read), or beside the modules of ``package`` (an analysis' own queries; its
    modules pass ``__package__``). Raises :class:`FileNotFoundError` for a missing file."""
    if package is None:
        return resources.files("trace_report.store").joinpath("sql", name).read_text()
    return resources.files(package).joinpath(name).read_text()


def view_files() -> list[str]:
    """``views.sql`` then every ``views_*.sql`` (analysis rules add theirs), sorted."""
    folder = resources.files("trace_report.store").joinpath("sql")
    extra = sorted(p.name for p in folder.iterdir() if p.name.startswith("views_"))
    return ["views.sql", *extra]


CATALOGS = "database_name IN ('temp', current_database())"
"""The catalogs a name in a query is looked up in (TEMP objects, then the database in use), as a
filter of ``duckdb_tables()`` / ``duckdb_views()``. It also makes the first such query on a
connection cheaper: without a filter on the database, DuckDB lists its system catalog too (the
information_schema and pg_catalog views, made on first use; ``temporary`` is true for them)."""


def has_ncu_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the ncu tables are visible to queries on the connection (:data:`CATALOGS`)."""
    rows = con.execute(
        f"SELECT count(*) FROM duckdb_tables() WHERE {CATALOGS} AND table_name IN ('ncu_kernels', 'ncu_metrics')"
    ).fetchall()
    return bool(rows and rows[0][0] == len(NCU_TABLES))


_VIEW_AS = re.compile(r"^(CREATE\s+OR\s+REPLACE\s+TEMP(?:ORARY)?\s+VIEW\s+\w+)\s+AS\b", re.IGNORECASE | re.MULTILINE)


def deferred(sql: str) -> str:
    """``sql`` with each ``CREATE OR REPLACE TEMP VIEW name AS`` written ``... name WITH
    (DEFER_BINDING) AS``: DuckDB (>= 1.5, duckdb/duckdb#22199) then checks the view's syntax alone
    when it is created and binds it when a query reads it, as it binds every view at every query
    anyway. Binding every view at creation was a large part of every ``trace_report.open`` (views
    over views: each binds everything it reads again); an error in a view's SQL now shows where a query
    reads it."""
    return _VIEW_AS.sub(r"\1 WITH (DEFER_BINDING) AS", sql)


def create_ncu_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the TEMP views over the ncu tables (``roofline``; works read-only), after the
    roofline rules they use."""
    con.execute(deferred(sql_text(ROOFLINE_RULES)))
    con.execute(deferred(sql_text(NCU_VIEWS)))


def ensure_ncu_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``ncu_kernels`` and ``ncu_metrics`` (idempotent) and their views."""
    as_created = views_as_created(con)
    con.execute(sql_text("tables_ncu.sql"))
    create_ncu_views(con)
    if as_created:
        record_views(con)


def create_views(con: duckdb.DuckDBPyConnection, only: Collection[str] | None = None, *,
                 record: bool = True) -> None:
    """(Re)create the TEMP views over ``events`` on this connection, and the ncu views when
    the ncu tables exist; then remember them as created (:func:`record_views`) unless not
    ``record`` (the caller records them once it is done).

    ``only``: the named views (or macros) alone, with everything they read
    (:func:`needed_statements`); the ncu views among them only when the ncu tables exist.
    Raises :class:`ValueError` for a name no SQL artifact defines."""
    if only is None:
        for name in view_files():
            con.execute(deferred(sql_text(name)))
        if has_ncu_tables(con):
            create_ncu_views(con)
    else:
        chosen = needed_statements(only)
        if any(s.ncu for s in chosen) and not has_ncu_tables(con):
            chosen = [s for s in chosen if not s.ncu]
        if chosen:
            con.execute(deferred("\n".join(s.sql for s in chosen)))
    if record:
        record_views(con)


@dataclass(frozen=True)
class Statement:
    """One ``CREATE TEMP VIEW|MACRO|TABLE`` of the view artifacts: the object's ``name``, its SQL
    (with the comments that follow it up to the next statement), the names of the other objects it
    reads (``reads``: every word of its SQL outside comments that names one, so a column that shares
    a view's name adds that view: more than needed, never less) and whether it is one of the ncu
    views (``ncu``: created only over the ncu tables)."""

    name: str
    sql: str
    reads: frozenset[str]
    ncu: bool = False


_CREATE = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?TEMP(?:ORARY)?\s+(?:VIEW|MACRO|TABLE)\s+"
                     r"(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE | re.MULTILINE)
_COMMENT = re.compile(r"--[^\n]*")
_WORD = re.compile(r"[A-Za-z_]\w*")


@cache
def statements() -> tuple[Statement, ...]:
    """Every statement of :func:`view_files` then of the ncu views, in the order
    :func:`create_views` runs them (each file's statements start at a line beginning with
    ``CREATE``; text before a file's first one is comments). Read once per process."""
    parts: list[tuple[str, str, bool]] = []
    for file, ncu in [*((f, False) for f in view_files()), (NCU_VIEWS, True)]:
        text = sql_text(file)
        found = list(_CREATE.finditer(text))
        ends = [m.start() for m in found[1:]] + [len(text)]
        parts += [(m.group(1), text[m.start():end].rstrip(), ncu) for m, end in zip(found, ends, strict=True)]
    defined = {name for name, _, _ in parts}
    return tuple(Statement(name, sql, frozenset(set(_WORD.findall(_COMMENT.sub("", sql))) & defined - {name}), ncu)
                 for name, sql, ncu in parts)


def views_named_in(*sql: str) -> list[str]:
    """The views and macros of the SQL artifacts that the texts ``sql`` name (as a word each),
    sorted: what a fixed set of queries reads, for ``connect_existing(views=...)``, which then
    creates those and what they read (:func:`needed_statements`) instead of every view."""
    names = {s.name for s in statements()}
    return sorted(names.intersection(_WORD.findall(" ".join(sql))))


def needed_statements(names: Collection[str]) -> list[Statement]:
    """The statements that create ``names`` and every object they read, transitively, in
    creation order (a statement reads only objects created before it: the files are run in
    this order whole). Raises :class:`ValueError` for a name no statement creates."""
    by_name = {s.name: s for s in statements()}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise ValueError(f"no view or macro named {', '.join(unknown)} in store/sql")
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].reads)
    return [s for s in statements() if s.name in wanted]


VIEWS_VARIABLE = "trace_report_views"
"""The DuckDB variable holding :func:`views_fingerprint` as trace-report last set the views."""


def views_fingerprint(con: duckdb.DuckDBPyConnection) -> str:
    """The object ids of this connection's TEMP views (``events`` and the analysis views), as one
    string: every ``CREATE OR REPLACE`` gives a view a new id. (Ids, not the views' SQL: rendering
    every view's SQL costs several times more on every open; the TEMP catalog alone: see
    :data:`CATALOGS`.)"""
    # fetchall, not fetchone: no unfinished result left on the connection for a relation to trip on
    rows = con.execute("SELECT string_agg(view_oid::VARCHAR, ',' ORDER BY view_oid) FROM duckdb_views() "
                       "WHERE database_name = 'temp' AND temporary").fetchall()
    row = rows[0] if rows else None
    return str(row[0]) if row and row[0] else ""


def record_views(con: duckdb.DuckDBPyConnection) -> None:
    """Remember the views as trace-report made them (:func:`views_as_created`)."""
    con.execute(f"SET VARIABLE {VIEWS_VARIABLE} = $f", {"f": views_fingerprint(con)})


def views_as_created(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this connection's views are still the ones trace-report made (none redefined from a
    notebook, say ``events`` filtered to a time range): results derived through them are then the
    database's own and may be kept beside it (:mod:`trace_report.store.cache`)."""
    try:
        rows = con.execute(f"SELECT getvariable('{VIEWS_VARIABLE}')").fetchall()
    except duckdb.Error:
        return False
    row = rows[0] if rows else None
    return bool(row and row[0]) and row[0] == views_fingerprint(con)
