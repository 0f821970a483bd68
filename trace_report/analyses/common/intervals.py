"""Time intervals in numpy (all times in µs): their union, busy time, and the partition of a
window between prioritised intervals; and row positions grouped by integer keys.

Used by the step breakdown (:mod:`trace_report.analyses.breakdown`), the GPU timeline and the
trace charts.
"""

from __future__ import annotations

import numpy as np


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of ``[start, end)`` intervals as sorted, disjoint ``(starts, ends)`` arrays."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s))
    np.maximum.at(out_e, group, run_end)
    return out_s, out_e


class BusyTime:
    """Cumulative busy time of a set of intervals: ``between(a, b)`` = busy µs within ``[a, b)``."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.s, self.e = merge_intervals(np.asarray(starts, float), np.asarray(ends, float))
        self.cum = np.concatenate([[0.0], np.cumsum(self.e - self.s)])

    def until(self, t: np.ndarray) -> np.ndarray:
        """Busy µs in ``(-inf, t)`` for each ``t``."""
        t = np.asarray(t, float)
        if len(self.s) == 0:
            return np.zeros_like(t)
        i = np.searchsorted(self.s, t, side="right") - 1
        inside = np.where(i >= 0, np.clip(t - self.s[np.maximum(i, 0)], 0.0,
                                          (self.e - self.s)[np.maximum(i, 0)]), 0.0)
        return np.where(i >= 0, self.cum[np.maximum(i, 0)] + inside, 0.0)

    def between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.until(b) - self.until(a)

    @property
    def total(self) -> float:
        return float(self.cum[-1])


class Partition:
    """``[w0, w1)`` split into segments, each owned by the first interval (in the given priority
    order) that covers it, or by none (-1): ``owner[k] = min{i : start_i <= cut_k < end_i}``.
    Each interval covers a contiguous run of segments; writing the runs from the last interval to
    the first leaves the first covering one: O(n log n + n * run length) in numpy slices."""

    def __init__(self, w0: float, w1: float, starts: np.ndarray, ends: np.ndarray):
        starts = np.clip(np.asarray(starts, float), w0, w1)
        ends = np.clip(np.asarray(ends, float), w0, w1)
        self.cuts = np.unique(np.concatenate([[w0, w1], starts, ends]))
        owner = np.full(len(self.cuts) - 1, -1, dtype=np.int64)
        lo = np.searchsorted(self.cuts, starts, side="left")
        hi = np.searchsorted(self.cuts, ends, side="left")
        for i in np.flatnonzero(hi > lo)[::-1].tolist():
            owner[lo[i]:hi[i]] = i
        self.owner = owner

    @property
    def seg_start(self) -> np.ndarray:
        return self.cuts[:-1]

    @property
    def seg_end(self) -> np.ndarray:
        return self.cuts[1:]

    def at(self, t: np.ndarray) -> np.ndarray:
        """Owner (interval index, -1 for none) at each time ``t``; -1 outside ``[w0, w1)``."""
        t = np.asarray(t, float)
        k = np.searchsorted(self.cuts, t, side="right") - 1
        ok = (k >= 0) & (k < len(self.owner))
        return np.where(ok, self.owner[np.clip(k, 0, max(len(self.owner) - 1, 0))], -1) \
            if len(self.owner) else np.full(len(t), -1)


def positions_by_key(keys: np.ndarray) -> dict[int, np.ndarray]:
    """Row positions per distinct integer key, ascending within each key (one sort, not one
    pass per key: a database may hold thousands of ranks)."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    bounds = np.concatenate([[0], np.flatnonzero(k[1:] != k[:-1]) + 1, [len(k)]])
    return {int(k[a]): order[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True) if b > a}


def positions_by_pair(trace_id: np.ndarray, window_id: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """Row positions per ``(trace_id, window_id)``, ascending within each; rows with a NULL
    (NaN) window are left out."""
    rows = np.flatnonzero(~np.isnan(window_id))
    order = rows[np.lexsort((window_id[rows], trace_id[rows]))]
    t, w = trace_id[order], window_id[order]
    bounds = np.concatenate([[0], np.flatnonzero((t[1:] != t[:-1]) | (w[1:] != w[:-1])) + 1, [len(order)]])
    return {(int(t[a]), int(w[a])): order[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
            if b > a}
