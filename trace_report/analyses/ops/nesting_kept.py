"""The Operator view's nesting rows per trace (:func:`~trace_report.analyses.ops.nesting.nesting`),
kept beside a database so that the next ``ops`` or ``report`` reads them instead of computing them.

A trace's rows come from its own CPU operators, annotations, launch calls and GPU operations
alone (``analyses/ops/ops_nesting.sql`` joins and nests only within a trace, and the pass nests
within a thread), so each trace's rows are the same whichever traces are computed with it.
Computing them scans every CPU operator, then a Python pass sorts and nests them; reading them
back is a small fraction of that, for ``ops`` and the report's Operators section alike.

The rows of a trace are kept as ``<db>.events/derived/ops_nesting-t<id>-<pieces>-<version>.parquet``
(:func:`trace_report.store.derived.kept_tables`: keyed by the trace's event files and by
:data:`CODE_VERSION`) by the first ``ops`` or ``report`` that computes them. Databases in memory (a
trace given directly), and connections whose views a notebook redefined, compute them every time.
"""

from __future__ import annotations

import sys

import duckdb
import numpy as np
import pyarrow as pa

import trace_report.analyses.ops.nesting as ops_nesting
from trace_report.analyses.ops.nesting import nesting
from trace_report.store.derived import code_version, kept_tables, traces_of_rank

DERIVED_KIND = "ops_nesting"
"""The name of the nesting rows among a database's derived tables."""

CODE_VERSION = code_version((sys.modules[__name__], ops_nesting), (np.__version__, pa.__version__, duckdb.__version__))
"""This module, the nesting pass, every SQL artifact (``ops_nesting.sql`` and the views it reads)
and the libraries that compute and store the rows (:func:`~trace_report.store.derived.code_version`)."""

TYPES = {"trace_id": pa.types.is_integer, "event_id": pa.types.is_integer, "child_us": pa.types.is_floating,
         "gpu_self_us": pa.types.is_floating, "gpu_us": pa.types.is_floating}
"""The columns of :func:`~trace_report.analyses.ops.nesting.nesting`, as a kept file must have them."""


def kept_nesting(con: duckdb.DuckDBPyConnection, rank: int | None) -> pa.Table:
    """:func:`~trace_report.analyses.ops.nesting.nesting` of the traces of ``rank`` (None: every
    trace in view), in (``trace_id``, ``event_id``) order: each trace's rows from the file kept
    beside the database for this code version, the others computed (in one pass for all of them)
    and kept (module docstring)."""
    ids = traces_of_rank(con, rank)
    kept = kept_tables(con, DERIVED_KIND, CODE_VERSION, ids, lambda missing: nesting(con, missing), TYPES)
    return kept if kept is not None else nesting(con, ids)
