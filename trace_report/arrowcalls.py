"""The Arrow compute functions the ingest calls, without importing ``pyarrow.compute``.

``import pyarrow.compute`` builds a Python wrapper for each of the ~300 functions of Arrow's
registry: 25-30 ms of every ``trace-report ingest``, before the first piece is decoded (a fifth
of the serial start of a 16-rank ingest, docs/benchmarks.md). Nothing else the ingest loads
imports it (``pyarrow.parquet`` and DuckDB do not), and neither do Arrow's own methods as long as
they are not called: ``Array.take``, ``Table.filter``, ``drop_null`` and ``cast`` import it on
first use, so the ingest calls the functions here instead. Each calls the registry function of
the same name through :func:`pyarrow.compute.call_function` (defined in ``pyarrow._compute``,
loaded with ``pyarrow.parquet``) with the options ``pyarrow.compute``'s wrapper passes by
default, so the results are those of ``pyarrow.compute`` (tests/test_arrowcalls.py compares
them); Python scalars are converted to Arrow scalars as those wrappers convert them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyarrow import _compute

Arrow = Any  # an Array, ChunkedArray, Table or Scalar


def _call(name: str, *args: Any, options: Any = None) -> Arrow:
    return _compute.call_function(name, list(args), options)


def take(values: Arrow, indices: Arrow) -> Arrow:
    return _call("take", values, indices)


def filter(values: Arrow, mask: Arrow) -> Arrow:  # noqa: A001 - Arrow's name
    """Rows of an array or table where ``mask`` is true (nulls dropped)."""
    return _call("filter", values, mask)


def drop_null(values: Arrow) -> Arrow:
    return _call("drop_null", values)


def cast(values: Arrow, target: pa.DataType) -> Arrow:
    """Safe cast (raises on overflow or truncation), as ``Array.cast`` does by default."""
    return _call("cast", values, options=_compute.CastOptions.safe(target))


def fill_null(values: Arrow, fill: Any) -> Arrow:
    """``values`` with nulls replaced by ``fill`` (a Python value, made a scalar of their type)."""
    if not isinstance(fill, pa.Scalar | pa.Array | pa.ChunkedArray):
        fill = pa.scalar(fill, type=values.type)
    return _call("coalesce", values, fill)


def dictionary_encode(values: Arrow) -> Arrow:
    return _call("dictionary_encode", values)


def value_counts(values: Arrow) -> Arrow:
    return _call("value_counts", values)


def match_substring_regex(values: Arrow, pattern: str) -> Arrow:
    return _call("match_substring_regex", values, options=_compute.MatchSubstringOptions(pattern))


def starts_with(values: Arrow, prefix: str) -> Arrow:
    return _call("starts_with", values, options=_compute.MatchSubstringOptions(prefix))


def is_in(values: Arrow, value_set: Arrow) -> Arrow:
    return _call("is_in", values, options=_compute.SetLookupOptions(value_set))


def replace_with_mask(values: Arrow, mask: Arrow, replacements: Arrow) -> Arrow:
    return _call("replace_with_mask", values, mask, replacements)


def binary_length(values: Arrow) -> Arrow:
    return _call("binary_length", values)


def indices_nonzero(values: Arrow) -> Arrow:
    return _call("indices_nonzero", values)


def any(values: Arrow) -> pa.Scalar:  # noqa: A001 - Arrow's name
    return _call("any", values)


def all(values: Arrow) -> pa.Scalar:  # noqa: A001 - Arrow's name
    return _call("all", values)


def sum(values: Arrow) -> pa.Scalar:  # noqa: A001 - Arrow's name
    return _call("sum", values)


def equal(a: Arrow, b: Any) -> Arrow:
    return _call("equal", a, b)


def less(a: Arrow, b: Any) -> Arrow:
    return _call("less", a, b)


def greater(a: Arrow, b: Any) -> Arrow:
    return _call("greater", a, b)


def invert(values: Arrow) -> Arrow:
    return _call("invert", values)


def and_(a: Arrow, b: Arrow) -> Arrow:
    return _call("and", a, b)


def and_kleene(a: Arrow, b: Arrow) -> Arrow:
    return _call("and_kleene", a, b)


def or_kleene(a: Arrow, b: Arrow) -> Arrow:
    return _call("or_kleene", a, b)


def is_null(values: Arrow) -> Arrow:
    return _call("is_null", values)


def is_valid(values: Arrow) -> Arrow:
    return _call("is_valid", values)


def is_finite(values: Arrow) -> Arrow:
    return _call("is_finite", values)
