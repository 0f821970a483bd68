"""benchmarks/commands.py's scaling fit: the fixed cost and the cost per million events of a
command, from its median walls at several trace sizes."""

from __future__ import annotations

import pytest

from benchmarks.commands import linear_fit


def test_fit_recovers_a_line() -> None:
    # 0.9 s fixed + 2.5 s per 1M events, at 2k, 0.5 M and 2 M events
    events = [2_000, 500_000, 2_000_000]
    fixed, per_m = linear_fit(events, [0.9 + 2.5 * e / 1e6 for e in events])
    assert fixed == pytest.approx(0.9) and per_m == pytest.approx(2.5)


def test_fit_of_a_bending_curve_is_least_squares() -> None:
    # quadratic walls: the line is the least-squares one (numbers from the normal equations by hand:
    # x = 0, 1, 2 M events, y = 1, 2, 5 s: slope 2, intercept 2/3)
    fixed, per_m = linear_fit([0, 1_000_000, 2_000_000], [1.0, 2.0, 5.0])
    assert per_m == pytest.approx(2.0) and fixed == pytest.approx(2 / 3)
