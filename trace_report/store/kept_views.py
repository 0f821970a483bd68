"""Views kept as tables: for the rest of a connection (:func:`materialize`) or of a block
(:func:`materialized`), and, for the views whose rows of a trace come from that trace's events
alone (:data:`PER_TRACE_VIEWS`), beside the database too, so that the next command reads them.

A view read several times by one analysis (``steps`` by the region views, the GPU busy intervals
by the idle causes...) is computed once into a TEMP table ``<name>_materialized`` and the view
pointed at it. A view whose SQL marks it ``-- kept per trace`` (after its ``AS``) is also kept
per trace beside a database file (:class:`~trace_report.store.cache.PerTrace`, kind
``view_<name>``, keyed by the trace's event files and by the code: this module and every SQL
artifact), and a later connection fills the table from those rows instead of the events. Reading
a view's rows back is several times cheaper than computing them from the events
(``benchmarks/commands.py``; the views kept so far save ``report``, ``advise``, ``ops`` and
``roofline`` their largest repeated queries). The kept rows are inserted into a table made with
the view's own column types, so the rows are the view's (``tests/store/test_kept_views.py``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

import duckdb

from trace_report.store.cache import PerTrace, set_view_tables, trace_pieces
from trace_report.store.run_scope import catalog_traces
from trace_report.store.sql_quote import identifier
from trace_report.store.views import record_views, statements, views_as_created

if TYPE_CHECKING:
    import pyarrow as pa

MARKER = "-- kept per trace"
"""What a view's SQL says, on its ``CREATE ... AS`` line, to be kept per trace."""

PER_TRACE_VIEWS = frozenset(st.name for st in statements() if MARKER in st.sql.partition("\n")[0])
"""Views whose rows of a trace depend on that trace's events alone (marked :data:`MARKER` in
``store/sql/``), so that a trace's rows can be kept per trace and read back under any scope
(:mod:`trace_report.store.run_scope`): each reads ``events`` and code-defined views only, never
``traces`` or another table (checked by the tests), and joins or windows only within a ``trace_id``.
``gpu_utilization`` reads ``traces`` (the rank) and stays computed, from the kept copies."""

KIND_PREFIX = "view_"
"""A kept view's kind among the derived tables: ``view_<name>``."""


@cache
def kept_view(name: str) -> PerTrace:
    """The declaration of the per-trace view ``name`` (one of :data:`PER_TRACE_VIEWS`)."""
    sql = {st.name: st.sql for st in statements()}[name]
    query = f"SELECT * FROM {name} WHERE list_contains($ids, trace_id) ORDER BY trace_id"

    def compute(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
        return con.sql(query, params={"ids": ids}).to_arrow_table()

    return PerTrace(KIND_PREFIX + name, compute, __name__, sql=sql + query, in_memory=False)


def _kept_as_tables(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> dict[str, bool]:
    """For each of ``names`` that is a TEMP view of ``con``: whether :func:`materialize` made it
    read its table."""
    rows = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE database_name = 'temp' AND temporary "
                       "AND list_contains($names, view_name)", {"names": list(names)}).fetchall()
    return {n: f"{n}_materialized" in sql for n, sql in rows}


def kept_as_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the TEMP view ``name`` of ``con`` reads the table :func:`materialize` made of it."""
    return _kept_as_tables(con, (name,)).get(name, False)


def materialize(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Keep the rows of the named TEMP views in TEMP tables (``<name>_materialized``) for the rest
    of this connection and point each view at its table.

    For views read several times by one analysis and expensive to compute: ``steps`` filters
    every event by name (``ProfilerStep#%``) and the region views
    read it four times in one breakdown; ``region_markers`` classifies annotation names and
    is read twice. The rows are the view's own, read once (those of :data:`PER_TRACE_VIEWS` from
    the files kept beside the database where there are: module doc); TEMP tables work on read-only
    databases. :func:`~trace_report.store.views.create_views` (run whenever ``events`` is
    replaced) restores the plain views, so a copy never outlives the events it was read from.
    Idempotent.
    """
    done = {n for n, kept in _kept_as_tables(con, names).items() if kept}
    _make_tables(con, [n for n in names if n not in done])


def _make_tables(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> None:
    """:func:`materialize` of ``names``, none of them kept as a table yet, in the order the views
    are created (a view is created after every view it reads): each is computed from the copies
    of those it reads, whatever order the caller listed them in (``data_loading_intervals`` listed
    before ``region_markers``, which it reads, computed that one from the events once more)."""
    if not names:
        return
    created = {st.name: i for i, st in enumerate(statements())}
    names = sorted(names, key=lambda n: created.get(n, len(created)))
    as_created = views_as_created(con)
    ids = _trace_ids(con) if as_created and PER_TRACE_VIEWS.intersection(names) else None
    for name in names:
        if ids is None or name not in PER_TRACE_VIEWS:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {name}_materialized AS SELECT * FROM {name}")
        else:
            _from_kept(con, name, ids)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM {name}_materialized")
    if as_created:  # the same rows, read once: still the views trace-report made
        record_views(con)


def _trace_ids(con: duckdb.DuckDBPyConnection) -> list[int] | None:
    """The traces in view (``traces``, narrowed by a scope), whose kept rows make up a per-trace
    view's; None when the database lists event files of a trace that its ``traces`` table lacks (a
    row deleted by hand): ``events``, and so the view, has rows of that trace, which no kept row
    would give."""
    known = {int(t) for (t,) in con.execute(f"SELECT trace_id FROM {catalog_traces(con)}").fetchall()}
    if not set(trace_pieces(con)) <= known:
        return None
    return [int(t) for (t,) in con.execute("SELECT trace_id FROM traces ORDER BY 1").fetchall()]


_ROWS = "trace_report_kept_view_rows"


def _from_kept(con: duckdb.DuckDBPyConnection, name: str, ids: list[int]) -> None:
    """Make ``<name>_materialized`` from the rows kept for the traces ``ids`` (those without kept
    rows computed and kept), each of the view's columns cast to its type."""
    rows = kept_view(name).rows(con, ids, as_created=True)
    table = f"{name}_materialized"
    # the view's columns and types, no rows (DuckDB plans LIMIT 0 as an empty result)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM {name} LIMIT 0")
    columns = ", ".join(identifier(d[0]) for d in con.execute(f"SELECT * FROM {table}").description)
    con.register(_ROWS, rows)
    try:
        con.execute(f"INSERT INTO {table} SELECT {columns} FROM {_ROWS}")
    finally:
        con.unregister(_ROWS)


TABLE_MARKER = re.compile(r"a table in ([a-z-]+(?:, [a-z-]+)*)")
"""What a view's SQL says, on its ``CREATE ... AS`` line (``-- a table in advise, report``, or after
:data:`MARKER`: ``-- kept per trace; a table in report``), to be kept as a table for the length of
the commands named (:func:`kept_for`)."""


@cache
def kept_for(command: str) -> tuple[str, ...]:
    """The views whose SQL marks them :data:`TABLE_MARKER` for ``command``, in creation order:
    what that command keeps as tables for its length (:func:`materialized`)."""
    out = []
    for st in statements():
        found = TABLE_MARKER.search(st.sql.partition("\n")[0])
        if found and command in found.group(1).split(", "):
            out.append(st.name)
    return tuple(out)


SHARED_VIEWS = kept_for("advise")
"""Views that commands running several analyses (``advise``, ``report``) read many times each,
marked ``a table in advise, report`` in ``store/sql/`` (the GPU busy intervals and the step
windows in gpu_idle_causes, gpu_idle_by_cause, host_syncs_by_rank, launch_bound, the headline,
the timeline...): kept as tables for their length (:func:`materialized`), each computed from the
copies of those it reads (:func:`_make_tables`).

``gpu_ops`` and ``runtime_calls``: a Parquet scan filtered on ``cat`` decodes every
column of every row group (DuckDB passes an ``IN`` filter to the reader as optional), and the
analyses of a report read these two views (directly or through
``gpu_op_kinds``, ``kernel_launches``, ``gpu_op_launches``...) in most of their queries; kept,
they are a few percent of the events (29.6k GPU operations and 64k runtime calls of 1M events).
``cpu_ops`` is not kept: its ``args`` (input shapes) are the largest part of a trace's text, and
keeping it gained nothing measurable. Making the kept tables costs less than the repeated reads
they replace, in advise and in the report alike, with the same output.
With ``--rank`` they are still kept for every trace: on a database once, then read from the files.

``memory_events`` (the ``[memory]`` events with their running totals: advise's memory check, the
Memory section's peaks and timeline) decodes the JSON ``args`` of every ``[memory]`` event: advise's
one read of it was its largest query, which the file kept beside the database replaces from the
second command on.

``data_loading_intervals`` (the CPU's data-loading markers and DataLoader ``__next__`` calls,
merged per trace; read by ``gpu_idle_causes``, behind advise's idle verdicts and the report's
headline) matches a regular expression against every ``python_function`` event's name, most of
``gpu_idle_by_cause`` on a trace with many Python events.

``kernel_classes`` (computed from the kept ``gpu_ops``) is read by the flags (advise's, and the
report's twice), advise's CUDA-core GEMMs and the kernel sequences: planning the classifying
macro costs DuckDB the same for any number of names, once for the table instead of once per query
(:func:`~trace_report.analyses.common.kernel_classes.classes_relation`)."""

REPORT_VIEWS = kept_for("report")
"""What ``report`` keeps for its length (marked ``a table in report``): :data:`SHARED_VIEWS`,
``op_costs`` (the FLOP and bytes of each GEMM, convolution and attention operator, from the JSON
of its input shapes), which the Operator view and the module tree both read, and ``region_markers``
(annotation names matched against the region rules' regular expressions), which the step
timeline's regions and the kernel regions of its step read: computed from the events by the first
and kept again by the second; on a database, read once from its file.
Not one of :data:`SHARED_VIEWS`: ``advise`` on a database reads it only through
``data_loading_intervals``, kept beside it, and would copy it for nothing."""


@contextmanager
def materialized(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> Iterator[None]:
    """:func:`materialize` those of ``names`` that are plain TEMP views of ``con`` (each after those it
    reads), for the length of the block; on exit each is a plain view again (its own SQL from the
    view artifacts) and its table is dropped, so no copy outlives the block (a notebook that then
    redefines ``events`` sees its change everywhere). Views already kept as tables when the block
    starts stay so."""
    kept = _kept_as_tables(con, names)
    mine = [n for n in names if kept.get(n) is False]
    if not mine:  # every view already kept (an analysis inside the report), or none of them a view
        yield
        return
    _make_tables(con, mine)
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


set_view_tables(materialized)
