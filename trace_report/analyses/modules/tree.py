"""The module calls of :func:`trace_report.analyses.modules.modules` with their place in the tree,
GPU time and FLOP: the rule of ``analyses/modules/modules.sql`` computed by sorted passes per thread.

Calls (``modules.sql``) arrive sorted per thread (trace, pid, tid) by ``(ts, end descending,
event_id)``. In that order the calls enclosing a call C (``ts <= C.ts``, ``end >= C.end``; of
equal intervals the lower event_id is the outer) are exactly the earlier calls of its thread with
``end >= C.end``, and, when no two calls of the thread partly overlap, they are the calls on a
stack from which every call ending before C's end has been popped (TraceLens' host call stack,
``Trace2Tree/trace_to_tree.py``). A thread where a popped call overlaps the call popping it (its
end at or after that call's start) is done by comparing each call with every earlier one
(O(n^2) for that thread only; profilers do not write such module events). ``path`` is the names
of the enclosing calls in that order, then the call's own, joined by ``.``; ``path_id`` numbers
the distinct paths (interned as (parent's path_id, name)), so that calls are grouped without
comparing texts. A path deeper than :data:`PATH_NAMES` names shows its first and last names
around ``...(N more)...``: a path string per call of a chain n deep would hold n^2/2 names.

The GPU operations of a call are those whose launch call starts in ``[ts, end)`` on its thread,
and its FLOP those of the operators starting there that no other FLOP-counted operator of the
thread encloses: both found by binary search in the thread's sorted start times, summed with
prefix sums. Time: O(n log n) in calls, launches and operators.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from trace_report.store.cache import PerTrace, traces_of_rank, with_ranks
from trace_report.store.views import sql_text

PATH_NAMES = 64
"""The most names a ``path`` shows: deeper paths keep their first :data:`PATH_HEAD` and their last
``PATH_NAMES - PATH_HEAD`` names around ``...(N more)...``."""
PATH_HEAD = 32

MARKS_TABLE = "module_marks"
"""The name under which the calls are registered on the connection while the launches and
operators of their threads are read (``modules_launches.sql``, ``modules_flop_ops.sql``)."""

def module_calls(con: duckdb.DuckDBPyConnection, rank: int | None) -> pa.Table:
    """One row per module call of the selection (``rank`` None: every trace in view): ``rank``,
    then :func:`trace_calls`' columns. Each trace's calls from the file kept beside the database
    (:data:`KEPT`), else computed and kept: a trace's calls come
    from its own events alone, and reading them back is much cheaper than computing them.
    ``rank`` is read from ``traces`` (not kept)."""
    return with_ranks(con, KEPT.rows(con, traces_of_rank(con, rank)))


def trace_calls(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    """One row per module call of the traces ``ids``, in (trace, thread, start) order:
    ``trace_id``, ``event_id``, ``step``, ``path``, ``path_id`` (the same number for the same
    path within one call of this function), ``depth``, ``name``, ``kind``, ``ts_us``,
    ``cpu_us``, ``gpu_ops``, ``gpu_us`` (µs), ``flop_ops``, ``flop`` (None where no operator of
    the call has a FLOP estimate). The rule: ``analyses/modules/modules.sql``."""
    cols = con.execute(sql_text("modules.sql", __package__), {"ids": list(ids)}).fetchnumpy()
    marks = pa.table({k: _array(v) for k, v in cols.items()})
    if marks.num_rows == 0:
        empty = np.zeros(0, np.int64)
        return _calls_table(marks, ([], empty, empty), empty, np.zeros(0), empty, np.zeros(0))
    con.register(MARKS_TABLE, marks)
    try:
        launches = con.execute(sql_text("modules_launches.sql", __package__)).fetchnumpy()
        ops = con.execute(sql_text("modules_flop_ops.sql", __package__)).fetchnumpy()
    finally:
        con.unregister(MARKS_TABLE)
    m = {k: marks.column(k).to_numpy(zero_copy_only=False) for k in ("trace_id", "pid", "tid", "ts_us", "end_us")}
    keys = _thread_keys(m["trace_id"], m["pid"], m["tid"])
    thread = _lookup(keys, m["trace_id"], m["pid"], m["tid"])
    names = marks.column("name").to_pylist()
    tree = _paths(thread, m["ts_us"].astype(np.float64), m["end_us"].astype(np.float64), names)
    l_thread = _lookup(keys, launches["trace_id"], launches["pid"], launches["tid"])
    gpu_ops, gpu_us = _inside(thread, m["ts_us"], m["end_us"], l_thread, launches["ts_us"], launches["dur_us"])
    o_thread = _lookup(keys, ops["trace_id"], ops["pid"], ops["tid"])
    outer = _outermost(o_thread, ops["ts_us"], ops["end_us"], ops["event_id"])
    flop_ops, flop = _inside(thread, m["ts_us"], m["end_us"], o_thread[outer], ops["ts_us"][outer], ops["flop"][outer])
    return _calls_table(marks, tree, gpu_ops, gpu_us, flop_ops, flop)


def _array(values: np.ndarray) -> pa.Array:
    """A fetched numpy column as Arrow (masked arrays: their mask as nulls)."""
    if isinstance(values, np.ma.MaskedArray):
        return pa.array(values.data, mask=np.ma.getmaskarray(values))
    return pa.array(values)


def _calls_table(marks: pa.Table, tree: tuple[list[str], np.ndarray, np.ndarray], gpu_ops: np.ndarray,
                 gpu_us: np.ndarray, flop_ops: np.ndarray, flop: np.ndarray) -> pa.Table:
    paths, path_id, depth = tree
    flop_col = pa.array(flop, type=pa.float64(), mask=np.asarray(flop_ops) == 0)
    return pa.table({
        "trace_id": marks.column("trace_id"), "event_id": marks.column("event_id"),
        "step": marks.column("step"), "path": pa.array(paths, type=pa.string()),
        "path_id": pa.array(path_id, type=pa.int64()),
        "depth": pa.array(depth, type=pa.int64()), "name": marks.column("name"), "kind": marks.column("kind"),
        "ts_us": marks.column("ts_us"), "cpu_us": marks.column("dur_us"),
        "gpu_ops": pa.array(gpu_ops, type=pa.int64()), "gpu_us": pa.array(gpu_us, type=pa.float64()),
        "flop_ops": pa.array(flop_ops, type=pa.int64()), "flop": flop_col,
    })


def _thread_keys(trace_id: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> dict[tuple, int]:
    """Thread number (0, 1, ... in the calls' order) of each (trace, pid, tid) of the calls."""
    keys: dict[tuple, int] = {}
    for key in zip(trace_id.tolist(), pid.tolist(), tid.tolist(), strict=True):
        keys.setdefault(key, len(keys))
    return keys


def _lookup(keys: dict[tuple, int], trace_id: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Thread number of each row (-1: a thread without calls)."""
    return np.fromiter((keys.get(k, -1) for k in zip(trace_id.tolist(), pid.tolist(), tid.tolist(), strict=True)),
                       dtype=np.int64, count=len(trace_id))


class _Paths:
    """Per call: its path text (:func:`path_text`), path number and depth; the numbers interned
    by (parent's number, name), or by the names themselves for a thread of overlapping calls."""

    def __init__(self, names: list[str]) -> None:
        n = len(names)
        self.names = names
        self.text, self.path_id, self.depth = [""] * n, [0] * n, [0] * n
        self.ids: dict[tuple, int] = {}

    def set(self, i: int, outer: list[int], key: tuple, nested: bool = False) -> None:
        """Row ``i`` inside the rows ``outer`` (outermost first), interned under ``key``;
        ``nested``: ``outer[-1]``'s own path is ``outer[:-1]`` (the stack pass)."""
        self.path_id[i] = self.ids.setdefault(key, len(self.ids))
        depth = self.depth[i] = len(outer) + 1
        if nested and 1 < depth <= PATH_NAMES:
            self.text[i] = f"{self.text[outer[-1]]}.{self.names[i]}"
        else:
            self.text[i] = path_text([self.names[j] for j in _shown(outer)] + [self.names[i]], depth)


def _shown(outer: list[int]) -> list[int]:
    """The enclosing rows whose names a path shows (:data:`PATH_NAMES`)."""
    if len(outer) < PATH_NAMES:
        return outer
    return outer[:PATH_HEAD] + outer[len(outer) - (PATH_NAMES - PATH_HEAD - 1):]


def path_text(names: list[str], depth: int) -> str:
    """``names`` (all of a path's, or those :func:`_shown` keeps, the call's own last) joined by
    ``.``; a path of ``depth`` above :data:`PATH_NAMES` with ``...(N more)...`` after the first
    :data:`PATH_HEAD`."""
    if depth <= PATH_NAMES:
        return ".".join(names)
    hidden = depth - PATH_NAMES
    return ".".join(names[:PATH_HEAD]) + f"...({hidden} more)..." + ".".join(names[PATH_HEAD:])


def _paths(thread: np.ndarray, ts: np.ndarray, end: np.ndarray,
           names: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Path, path number and depth of each call (rows sorted per thread by ts, end descending,
    event_id). Memory: linear in the calls (a path text holds at most :data:`PATH_NAMES` names)."""
    out = _Paths(names)
    bounds = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if not _stack_pass(a, b, ts, end, out):
            _pairwise_pass(a, b, end, out)
    return out.text, np.array(out.path_id, np.int64), np.array(out.depth, np.int64)


def _stack_pass(a: int, b: int, ts: np.ndarray, end: np.ndarray, out: _Paths) -> bool:
    """The stack pass over rows [a, b) of one thread; False when two calls partly overlap."""
    t_list, e_list = ts[a:b].tolist(), end[a:b].tolist()
    stack: list[int] = []  # row indices, innermost last
    for k, (t, e) in enumerate(zip(t_list, e_list, strict=True)):
        while stack and e_list[stack[-1] - a] < e:
            if e_list[stack[-1] - a] >= t:
                return False
            stack.pop()
        i = a + k
        parent = out.path_id[stack[-1]] if stack else -1
        out.set(i, stack, (parent, out.names[i]), nested=True)
        stack.append(i)
    return True


def _pairwise_pass(a: int, b: int, end: np.ndarray, out: _Paths) -> None:
    """Rows [a, b) of a thread with partly overlapping calls: each row's enclosing calls are the
    earlier rows ending no earlier than it (module doc)."""
    for i in range(a, b):
        outer = (np.flatnonzero(end[a:i] >= end[i]) + a).tolist()
        out.set(i, outer, ("pairwise", *(out.names[j] for j in outer), out.names[i]))


def _outermost(thread: np.ndarray, ts: np.ndarray, end: np.ndarray, event_id: np.ndarray) -> np.ndarray:
    """Mask of the operators that no other operator of their thread encloses (threads -1 dropped):
    sorted per thread by (ts, end descending, event_id), an operator is enclosed when an earlier
    one of its thread ends no earlier."""
    order = np.lexsort((event_id, -end, ts, thread))
    t, e = thread[order], end[order].astype(np.float64)
    enclosed = np.zeros(len(t), bool)
    bounds = np.flatnonzero(np.r_[True, t[1:] != t[:-1], True]) if len(t) else np.zeros(1, np.int64)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if b - a > 1:
            enclosed[a + 1:b] = np.maximum.accumulate(e[a:b - 1]) >= e[a + 1:b]
    mask = np.zeros(len(thread), bool)
    mask[order[(t >= 0) & ~enclosed]] = True
    return mask


def _inside(thread: np.ndarray, ts: np.ndarray, end: np.ndarray, item_thread: np.ndarray, item_ts: np.ndarray,
            weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call (calls sorted by thread, at least one): the number of items of its thread starting
    in [ts, end), and their summed weight."""
    count, total = np.zeros(len(ts), np.int64), np.zeros(len(ts), np.float64)
    keep = item_thread >= 0
    order = np.lexsort((item_ts[keep], item_thread[keep]))
    it, its = item_thread[keep][order], item_ts[keep][order].astype(np.float64)
    w = np.asarray(weight, dtype=np.float64)[keep][order]
    w = np.r_[w, 0.0]  # a spare last item: every slice end is a valid index of np.add.reduceat
    bounds = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1], True])  # calls come sorted by thread
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        th, rows = thread[a], np.arange(a, b)
        lo_t, hi_t = np.searchsorted(it, th, "left"), np.searchsorted(it, th, "right")
        seg = its[lo_t:hi_t]
        lo = np.searchsorted(seg, ts[rows].astype(np.float64), "left") + lo_t
        hi = np.searchsorted(seg, end[rows].astype(np.float64), "left") + lo_t
        count[rows] = hi - lo
        sums = np.add.reduceat(w, np.column_stack((lo, hi)).ravel())[0::2]  # w[lo:hi] (w[lo] when empty)
        total[rows] = np.where(hi > lo, sums, 0.0)
    return count, total


KEPT = PerTrace("module_calls", trace_calls, __name__)
"""The module calls, kept per trace beside a database (:class:`~trace_report.store.cache.PerTrace`)."""
