"""The Operator view's nesting rows per trace (:func:`~trace_report.analyses.ops.nesting.nesting`),
kept beside a database so that the next ``ops`` or ``report`` reads them instead of computing them.

A trace's rows come from its own CPU operators, annotations, launch calls and GPU operations
alone (``analyses/ops/ops_nesting.sql`` joins and nests only within a trace, and the pass nests
within a thread), so each trace's rows are the same whichever traces are computed with it.
Computing them scans every CPU operator, then a Python pass sorts and nests them; reading them
back is a small fraction of that, for ``ops`` and the report's Operators section alike.

The rows of a trace are kept in ``<db>.events/derived/ops_nesting/``
(:mod:`trace_report.store.cache`: keyed by the trace's event files and the code) by the first
``ops`` or ``report`` that computes them. A database in memory (a trace given directly) keeps them
for its connection; connections whose views a notebook redefined compute them every time.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from trace_report.analyses.ops.nesting import nesting
from trace_report.store.cache import PerTrace, traces_of_rank

KEPT = PerTrace("ops_nesting", nesting, __name__)
"""The nesting rows, kept per trace (:class:`~trace_report.store.cache.PerTrace`)."""


def kept_nesting(con: duckdb.DuckDBPyConnection, rank: int | None) -> pa.Table:
    """:func:`~trace_report.analyses.ops.nesting.nesting` of the traces of ``rank`` (None: every
    trace in view), in (``trace_id``, ``event_id``) order: each trace's rows kept beside the
    database, the others computed (in one pass for all of them) and kept (module docstring)."""
    return KEPT.rows(con, traces_of_rank(con, rank))
