"""How CPU operators nest on their thread, and the GPU time each caused: the pass behind
:func:`trace_report.analyses.ops.ops` (``analyses/ops/ops_nesting.sql`` gives its rows).

An operator or annotation P *encloses* Q (same trace, pid and tid) when ``P.ts <= Q.ts`` and
``P.end >= Q.end`` (``end = ts + dur``); of two equal intervals the lower event_id encloses. Q's
*parent* is the innermost row enclosing it (latest start, then earliest end, then highest
event_id), as torch-tb-profiler's and HTA's call stacks nest operators.

Sorted by (ts, end descending, event_id) per thread (:func:`nesting_rows`), the rows enclosing Q
are exactly the earlier rows with ``end >= Q.end``, and its parent is the nearest of them: one
pass with a stack whose ends grow downwards finds every parent (each row is pushed and popped
once), and the innermost operator around a launch call the same way. The GPU time an operator
caused (its own and that of every row it encloses) is summed down the stack as rows are popped.
A row that partly overlaps a later one (``P.ts < Q.ts <= P.end < Q.end``) is popped by it while
it may still enclose rows after it: those are added from its window (the rows starting before
its end). Time: a sort, then O(n) for well-nested threads, plus O(W) for W rows in the windows
of partly overlapping rows (O(n log n) once W passes :data:`WINDOW_ROWS_PER_ROW` per row). The
query it replaces joined every operator to every operator on its thread: O(n^2) on one busy
thread, too slow for a trace of 100k events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from trace_report.store.views import sql_text

WINDOW_ROWS_PER_ROW = 16
"""Above this many window rows per row, the rows enclosed by partly overlapping rows are summed with
a Fenwick tree (O(n log n)) rather than by reading each window (O(W))."""


@dataclass(frozen=True)
class Rows:
    """The rows of ``ops_nesting.sql`` in nesting order (:func:`nesting_rows`), numpy arrays of one
    length: ``thread`` (-1: nests with nothing), ``ts``, ``end`` and ``dur`` (µs), ``kind`` (0
    operator or annotation, 1 launch call without an operator of its External id), ``id`` (event
    id), ``gpu`` (µs launched: by External id for kind 0, the call's for kind 1)."""

    trace_id: np.ndarray
    thread: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    dur: np.ndarray
    kind: np.ndarray
    id: np.ndarray
    gpu: np.ndarray


def nesting(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    """One row per CPU operator and annotation of the traces ``ids``, in (``trace_id``,
    ``event_id``) order: ``trace_id``, ``event_id`` (int64), ``child_us`` (summed dur of the rows it
    is the parent of), ``gpu_self_us`` (µs of the GPU operations it launched: by External id, else
    as the innermost operator around the launch call) and ``gpu_us`` (the same for it and every row
    it encloses), float64. A trace's rows depend on its own events alone
    (:mod:`~trace_report.analyses.ops.nesting_kept` keeps them per trace)."""
    rows = nesting_rows(con.execute(sql_text("ops_nesting.sql", __package__), {"ids": list(ids)}).fetchnumpy())
    parent, launched, caused = nest(rows)
    child = (rows.kind == 0) & (parent >= 0)
    child_us = np.bincount(parent[child], weights=rows.dur[child], minlength=len(parent)).astype(np.float64)
    ops = np.flatnonzero(rows.kind == 0)
    ops = ops[np.lexsort((rows.id[ops], rows.trace_id[ops]))]  # in event order, as the events are read
    return pa.table({"trace_id": rows.trace_id[ops], "event_id": rows.id[ops], "child_us": child_us[ops],
                     "gpu_self_us": launched[ops], "gpu_us": caused[ops]})


def nesting_rows(cols: dict[str, np.ndarray]) -> Rows:
    """The rows of ``ops_nesting.sql`` (its columns) in nesting order: by thread, ts, end
    descending, kind, id. A row then comes after every row that encloses it (ts <= its ts, end >=
    its end; of equal intervals the lower event_id encloses) and a call after every operator that
    starts at or before it."""
    order = np.lexsort((cols["id"], cols["kind"], -cols["end_us"], cols["ts_us"], cols["thread"]))
    return Rows(*(np.asarray(cols[k])[order] for k in ("trace_id", "thread", "ts_us", "end_us", "dur_us", "kind", "id",
                                                        "gpu_us")))


def nest(rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(parent, launched, caused)`` per row: the index of the innermost enclosing operator or
    annotation (-1 for none; for a call, the operator it belongs to), the µs it launched (kind 0)
    and the µs it and every row it encloses launched."""
    n = len(rows.ts)
    starts = np.flatnonzero(np.r_[True, rows.thread[1:] != rows.thread[:-1]]) if n else np.zeros(0, np.int64)
    stops = np.r_[starts[1:], n].astype(np.int64) if n else np.zeros(0, np.int64)  # no rows: no thread
    par = [n] * n  # n: no parent (the stack's bottom, a spare last slot of the lists)
    lau = rows.gpu.astype(np.float64).tolist() + [0.0]
    acc = lau.copy()
    ts, end, kind = rows.ts.tolist(), rows.end.tolist() + [math.inf], rows.kind.tolist()
    live: list[tuple[int, int]] = []
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        if rows.thread[a] >= 0:
            _thread_pass(range(a, b), n, ts, end, kind, bool(rows.kind[a:b].any()), par, lau, acc, live)
    parent = np.fromiter(par, dtype=np.int64, count=n)
    parent[parent == n] = -1
    launched, caused = np.fromiter(lau, dtype=np.float64, count=n), np.fromiter(acc, dtype=np.float64, count=n)
    if live:
        caused += _overlap_extra(rows, launched, live, stops)
    return parent, launched, caused


def _thread_pass(span: range, bottom: int, ts: list, end: list, kind: list, calls: bool, par: list, lau: list,
                 acc: list, live: list) -> None:
    """The stack pass over one thread's rows (lists updated in place; ``acc`` starts as each row's
    own µs; ``bottom`` indexes a spare last slot, with ``end[bottom]`` +inf; ``calls``: whether the
    rows hold launch calls). The stack holds the rows enclosing the current one, innermost on top;
    a popped row's sum goes to the row below it, its parent."""
    stack = [bottom]
    push, pop = stack.append, stack.pop
    top, top_end = bottom, math.inf
    for i in span:
        e = end[i]
        if top_end < e:
            t = ts[i]
            while top_end < e:
                if top_end >= t:  # top overlaps row i: it may enclose rows after i
                    live.append((top, i))
                p = pop()
                top = stack[-1]
                top_end = end[top]
                acc[top] += acc[p]
        par[i] = top
        if calls and kind[i]:  # a launch call: its GPU time is the innermost operator's
            lau[top] += acc[i]
            acc[top] += acc[i]
            acc[i] = 0.0
        else:
            push(i)
            top, top_end = i, e
    while len(stack) > 1:
        p = pop()
        acc[stack[-1]] += acc[p]


def _overlap_extra(rows: Rows, launched: np.ndarray, live: list[tuple[int, int]], stops: np.ndarray) -> np.ndarray:
    """µs to add to each row popped by a row it overlaps: the operators after the popping row that
    it still encloses (start before its end, end no later), which the stack sums miss. Rows of a
    thread are sorted by ts: its window ends before the first row starting after its end."""
    p, popper = (np.array(x, dtype=np.int64) for x in zip(*live, strict=True))
    stop = stops[np.searchsorted(stops, p, side="right")]
    lo, limit = popper + 1, rows.end[p]
    hi = np.empty_like(p)
    threads = [(int(s), np.flatnonzero(stop == s)) for s in np.unique(stop)]
    for s, at in threads:
        first = int(lo[at].min())
        hi[at] = first + np.searchsorted(rows.ts[first:s], limit[at], side="right")
    weight = np.where(rows.kind == 0, launched, 0.0)
    width = hi - lo
    if width.sum() <= WINDOW_ROWS_PER_ROW * len(rows.ts):
        sums = _window_sums(lo, width, rows.end, weight, limit)
    else:
        sums = np.zeros(len(p))
        for s, at in threads:
            first = int(lo[at].min())
            sums[at] = _dominance_sums(lo[at] - first, limit[at], rows.end[first:s], weight[first:s])
    extra = np.zeros(len(rows.ts))
    np.add.at(extra, p, sums)
    return extra


def _window_sums(lo: np.ndarray, width: np.ndarray, end: np.ndarray, weight: np.ndarray,
                 limit: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """For each window ``[lo, lo + width)``: the sum of ``weight`` over its rows with ``end <= limit``
    (every window row read, in chunks of about ``chunk`` rows)."""
    out = np.zeros(len(lo))
    ends = np.cumsum(width)
    if not len(lo) or not ends[-1]:
        return out
    edges = np.unique(np.r_[0, np.searchsorted(ends, np.arange(chunk, ends[-1], chunk), side="right"), len(lo)])
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        w = width[a:b]
        owner = np.repeat(np.arange(a, b), w)
        offset = np.arange(len(owner)) - np.repeat(np.cumsum(w) - w, w)
        idx = lo[owner] + offset
        keep = end[idx] <= limit[owner]
        out += np.bincount(owner[keep], weights=weight[idx[keep]], minlength=len(lo))
    return out


def _dominance_sums(lo: np.ndarray, limit: np.ndarray, end: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """For each query: the sum of ``weight`` over the rows from ``lo`` on with ``end <= limit``, by a
    Fenwick tree over the ends of the weighted rows, filled from the last row backwards
    (O((n + q) log n))."""
    pos = np.flatnonzero(weight != 0.0)
    keys = np.unique(end[pos])
    size = len(keys)
    rank = (np.searchsorted(keys, end[pos]) + 1).tolist()
    w, positions = weight[pos].tolist(), pos.tolist()
    q_rank = np.searchsorted(keys, limit, side="right").tolist()
    bounds = lo.tolist()
    tree = [0.0] * (size + 1)
    found = [0.0] * len(bounds)
    j = len(positions) - 1
    for q in np.argsort(-lo, kind="stable").tolist():
        while j >= 0 and positions[j] >= bounds[q]:
            k = rank[j]
            while k <= size:
                tree[k] += w[j]
                k += k & -k
            j -= 1
        k, total = q_rank[q], 0.0
        while k > 0:
            total += tree[k]
            k -= k & -k
        found[q] = total
    return np.array(found)
