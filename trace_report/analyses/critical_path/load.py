"""The events of one trace as :mod:`trace_report.analyses.critical_path.graph` events: what
:func:`trace_report.analyses.critical_path.critical_path` builds its graphs from.

The rows are read as columns (Arrow) and everything computed over every row of the trace
(each correlation's launch call, the queue lengths, which rows one step keeps, the inferred
syncs' streams) is done on the columns; graph events are made only for the rows kept. One step of
a 1M-event trace reads ~96k rows (its runtime calls and GPU operations over the whole trace) and
keeps ~200, so no row becomes a Python tuple that is never used. The
text columns (category, name, process, thread) stay Arrow arrays until a row's text is asked for
(:class:`_Text`). The ``args`` of the ``cuda_sync`` events are read by a query of their own
(:func:`_sync_waits`) and numpy sorts the rows: otherwise DuckDB decodes every row's JSON args to
keep a few, and sorts ~96k rows with their text.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import trace_report.analyses.critical_path.graph as cpg
from trace_report.store.trace_events import EVENTS
from trace_report.store.tracedb import TraceDB

GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
"""CUDA-graph launches: one call, many GPU operations (same correlation)."""
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
GPU_SIDE_CATS = (*GPU_CATS, "gpu_user_annotation", "cuda_sync")
LAUNCH_SIDE_CATS = ("cuda_runtime", "cuda_driver")
KEPT_OUTSIDE = (*LAUNCH_SIDE_CATS, *GPU_SIDE_CATS)
"""Categories read over the whole trace even when one window is analysed: runtime calls and GPU
operations give the streams' queue lengths and the syncs' streams from everything before the window."""
WAIT_SYNCS = ("Stream Wait Event", "Event Sync")
"""``cuda_sync`` events whose source is found among every launch before them (:func:`_event_waits`)."""


@dataclass
class TraceEvents:
    """The events of one trace as graph events, indexed by (ts, event_id) order."""

    cpu: list[cpg.Event]
    gpu: list[cpg.Event]
    syncs: list[cpg.Event]
    launches: dict[int, cpg.Event]


LAUNCH_SIDE, GPU_OP, SYNC, GPU_ANNOTATION, OTHER = 1, 2, 3, 4, 0
"""Row kinds (:func:`_rows`): a runtime call, a GPU operation, a ``cuda_sync`` event, a GPU-side
annotation, any other (CPU-side) event."""


class _Text:
    """A text column of :func:`_rows`, an Arrow array until rows are asked for: ``column[idx]``
    (``idx`` an array of row positions, or a boolean mask of the rows) is those rows' values as a
    numpy object array (str, None for NULL). Raises ``TypeError`` for any other index (a scalar,
    a slice): the numpy columns it stands for took those, and a silent misreading would be worse."""

    def __init__(self, array: pa.Array | pa.ChunkedArray) -> None:
        self.array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        at = np.asarray(idx)
        if at.dtype == bool and at.shape == (len(self),):
            at = np.flatnonzero(at)
        elif at.ndim != 1 or at.dtype.kind not in "iu" or (len(at) and (at.min() < 0 or at.max() >= len(self))):
            raise TypeError(f"rows of a text column by an array of positions or a mask, not {idx!r}")
        out = np.empty(len(at), dtype=object)
        out[:] = self.array.take(pa.array(at, type=pa.int64())).to_pylist()
        return out

    def __len__(self) -> int:
        return len(self.array)


@dataclass(frozen=True)
class _Rows:
    """The rows of :func:`_rows` in (ts, event_id) order as columns: ``cat``, ``name``, ``pid``,
    ``tid`` (:class:`_Text`; None for a NULL cat/name, pid and tid '' for NULL), ``kind``
    (:data:`LAUNCH_SIDE`...), ``counted`` (a launch call counted in the queue), ``wait`` (a Stream
    Wait Event / Event Sync), ``ts``, ``dur`` (µs), ``stream``, ``corr``, ``record``,
    ``record_stream`` (int64, with ``*_null`` masks)."""

    cat: _Text
    name: _Text
    pid: _Text
    tid: _Text
    kind: np.ndarray
    counted: np.ndarray
    wait: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    stream: np.ndarray
    stream_null: np.ndarray
    corr: np.ndarray
    corr_null: np.ndarray
    record: np.ndarray
    record_null: np.ndarray
    record_stream: np.ndarray
    record_stream_null: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)


def _split(col: pa.ChunkedArray, dtype: type, fill: object = 0) -> tuple[np.ndarray, np.ndarray]:
    """A numeric or boolean Arrow column as (values of ``dtype``, null mask); NULLs hold ``fill``."""
    null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.zeros(len(col), dtype=bool)
    return col.fill_null(fill).to_numpy(zero_copy_only=False).astype(dtype, copy=False), np.asarray(null, dtype=bool)


def _rows(db: TraceDB, trace_id: int, cpu_window: tuple[float, float] | None, counted: frozenset[str],
          source: str = EVENTS) -> _Rows:
    """The trace's events in (ts, event_id) order; with ``cpu_window`` (start, end µs), the other
    events (CPU operators, annotations, Python calls) only when they start inside it: the only ones
    :func:`trace_report.analyses.critical_path.window_of` keeps, so the path is the same and one
    step does not read every event of the trace. ``counted``: the launch calls counted in the queue."""
    where, params = "", [trace_id]
    if cpu_window is not None:
        where = f" AND (cat IN ({', '.join('?' * len(KEPT_OUTSIDE))}) OR ts_us BETWEEN ? AND ?)"
        params += [*KEPT_OUTSIDE, cpu_window[0] - 1.0, cpu_window[1] + 1.0]  # 1 us: HTA's rounding of ts
    kinds = ((LAUNCH_SIDE, LAUNCH_SIDE_CATS), (GPU_OP, GPU_CATS), (SYNC, ("cuda_sync",)),
             (GPU_ANNOTATION, ("gpu_user_annotation",)))
    kind = " ".join(f"WHEN cat IN ({', '.join(repr(c) for c in cats)}) THEN {k}" for k, cats in kinds)
    # no args (JSON text, needed for the cuda_sync rows alone: _sync_waits) and no ORDER BY (numpy
    # sorts the columns): reading every row's args and sorting in DuckDB was most of this read
    cols = db.con.sql(
        "SELECT event_id, cat, name, coalesce(pid, '') AS pid, coalesce(tid, '') AS tid, "
        f"CAST(CASE {kind} ELSE {OTHER} END AS TINYINT) AS kind, "
        f"coalesce(cat IN ({', '.join(repr(c) for c in LAUNCH_SIDE_CATS)}) AND name IN (SELECT unnest(?)), false) "
        f"AS counted, coalesce(cat = 'cuda_sync' AND name IN ({', '.join(repr(w) for w in WAIT_SYNCS)}), false) "
        "AS wait, "
        f"ts_us, coalesce(dur_us, 0) AS dur_us, stream, correlation FROM {source} "
        f"WHERE trace_id = ? AND ts_us IS NOT NULL{where}",
        params=[sorted(counted), *params]).to_arrow_table()
    event_id = _split(cols["event_id"], np.int64)[0]
    order = np.lexsort((event_id, _split(cols["ts_us"], np.float64)[0]))  # (ts, event_id) order
    cols = cols.take(pa.array(order, type=pa.int64()))
    stream, stream_null = _split(cols["stream"], np.int64)
    corr, corr_null = _split(cols["correlation"], np.int64)
    (record, record_null), (record_stream, record_stream_null) = _sync_waits(db, trace_id, source, event_id[order])
    return _Rows(_Text(cols["cat"]), _Text(cols["name"]), _Text(cols["pid"]), _Text(cols["tid"]),
                 _split(cols["kind"], np.int8)[0], _split(cols["counted"], bool, False)[0],
                 _split(cols["wait"], bool, False)[0], _split(cols["ts_us"], np.float64)[0],
                 _split(cols["dur_us"], np.float64)[0], stream, stream_null, corr, corr_null, record, record_null,
                 record_stream, record_stream_null)


def _sync_waits(db: TraceDB, trace_id: int, source: str,
                event_ids: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """For the rows ``event_ids`` of the trace: the ``cuda_sync`` events' args
    ``wait_on_cuda_event_record_corr_id`` and ``wait_on_stream`` (PyTorch >= 2.1), each as
    (int64 values, null mask); NULL for every other row and where the args lack them."""
    waits = db.con.sql(
        "SELECT event_id, TRY_CAST(f[1] AS BIGINT) AS record, TRY_CAST(f[2] AS BIGINT) AS record_stream FROM "
        "(SELECT event_id, json_extract_string(args, ['$.wait_on_cuda_event_record_corr_id', '$.wait_on_stream']) "
        f"AS f FROM {source} WHERE trace_id = ? AND cat = 'cuda_sync' AND ts_us IS NOT NULL)",
        params=[trace_id]).to_arrow_table()
    out = []
    for column in ("record", "record_stream"):
        values, null = np.zeros(len(event_ids), dtype=np.int64), np.ones(len(event_ids), dtype=bool)
        if waits.num_rows:
            known = waits.filter(pc.is_valid(waits[column]))
            at = pc.index_in(pa.array(event_ids, type=pa.int64()), value_set=known["event_id"].combine_chunks())
            hit = at.is_valid().to_numpy(zero_copy_only=False)
            values[hit] = known[column].to_numpy()[at.drop_null().to_numpy()]
            null[hit] = False
        out.append((values, null))
    return out[0], out[1]


def _fractional(db: TraceDB, trace_id: int, source: str = EVENTS) -> bool:
    """Whether a time stamp of the trace has a fraction of a µs (ns resolution)."""
    return bool(db.scalar(f"SELECT coalesce(bool_or(ts_us <> floor(ts_us)), false) FROM {source} "
                          "WHERE trace_id = $t AND ts_us IS NOT NULL", {"t": trace_id}))


def _rounded(rows: _Rows, hta_rounding: bool) -> _Rows:
    """HTA's parser on a fractional trace: ts up, end down, dur = end - ts (``round_down_time_stamps``)."""
    if not hta_rounding:
        return rows
    start, end = np.ceil(rows.ts), np.floor(rows.ts + rows.dur)
    return _Rows(**{**rows.__dict__, "ts": start, "dur": end - start})


def queue_launch_calls(db: TraceDB) -> frozenset[str]:
    """The runtime calls counted in a stream's queue (HTA's ``get_runtime_launch_events_mask``):
    view ``launch_calls`` with ``hta_queue`` (``store/sql/views_launches.sql``)."""
    return frozenset(n for (n,) in db.con.execute("SELECT name FROM launch_calls WHERE hta_queue").fetchall())


def load_trace(db: TraceDB, trace_id: int, *, cuda_graphs: bool, infer_syncs: bool, hta_rounding: bool,
               cpu_window: tuple[float, float] | None = None, source: str = EVENTS) -> TraceEvents:
    """The events of ``trace_id``: CPU events (only those starting in ``cpu_window`` when given),
    GPU operations with their launch and queue lengths, ``cuda_sync`` events, runtime calls by idx
    (an event's idx is its row's position in (ts, event_id) order).

    With ``cpu_window``, graph events only for the rows ``window_of`` can keep: the CPU rows, the
    runtime calls starting in it (with 2 us to spare for HTA's rounding), the GPU operations and
    ``cuda_sync`` events they launched. The queue lengths (``cuda_graphs``: graph launches count)
    and the inferred syncs' streams (``infer_syncs``) are worked out over every launch of the
    trace. A trace with Stream Wait Event / Event Sync events keeps every row: their sources may
    lie anywhere before the window (:func:`_event_waits`). ``hta_rounding``: HTA's whole-µs
    rounding, on a trace with fractional time stamps. ``source``: the relation the trace's rows are
    read from, ``events`` or one of :func:`~trace_report.store.trace_events.trace_event_sources`
    (the trace's own pieces, rows of that trace alone)."""
    counted = queue_launch_calls(db) | (GRAPH_LAUNCH_CALLS if cuda_graphs else frozenset())
    rows = _rounded(_rows(db, trace_id, cpu_window, counted, source),
                    hta_rounding and _fractional(db, trace_id, source))
    launch_side, gpu_op, sync = rows.kind == LAUNCH_SIDE, rows.kind == GPU_OP, rows.kind == SYNC
    waits = bool(rows.wait.any())
    lo, hi = (-np.inf, np.inf) if cpu_window is None or waits else (cpu_window[0] - 2.0, cpu_window[1] + 2.0)
    calls = np.flatnonzero(launch_side & ~rows.corr_null)
    corr_keys, first = np.unique(rows.corr[calls], return_index=True)  # each correlation's first call
    call_of = _launch_call_of(rows.corr, rows.corr_null, calls)  # row -> its launch call, -1: none
    queues = _queue_lengths(rows, call_of, gpu_op)
    launched = gpu_op | sync
    inside = (rows.ts >= lo) & (rows.ts <= hi)
    keep = (rows.kind == OTHER) | (launch_side & inside)
    keep |= launched & (call_of >= 0) & inside[np.maximum(call_of, 0)]
    cpu, gpu, syncs, launches = [], [], [], {}
    kept = np.flatnonzero(keep)
    # the kept rows' columns as Python lists, read once (not a numpy element at a time)
    columns = (kept, rows.cat, rows.name, rows.pid, rows.tid, rows.ts, rows.dur, rows.record_null, rows.record,
               rows.record_stream_null, rows.record_stream, launched, gpu_op, launch_side, rows.stream_null,
               rows.stream, call_of, *queues)
    for (idx, cat, name, pid, tid, ts, dur, record_null, record, record_stream_null, record_stream, is_launched,
         is_gpu_op, is_launch_side, stream_null, stream, call, q_launch, q_start, n_launch) in zip(
            *(c.tolist() if c is kept else c[kept].tolist() for c in columns), strict=True):
        ev = cpg.Event(idx, cat or "", name or "", str(pid), str(tid), ts, dur)
        if not record_null:
            ev.sync_src = record  # with sync_dst, resolved by _event_waits
            ev.sync_dst = None if record_stream_null else record_stream
        if is_launched:
            ev.stream, ev.launch = None if stream_null else stream, call
            if n_launch > 0:
                ev.q_launch, ev.q_start, ev.n_launch = q_launch, q_start, n_launch
            (gpu if is_gpu_op else syncs).append(ev)
            continue
        if is_launch_side:
            launches[idx] = ev
        cpu.append(ev)
    if waits:
        _event_waits(gpu, syncs, launches, dict(zip(corr_keys.tolist(), calls[first].tolist(), strict=True)))
    if infer_syncs and not sync.any():
        syncs = inferred_syncs(rows, call_of, gpu_op, launches)
    return TraceEvents(cpu, gpu, syncs, launches)


def _launch_call_of(corr: np.ndarray, null: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Each row's launch call (its row position), -1 for none: among the calls (positions
    ``calls``, ascending) with the row's correlation, the last one at or before the row, since
    a launch precedes what it launches (rows are in time order); the first such call where none
    precedes it. With one call per correlation, as CUPTI records them, that call; with a
    correlation id shared by several calls (a wrapped counter, an edited trace), each GPU
    operation goes to the launch just before it instead of all to the first."""
    out = np.full(len(corr), -1, dtype=np.int64)
    if not len(calls):
        return out
    keys, group = np.unique(corr[calls], return_inverse=True)
    span = np.int64(len(corr) + 1)
    order = np.lexsort((calls, group))
    call_key = group[order].astype(np.int64) * span + calls[order]
    first = calls[order][np.searchsorted(group[order], np.arange(len(keys)))]  # each group's first call
    rows = np.flatnonzero(~null)
    pos = np.minimum(np.searchsorted(keys, corr[rows]), len(keys) - 1)
    found = keys[pos] == corr[rows]
    rows, g = rows[found], pos[found].astype(np.int64)
    at = np.searchsorted(call_key, g * span + rows, side="right") - 1
    before = (at >= 0) & (call_key[np.maximum(at, 0)] // span == g)
    out[rows] = np.where(before, calls[order][np.maximum(at, 0)], first[g])
    return out


def _queue_lengths(rows: _Rows, call_of: np.ndarray, gpu_op: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q_launch, q_start, n_launch)`` per row; ``n_launch`` 0 for rows that are not a GPU
    operation launched by a counted call (``rows.counted``). The points of each stream (+1 at the
    launch call, -1 when its operation starts) in (ts, launch before start, idx) order, ties kept
    in operation order (a stable sort);
    q_start is the queue after the operation's point, q_launch after the last point of its call on
    the stream, n_launch the operations of that call on the stream."""
    out = tuple(np.zeros(len(rows), dtype=np.int64) for _ in range(3))
    ops = np.flatnonzero(gpu_op & (call_of >= 0))
    ops = ops[rows.counted[call_of[ops]]]
    n = len(ops)
    if not n:
        return out
    call_idx = call_of[ops]
    # streams as codes, NULL its own
    _, stream = np.unique(np.where(rows.stream_null[ops], np.iinfo(np.int64).min, rows.stream[ops]),
                          return_inverse=True)
    n_streams = int(stream.max()) + 1
    st = np.r_[stream, stream]
    ts = np.r_[rows.ts[call_idx], rows.ts[ops]]
    kind = np.r_[np.zeros(n, np.int64), np.ones(n, np.int64)]
    key = np.r_[call_idx, ops]
    own = np.r_[np.arange(n), np.arange(n)]
    order = np.lexsort((key, kind, ts, st))
    st, kind, key, own = st[order], kind[order], key[order], own[order]
    cum = np.cumsum(1 - 2 * kind)
    first = np.r_[True, st[1:] != st[:-1]]
    q = cum - np.r_[0, cum][np.flatnonzero(first)][np.cumsum(first) - 1]
    q_start = np.empty(n, np.int64)
    q_start[own[kind == 1]] = q[kind == 1]
    at = np.flatnonzero(kind == 0)
    new_group = np.r_[True, (st[at][1:] != st[at][:-1]) | (key[at][1:] != key[at][:-1]) | (np.diff(at) != 1)]
    last = at[np.flatnonzero(np.r_[new_group[1:], True])]
    q_launch = np.empty(n, np.int64)
    q_launch[own[at]] = q[last][np.cumsum(new_group) - 1]
    _, inverse, counts = np.unique(call_idx * n_streams + stream, return_inverse=True, return_counts=True)
    out[0][ops], out[1][ops], out[2][ops] = q_launch, q_start, counts[inverse]
    return out


def inferred_syncs(rows: _Rows, call_of: np.ndarray, gpu_op: np.ndarray,
                   launches: dict[int, cpg.Event]) -> list[cpg.Event]:
    """``cuda_sync`` events as PyTorch >= 2.1 records them, inferred from the runtime calls of a trace
    without them: a ``Context Sync`` for each ``cudaDeviceSynchronize`` (every stream), a ``Stream
    Sync`` for each ``cudaStreamSynchronize`` on the stream of the last GPU operation launched from
    the same thread before it (the trace does not say which stream it waited for). For the sync
    calls among ``launches`` (those kept); the streams are looked up among every operation's launch
    (``call_of``: each row's launch call, -1 for none; ``gpu_op``: the GPU operation rows)."""
    ops = np.flatnonzero(gpu_op & (call_of >= 0))
    calls = call_of[ops]
    per_thread: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    if any(c.name == "cudaStreamSynchronize" for c in launches.values()) and len(ops):
        threads = defaultdict(list)
        for i, (pid, tid) in enumerate(zip(rows.pid[calls].tolist(), rows.tid[calls].tolist(), strict=True)):
            threads[(str(pid), str(tid))].append(i)
        for thread, at in threads.items():
            at_ = np.asarray(at)
            order = at_[np.argsort(rows.ts[calls[at_]], kind="stable")]  # by launch time, ties in operation order
            per_thread[thread] = (rows.ts[calls[order]], ops[order])
    out = []
    for call in launches.values():
        if call.name == "cudaDeviceSynchronize":
            out.append(cpg.Event(-call.idx - 1, "cuda_sync", "Context Sync", "", "", call.ts, call.dur,
                                 launch=call.idx))
        elif call.name == "cudaStreamSynchronize" and (call.pid, call.tid) in per_thread:
            times, op_rows = per_thread[(call.pid, call.tid)]
            i = int(np.searchsorted(times, call.ts, side="left"))
            if i:
                op = op_rows[i - 1]
                out.append(cpg.Event(-call.idx - 1, "cuda_sync", "Stream Sync", "", "", call.ts, call.dur,
                                     stream=None if rows.stream_null[op] else int(rows.stream[op]), launch=call.idx))
    return out


def _event_waits(gpu: list[cpg.Event], syncs: list[cpg.Event], launches: dict[int, cpg.Event],
                 by_corr: dict[int, int]) -> None:
    """The operations behind ``Stream Wait Event`` and ``Event Sync`` events (PyTorch >= 2.1: args
    ``wait_on_cuda_event_record_corr_id``, ``wait_on_stream``), as HTA finds them
    (``_get_cuda_event_record_df``, ``_get_cuda_stream_wait_event_df``): the source is the operation
    of the last launch onto the recorded stream before the ``cudaEventRecord`` call; a Stream Wait
    Event's destination is the operation of the first launch after its ``cudaStreamWaitEvent``
    call from the same thread onto the waiting stream. Sets ``sync_src`` / ``sync_dst`` (operation
    idx, None where not found); on load they hold the record's correlation and stream."""
    waits = [s for s in syncs if s.name in WAIT_SYNCS]
    if not waits:
        return
    onto: dict[tuple, list[tuple[float, int, int]]] = defaultdict(list)  # (gpu pid, stream) -> launches
    from_thread: dict[tuple, list[tuple[float, int, int]]] = defaultdict(list)  # (cpu pid, tid, stream)
    for op in gpu:
        call = launches.get(op.launch) if op.launch is not None else None
        if call is not None:
            onto[(op.pid, op.stream)].append((call.ts, call.idx, op.idx))
            from_thread[(call.pid, call.tid, op.stream)].append((call.ts, call.idx, op.idx))
    for points in (*onto.values(), *from_thread.values()):
        points.sort()
    for s in waits:
        record_corr, record_stream = s.sync_src, s.sync_dst
        s.sync_src = s.sync_dst = None
        record = launches.get(by_corr.get(int(record_corr), -1)) if record_corr is not None else None
        if record is None or record_stream is None or record_stream < 0:
            continue
        before = onto.get((s.pid, int(record_stream)), [])
        i = bisect.bisect_left(before, (record.ts, record.idx))
        s.sync_src = before[i - 1][2] if i else None
        call = launches.get(s.launch) if s.launch is not None else None
        if s.name == "Stream Wait Event" and call is not None:
            after = from_thread.get((call.pid, call.tid, s.stream), [])
            j = bisect.bisect_left(after, (call.ts, call.idx))
            s.sync_dst = after[j][2] if j < len(after) else None
