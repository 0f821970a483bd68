"""analyses.intervals against plain-Python definitions, on random intervals (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_report.analyses.common.intervals import (
    BusyTime,
    Partition,
    merge_intervals,
    positions_by_key,
    positions_by_pair,
)

times = st.integers(0, 60).map(float)
spans = st.lists(st.tuples(times, st.integers(0, 20).map(float)), max_size=25).map(
    lambda xs: [(s, s + d) for s, d in xs])


def _covered(spans: list[tuple[float, float]], t: float) -> bool:
    return any(s <= t < e for s, e in spans)


@settings(max_examples=200, deadline=None)
@given(spans, st.lists(st.tuples(times, times), max_size=10))
def test_union_and_busy_time_match_a_unit_grid(xs: list[tuple[float, float]], queries: list) -> None:
    """Integer endpoints: the busy time of [a, b) is the number of unit cells [t, t+1) covered."""
    starts, ends = np.array([s for s, _ in xs]), np.array([e for _, e in xs])
    ms, me = merge_intervals(starts, ends)
    assert all(ms[i] <= me[i] for i in range(len(ms)))
    assert all(me[i] < ms[i + 1] for i in range(len(ms) - 1))  # disjoint and sorted, gaps between
    for t in range(0, 90):
        assert _covered(list(zip(ms, me, strict=True)), t) == _covered(xs, t)
    busy = BusyTime(starts, ends)
    assert busy.total == sum(1 for t in range(0, 90) if _covered(xs, t))
    for a, b in queries:
        lo, hi = min(a, b), max(a, b)
        expected = sum(1 for t in range(int(lo), int(hi)) if _covered(xs, t))
        assert busy.between(np.array([lo]), np.array([hi]))[0] == pytest.approx(expected)


@settings(max_examples=200, deadline=None)
@given(spans)
def test_partition_owner_is_the_first_covering_interval(xs: list[tuple[float, float]]) -> None:
    w0, w1 = 5.0, 70.0
    part = Partition(w0, w1, np.array([s for s, _ in xs]), np.array([e for _, e in xs]))
    probes = np.arange(0.0, 80.0, 0.5)
    owners = part.at(probes)
    for t, owner in zip(probes.tolist(), owners.tolist(), strict=True):
        first = next((i for i, (s, e) in enumerate(xs) if s <= t < e and s < e), -1)
        assert owner == (first if w0 <= t < w1 else -1), (t, xs)
    lengths = part.seg_end - part.seg_start
    assert lengths.sum() == pytest.approx(w1 - w0) and (lengths > 0).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-3, 5), max_size=40))
def test_positions_by_key_groups_every_row_in_order(keys: list[int]) -> None:
    expected: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        expected.setdefault(k, []).append(i)
    got = positions_by_key(np.array(keys, dtype=np.int64))
    assert {k: v.tolist() for k, v in got.items()} == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(-1, 4))), max_size=40))
def test_positions_by_pair_leaves_out_null_windows(rows: list[tuple[int, int | None]]) -> None:
    expected: dict[tuple[int, int], list[int]] = {}
    for i, (t, w) in enumerate(rows):
        if w is not None:
            expected.setdefault((t, w), []).append(i)
    trace = np.array([t for t, _ in rows], dtype=float)
    window = np.array([np.nan if w is None else w for _, w in rows], dtype=float)
    got = positions_by_pair(trace, window)
    assert {k: v.tolist() for k, v in got.items()} == expected
