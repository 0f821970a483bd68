"""The Arrow compute functions the ingest calls, without importing ``pyarrow.compute``.

``import pyarrow.compute`` builds a Python wrapper for each of the ~300 functions of Arrow's
registry, in every ``trace-report ingest`` before the first piece is decoded (a large part of the
serial start of a many-rank ingest). Nothing else the ingest loads
imports it (``pyarrow.parquet`` and DuckDB do not), and neither do Arrow's own methods as long as
they are not called: ``Array.take``, ``Table.filter``, ``drop_null`` and ``cast`` import it on
first use, so the ingest calls the functions here instead. Each calls the registry function of
the same name through :func:`pyarrow.compute.call_function` (defined in ``pyarrow._compute``,
the compiled module under ``pyarrow.compute``, cheap to load) with the options that
``pyarrow.compute``'s wrapper passes by default, so the results are those of ``pyarrow.compute``
(tests/test_arrowcalls.py compares them); Python scalars are converted to Arrow scalars as
those wrappers convert them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyarrow import _compute

Arrow = Any  # an Array, ChunkedArray, Table or Scalar


def _plain(name: str) -> Callable[..., Arrow]:
    """The registry function ``name``, called with its default options."""

    def call(*args: Any) -> Arrow:
        return _compute.call_function(name, list(args))

    call.__name__ = call.__qualname__ = name
    return call


# no options: the defaults are those of pyarrow.compute's wrappers (take: bounds checked;
# filter: nulls dropped; any/all/sum: nulls skipped, at least one value)
take = _plain("take")
filter = _plain("filter")  # noqa: A001 - Arrow's name; also filters a Table
drop_null = _plain("drop_null")
dictionary_encode = _plain("dictionary_encode")
value_counts = _plain("value_counts")
replace_with_mask = _plain("replace_with_mask")
binary_length = _plain("binary_length")
indices_nonzero = _plain("indices_nonzero")
any = _plain("any")  # noqa: A001
all = _plain("all")  # noqa: A001
sum = _plain("sum")  # noqa: A001
equal = _plain("equal")
less = _plain("less")
greater = _plain("greater")
invert = _plain("invert")
and_ = _plain("and")
and_kleene = _plain("and_kleene")
or_kleene = _plain("or_kleene")
is_null = _plain("is_null")
is_valid = _plain("is_valid")
is_finite = _plain("is_finite")


def cast(values: Arrow, target: pa.DataType) -> Arrow:
    """Safe cast (raises on overflow or truncation), as ``Array.cast`` does by default."""
    return _compute.call_function("cast", [values], _compute.CastOptions.safe(target))


def fill_null(values: Arrow, fill: Any) -> Arrow:
    """``values`` with nulls replaced by ``fill`` (a Python value, made a scalar of their type)."""
    if not isinstance(fill, pa.Scalar | pa.Array | pa.ChunkedArray):
        fill = pa.scalar(fill, type=values.type)
    return _compute.call_function("coalesce", [values, fill])


def match_substring_regex(values: Arrow, pattern: str) -> Arrow:
    return _compute.call_function("match_substring_regex", [values], _compute.MatchSubstringOptions(pattern))


def starts_with(values: Arrow, prefix: str) -> Arrow:
    return _compute.call_function("starts_with", [values], _compute.MatchSubstringOptions(prefix))


def is_in(values: Arrow, value_set: Arrow) -> Arrow:
    return _compute.call_function("is_in", [values], _compute.SetLookupOptions(value_set))
