"""The GPU operations of each trace per name (view ``gpu_op_names``), kept beside a database.

``flags`` needs three things of the same GPU operations: the per-name counts and sums, the GPU
time of the selection (``gpu_time_of``) and the classes of the names (``kernel_classes_of``). Over
the events each is a scan of every kernel, memcpy and memset. Over the rows of ``gpu_op_names``
(a few hundred per trace: one per (``cat``, ``name``) with ``ops`` and ``dur_us``) the same query
reads a few hundred rows instead of millions, and those rows are
what both macros and the flags query are defined on, so the figures are the same either way.

The rows of a trace are kept in ``<db>.events/derived/gpu_op_names/``
(:mod:`trace_report.store.cache`) by the first ``flags`` that computes them (or ``ingest
--precompute``). Connections whose views a notebook redefined compute them every time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from trace_report.store.cache import PerTrace

VIEW = "gpu_op_names"
"""The view (``store/sql/views.sql``): ``trace_id``, ``cat``, ``name``, ``ops`` (count),
``dur_us`` (summed ``dur``, µs) per trace and GPU operation name."""
KEPT_RELATION = "trace_report_kept_gpu_op_names"
"""The name under which the kept rows are registered on the connection while a query reads them."""
_QUERY = (f"SELECT trace_id, cat, name, ops, dur_us FROM {VIEW} "
          "WHERE list_contains($ids, trace_id) ORDER BY trace_id, cat, name")


def _compute(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    return con.sql(_QUERY, params={"ids": ids}).to_arrow_table()


KEPT = PerTrace("gpu_op_names", _compute, __name__, sql=_QUERY)
"""The view's rows, kept per trace (:class:`~trace_report.store.cache.PerTrace`)."""


def kept_rows(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    """The ``gpu_op_names`` rows of the traces ``ids``: those kept beside the database behind
    ``con``, the others computed from the events (one scan for all of them) and kept."""
    return KEPT.rows(con, ids)


@contextmanager
def names_relation(con: duckdb.DuckDBPyConnection, ids: list[int]) -> Iterator[str]:
    """The name of a relation holding the ``gpu_op_names`` rows of ``ids`` for the length of the
    block: the kept rows registered on ``con`` (:func:`kept_rows`), or the view itself when there
    is no trace."""
    if not ids:
        yield VIEW
        return
    con.register(KEPT_RELATION, kept_rows(con, ids))
    try:
        yield KEPT_RELATION
    finally:
        con.unregister(KEPT_RELATION)
