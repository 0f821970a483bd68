"""The view registry: the SQL artifacts in ``store/sql/`` and the TEMP views made from them.

Every connection gets the views again (they are TEMP, so read-only databases work too):
``views.sql`` then every ``views_*.sql`` in name order, then the ncu views when the
``ncu_kernels``/``ncu_metrics`` tables exist. An error in any of these files breaks every open,
so each is exercised by the tests on real data.

A command that reads a few views may ask for those alone (``create_views(con, only=...)``):
they are created with every view and macro they read, in the same order (:func:`statements`).
Binding all ~60 takes 0.2-0.3 s, most of ``top-kernels`` on a small database (issue 35).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources

import duckdb

NCU_TABLES = ("ncu_kernels", "ncu_metrics")
ROOFLINE_RULES = "views_roofline_rules.sql"
NCU_VIEWS = "roofline_ncu.sql"


def sql_text(name: str) -> str:
    """The text of the named SQL artifact in ``trace_report/store/sql/``."""
    return resources.files("trace_report.store").joinpath("sql", name).read_text()


def view_files() -> list[str]:
    """``views.sql`` then every ``views_*.sql`` (analysis rules add theirs), sorted."""
    folder = resources.files("trace_report.store").joinpath("sql")
    extra = sorted(p.name for p in folder.iterdir() if p.name.startswith("views_"))
    return ["views.sql", *extra]


CATALOGS = "database_name IN ('temp', current_database())"
"""The catalogs a name in a query is looked up in (TEMP objects, then the database in use), as a
filter of ``duckdb_tables()`` / ``duckdb_views()``. It also spares the first such query on a
connection ~10 ms: without a filter on the database, DuckDB lists its system catalog too (the
information_schema and pg_catalog views, made on first use; ``temporary`` is true for them)."""


def has_ncu_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the ncu tables are visible to queries on the connection (:data:`CATALOGS`)."""
    rows = con.execute(
        f"SELECT count(*) FROM duckdb_tables() WHERE {CATALOGS} AND table_name IN ('ncu_kernels', 'ncu_metrics')"
    ).fetchall()
    return bool(rows and rows[0][0] == len(NCU_TABLES))


def create_ncu_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the TEMP views over the ncu tables (``roofline``; works read-only), after the
    roofline rules they use."""
    con.execute(sql_text(ROOFLINE_RULES))
    con.execute(sql_text(NCU_VIEWS))


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
            con.execute(sql_text(name))
        if has_ncu_tables(con):
            create_ncu_views(con)
    else:
        chosen = needed_statements(only)
        if any(s.ncu for s in chosen) and not has_ncu_tables(con):
            chosen = [s for s in chosen if not s.ncu]
        if chosen:
            con.execute("\n".join(s.sql for s in chosen))
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
    80 views' SQL takes ~2.5 ms of every open, the ids 0.5 ms; the TEMP catalog alone: see
    :data:`CATALOGS`.)"""
    row = con.execute("SELECT string_agg(view_oid::VARCHAR, ',' ORDER BY view_oid) FROM duckdb_views() "
                      "WHERE database_name = 'temp' AND temporary").fetchone()
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


def _kept_as_tables(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> dict[str, bool]:
    """For each of ``names`` that is a TEMP view of ``con``: whether :func:`materialize` made it
    read its table."""
    rows = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE database_name = 'temp' AND temporary "
                       "AND list_contains($names, view_name)", {"names": list(names)}).fetchall()
    return {n: f"{n}_materialized" in sql for n, sql in rows}


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
    done = {n for n, kept in _kept_as_tables(con, names).items() if kept}
    as_created = views_as_created(con)
    for name in names:
        if name in done:
            continue
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name}_materialized AS SELECT * FROM {name}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM {name}_materialized")
    if as_created:  # the same rows, read once: still the views trace-report made
        record_views(con)


SHARED_VIEWS = ("gpu_ops", "runtime_calls", "steps", "gpu_busy_intervals", "gpu_utilization", "gpu_op_launches")
"""Views that commands running several analyses (``advise``, ``report``) read many times each
(the GPU busy intervals and the step windows in gpu_idle_causes, gpu_idle_by_cause,
host_syncs_by_rank, launch_bound, the headline, the timeline...): kept as tables for their length
(:func:`materialized`), in this order, so the later ones are computed from the earlier copies.

``gpu_ops`` and ``runtime_calls`` come first: a Parquet scan filtered on ``cat`` decodes every
column of every row group (DuckDB passes an ``IN`` filter to the reader as optional), ~0.09 s on
a 1M-event trace, and the analyses of a report read these two views (directly or through
``gpu_op_kinds``, ``kernel_launches``, ``gpu_op_launches``...) in most of their queries; kept,
they are a few percent of the events (29.6k GPU operations and 64k runtime calls of 1M events).
``cpu_ops`` is not kept: its ``args`` (input shapes) are the largest part of a trace's text, and
keeping it gained nothing measurable. On a 1M-event trace the kept tables take ~0.5 s to make;
advise 2.7 -> 1.6 s with the last four; report 7.9 -> 7.2 s (medians of 5, 2 cores) with the
first two, same output. The report keeps ``memory_events`` too (:data:`REPORT_VIEWS`)."""

REPORT_VIEWS = (*SHARED_VIEWS, "memory_events")
"""What ``report`` keeps for its length: :data:`SHARED_VIEWS` and ``memory_events`` (the ``[memory]``
events with their running totals), which advise's memory check and the Memory section's peaks
and timeline read: one definition of a peak, its JSON decoded once per report (advise alone reads
it once, so keeping it there would only cost a copy)."""


@contextmanager
def materialized(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> Iterator[None]:
    """:func:`materialize` those of ``names`` that are plain TEMP views of ``con``, in the given
    order, for the length of the block; on exit each is a plain view again (its own SQL from the
    view artifacts) and its table is dropped, so no copy outlives the block (a notebook that then
    redefines ``events`` sees its change everywhere). Views already kept as tables when the block
    starts stay so."""
    kept = _kept_as_tables(con, names)
    mine = [n for n in names if kept.get(n) is False]
    materialize(con, *mine)
    try:
        yield
    finally:
        as_created = views_as_created(con)
        by_name = {st.name: st for st in statements()}
        for name in mine:
            con.execute(by_name[name].sql)
            con.execute(f"DROP TABLE IF EXISTS {name}_materialized")
        if as_created:
            record_views(con)
