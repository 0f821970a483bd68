"""The GPU operations of each trace per name (view ``gpu_op_names``), kept beside a database.

``flags`` needs three things of the same GPU operations: the per-name counts and sums, the GPU
time of the selection (``gpu_time_of``) and the classes of the names (``kernel_classes_of``). Over
the events each is a scan of every kernel, memcpy and memset. Over the rows of ``gpu_op_names``
(a few hundred per trace: one per (``cat``, ``name``) with ``ops`` and ``dur_us``) the same query
reads a few hundred rows instead of millions, and those rows are
what both macros and the flags query are defined on, so the figures are the same either way.

The rows of a trace are kept as ``<db>.events/derived/gpu_op_names-t<id>-<pieces>-<version>.parquet``
(:mod:`trace_report.store.derived`): by ``trace-report ingest`` for large traces (beside the
breakdown's rows), else by the first ``flags`` that computes them. Databases in memory, and
connections whose views a notebook redefined, read the view itself.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from trace_report.store.derived import code_version, derived_store, kept_tables

VIEW = "gpu_op_names"
"""The view (``store/sql/views.sql``): ``trace_id``, ``cat``, ``name``, ``ops`` (count),
``dur_us`` (summed ``dur``, µs) per trace and GPU operation name."""
DERIVED_KIND = VIEW
KEPT_RELATION = "trace_report_kept_gpu_op_names"
"""The name under which the kept rows are registered on the connection while a query reads them."""
_TYPES = {"trace_id": pa.types.is_integer, "cat": pa.types.is_string, "name": pa.types.is_string,
          "ops": pa.types.is_integer, "dur_us": pa.types.is_floating}

CODE_VERSION = code_version((sys.modules[__name__],), (pa.__version__, duckdb.__version__))
"""This module, the SQL views (the view's definition among them) and the libraries that compute
and store the rows (:func:`~trace_report.store.derived.code_version`)."""


def kept_rows(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table | None:
    """The ``gpu_op_names`` rows of the traces ``ids``: those kept beside the database behind
    ``con``, the others computed from the events (one scan for all of them) and kept
    (:func:`~trace_report.store.derived.kept_tables`). None where the database keeps nothing
    (in memory, or views redefined on this connection); then the caller reads the view."""
    def compute(missing: list[int]) -> pa.Table:
        return con.sql(f"SELECT trace_id, cat, name, ops, dur_us FROM {VIEW} "
                       "WHERE list_contains($ids, trace_id) ORDER BY trace_id, cat, name",
                       params={"ids": missing}).to_arrow_table()

    return kept_tables(con, DERIVED_KIND, CODE_VERSION, ids, compute, _TYPES)


@contextmanager
def names_relation(con: duckdb.DuckDBPyConnection, ids: list[int]) -> Iterator[str]:
    """The name of a relation holding the ``gpu_op_names`` rows of ``ids`` for the length of the
    block: the kept rows registered on ``con`` (:func:`kept_rows`), or the view itself."""
    table = kept_rows(con, ids) if ids else None
    if table is None:
        yield VIEW
        return
    con.register(KEPT_RELATION, table)
    try:
        yield KEPT_RELATION
    finally:
        con.unregister(KEPT_RELATION)


def keep_gpu_op_names(con: duckdb.DuckDBPyConnection, ids: list[int]) -> list[int]:
    """Compute and keep the rows of the traces ``ids`` that have none kept for this code version
    (what ``trace-report ingest`` does for large traces); the ids kept now, none where the
    database keeps nothing or its folder cannot be written."""
    store = derived_store(con) if CODE_VERSION else None
    if store is None or not ids:
        return []
    kept_rows(con, ids)
    return [t for t in ids if (p := store.path(DERIVED_KIND, t, CODE_VERSION)) is not None and p.is_file()]
