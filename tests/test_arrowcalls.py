"""trace_report.arrowcalls gives what pyarrow.compute gives (same registry functions, same default
options), on columns with nulls, NaN, infinities and every type the ingest passes."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from trace_report import arrowcalls as ac

TEXT = pa.array(["kernel", "stream 7", None, "ProfilerStep#3", "kernel", "", "Bearer abc"])
FLOATS = pa.array([1.5, -2.0, None, math.inf, math.nan, 0.0, 1e13])
MASK = pa.array([True, False, None, True, False, True, False])
INTS = pa.chunked_array([[3, None, 3], [7, 1]])
TABLE = pa.table({"t": TEXT, "f": FLOATS})


@pytest.mark.parametrize(("ours", "theirs"), [
    (lambda: ac.take(TEXT, pa.array([3, 0, None])), lambda: pc.take(TEXT, pa.array([3, 0, None]))),
    (lambda: ac.filter(TEXT, MASK), lambda: pc.filter(TEXT, MASK)),
    (lambda: ac.filter(TABLE, MASK), lambda: TABLE.filter(MASK)),
    (lambda: ac.drop_null(INTS), lambda: INTS.drop_null()),
    (lambda: ac.cast(pa.array([1, None, -5]), pa.string()), lambda: pa.array([1, None, -5]).cast(pa.string())),
    (lambda: ac.fill_null(MASK, False), lambda: pc.fill_null(MASK, False)),
    (lambda: ac.fill_null(INTS, -1), lambda: pc.fill_null(INTS, -1)),
    (lambda: ac.dictionary_encode(TEXT), lambda: pc.dictionary_encode(TEXT)),
    (lambda: ac.value_counts(INTS), lambda: pc.value_counts(INTS)),
    (lambda: ac.match_substring_regex(TEXT, "(?i)bearer|step"),
     lambda: pc.match_substring_regex(TEXT, "(?i)bearer|step")),
    (lambda: ac.starts_with(TEXT, "stream "), lambda: pc.starts_with(TEXT, "stream ")),
    (lambda: ac.is_in(INTS, pa.array([3, 7])), lambda: pc.is_in(INTS, pa.array([3, 7]))),
    (lambda: ac.replace_with_mask(TEXT, MASK, pa.array(["a", "b", "c"])),
     lambda: pc.replace_with_mask(TEXT, MASK, pa.array(["a", "b", "c"]))),
    (lambda: ac.binary_length(TEXT), lambda: pc.binary_length(TEXT)),
    (lambda: ac.indices_nonzero(MASK), lambda: pc.indices_nonzero(MASK)),
    (lambda: ac.any(MASK), lambda: pc.any(MASK)),
    (lambda: ac.all(MASK), lambda: pc.all(MASK)),
    (lambda: ac.sum(MASK), lambda: pc.sum(MASK)),
    (lambda: ac.equal(TEXT, "kernel"), lambda: pc.equal(TEXT, "kernel")),
    (lambda: ac.less(FLOATS, 0.0), lambda: pc.less(FLOATS, 0.0)),
    (lambda: ac.greater(FLOATS, 1e12), lambda: pc.greater(FLOATS, 1e12)),
    (lambda: ac.invert(MASK), lambda: pc.invert(MASK)),
    (lambda: ac.and_(MASK, ac.invert(MASK)), lambda: pc.and_(MASK, pc.invert(MASK))),
    (lambda: ac.and_kleene(MASK, pa.array([False] * 7)), lambda: pc.and_kleene(MASK, pa.array([False] * 7))),
    (lambda: ac.or_kleene(MASK, pa.array([True] * 7)), lambda: pc.or_kleene(MASK, pa.array([True] * 7))),
    (lambda: ac.is_null(FLOATS), lambda: pc.is_null(FLOATS)),
    (lambda: ac.is_valid(FLOATS), lambda: pc.is_valid(FLOATS)),
    (lambda: ac.is_finite(FLOATS), lambda: pc.is_finite(FLOATS)),
])
def test_same_result_as_pyarrow_compute(ours, theirs) -> None:
    a, b = ours(), theirs()
    assert type(a) is type(b)
    assert (a.schema if isinstance(a, pa.Table) else a.type) == (b.schema if isinstance(b, pa.Table) else b.type)
    assert a.equals(b)


def test_a_lossy_cast_raises_as_arrow_does() -> None:
    with pytest.raises(pa.ArrowInvalid):
        ac.cast(pa.array([2**40]), pa.int32())
