"""The critical path of each step of each rank (``trace-report critical-path``): HTA's lightweight
critical path (``CriticalPathAnalysis.critical_path_analysis``), built from the ``events`` rows.

Per rank (trace) and ProfilerStep (the whole trace when it has none): the events of the window as
HTA clips them (CPU events starting inside it with a positive duration; GPU operations whose
runtime call starts inside it with a positive duration), the graph of
:mod:`trace_report.analyses.critical_path_graph` (HTA's rules, cited there) and its longest path.
The path's time is summed by what bounds it (HTA's ``bound_by``): ``cpu``, ``gpu_compute``,
``gpu_comm`` (NCCL/RCCL kernels), ``launch_overhead`` (runtime call start -> kernel start when the
stream was idle), ``kernel_gap`` (previous kernel end -> kernel start on a stream),
``data_loading`` (CPU operators matching ``data_loading``) and ``sync`` (GPU -> CPU sync edges:
zero by HTA's rule, the wait shows as GPU time on the path); per step the operators with the most
time on the path.

Queue lengths (whether a kernel was launched onto an idle stream) are those of HTA's
``TraceCounters._get_queue_length_time_series_for_rank`` over the whole trace: +1 at each launch call
(HTA's ``get_runtime_launch_events_mask``), -1 when its GPU operation starts. With ``cuda_graphs``
a ``cudaGraphLaunch`` counts too (+1 per operation it launches; HTA issue #290 leaves it out).
``hta_rounding``: timestamps of a fractional (ns-resolution) trace rounded as HTA's parser does
(start up, end down to whole us), so that path lengths equal HTA's (tests/analyses/test_critical_path.py).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from trace_report.analyses import critical_path_graph as cpg
from trace_report.analyses.result import drop_single_trace_ids
from trace_report.errors import UsageError
from trace_report.store.tracedb import TraceDB

HTA_LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
    "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
    "hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream"})
"""Launch calls counted in the queue (HTA's ``TraceSymbolTable.get_runtime_launch_events_mask``)."""
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
"""CUDA-graph launches: one call, many GPU operations (same correlation)."""
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
GPU_SIDE_CATS = (*GPU_CATS, "gpu_user_annotation", "cuda_sync")
LAUNCH_SIDE_CATS = ("cuda_runtime", "cuda_driver")
DATA_LOADING = (r"enumerate\(DataLoader\)",)
"""The data-loading events by default (torch-tb-profiler's convention; HTA has none by default)."""
KINDS = ("cpu", "gpu_compute", "gpu_comm", "launch_overhead", "kernel_gap", "data_loading", "sync")
SUMMARY_COLUMNS = ["trace_id", "rank", "step", "step_ms", "path_ms", *[f"{k}_ms" for k in KINDS], "path_edges"]
OPERATOR_COLUMNS = ["trace_id", "rank", "step", "kind", "name", "ms", "pct_of_path", "edges"]


@dataclass(frozen=True)
class CriticalPathOptions:
    """``rank`` / ``step``: only that rank / ProfilerStep number; ``data_loading``: regular
    expressions of data-loading event names (searched; their events get nodes, as HTA's
    ``data_load_events``); ``cuda_graphs``: count CUDA-graph launches in the queue;
    ``infer_syncs``: where a trace has no ``cuda_sync`` events, infer them from the sync calls
    (:func:`inferred_syncs`; HTA adds no sync edge then);
    ``hta_rounding``: HTA's whole-us rounding of ns traces; ``top``: operators kept per step."""

    rank: int | None = None
    step: int | None = None
    data_loading: tuple[str, ...] = DATA_LOADING
    cuda_graphs: bool = True
    infer_syncs: bool = True
    hta_rounding: bool = False
    top: int = 10


@dataclass
class CriticalPathResult:
    """``frame``: one row per (rank, step), ``SUMMARY_COLUMNS`` (ms); ``operators``: the ``top``
    operators per step by ms on the path, ``OPERATOR_COLUMNS``; ``paths``: the path edges per
    (trace_id, step) with their kind (for tests and notebooks); ``notes``."""

    frame: pd.DataFrame
    operators: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    paths: dict[tuple[int, int | None], list[tuple[cpg.Edge, str]]] = field(default_factory=dict)


@dataclass
class TraceEvents:
    """The events of one trace as graph events, indexed by (ts, event_id) order."""

    cpu: list[cpg.Event]
    gpu: list[cpg.Event]
    syncs: list[cpg.Event]
    launches: dict[int, cpg.Event]


KEPT_OUTSIDE = (*LAUNCH_SIDE_CATS, *GPU_SIDE_CATS)
"""Categories read over the whole trace even when one window is analysed: runtime calls and GPU
operations give the streams' queue lengths and the syncs' streams from everything before the window."""


def _rows(db: TraceDB, trace_id: int, cpu_window: tuple[float, float] | None) -> list[tuple]:
    """The trace's events in (ts, event_id) order; with ``cpu_window`` (start, end µs), the other
    events (CPU operators, annotations, Python calls) only when they start inside it: the only ones
    :func:`window_of` keeps, so the path is the same (one step of a 1M-event trace: 6 s -> 1 s)."""
    where, params = "", [trace_id]
    if cpu_window is not None:
        where = f" AND (cat IN ({', '.join('?' * len(KEPT_OUTSIDE))}) OR ts_us BETWEEN ? AND ?)"
        params += [*KEPT_OUTSIDE, cpu_window[0] - 1.0, cpu_window[1] + 1.0]  # 1 us: HTA's rounding of ts
    waits = ", ".join(f"CASE WHEN cat = 'cuda_sync' THEN TRY_CAST(json_extract_string(args, '$.{k}') AS BIGINT) END"
                      for k in ("wait_on_cuda_event_record_corr_id", "wait_on_stream"))
    return db.con.execute(
        "SELECT cat, name, coalesce(pid, ''), coalesce(tid, ''), ts_us, coalesce(dur_us, 0), stream, correlation, "
        f"{waits} FROM events WHERE trace_id = ? AND ts_us IS NOT NULL{where} ORDER BY ts_us, event_id",
        params).fetchall()


def _fractional(db: TraceDB, trace_id: int) -> bool:
    """Whether a time stamp of the trace has a fraction of a µs (ns resolution)."""
    return bool(db.scalar("SELECT coalesce(bool_or(ts_us <> floor(ts_us)), false) FROM events "
                          "WHERE trace_id = $t AND ts_us IS NOT NULL", {"t": trace_id}))


def _rounded(rows: list[tuple], hta_rounding: bool) -> list[tuple]:
    """HTA's parser on a fractional trace: ts up, end down, dur = end - ts (``round_down_time_stamps``)."""
    if not hta_rounding:
        return rows
    out = []
    for cat, name, pid, tid, ts, dur, *rest in rows:
        start, end = math.ceil(ts), math.floor(ts + dur)
        out.append((cat, name, pid, tid, float(start), float(end - start), *rest))
    return out


def load_trace(db: TraceDB, trace_id: int, opts: CriticalPathOptions,
               cpu_window: tuple[float, float] | None = None) -> TraceEvents:
    """The events of ``trace_id``: CPU events (only those starting in ``cpu_window`` when given),
    GPU operations with their launch and queue lengths, ``cuda_sync`` events, runtime calls by idx.

    With ``cpu_window``, graph events only for the rows :func:`window_of` can keep: the CPU rows,
    the runtime calls starting in it (with 2 us to spare for HTA's rounding), the GPU operations
    and ``cuda_sync`` events they launched. The queue lengths and the inferred syncs' streams are
    worked out over every launch of the trace, from the rows themselves (on a 1M-event trace ~96k
    rows, of which one step needs ~200). A trace with Stream Wait Event / Event Sync events keeps
    every row: their sources may lie anywhere before the window (:func:`_event_waits`)."""
    rows = _rounded(_rows(db, trace_id, cpu_window), opts.hta_rounding and _fractional(db, trace_id))
    waits = any(r[0] == "cuda_sync" and r[1] in WAIT_SYNCS for r in rows)
    lo, hi = (-math.inf, math.inf) if cpu_window is None or waits else (cpu_window[0] - 2.0, cpu_window[1] + 2.0)
    by_corr: dict[int, int] = {}
    ops: list[int] = []
    has_syncs = False
    for idx, (cat, _, _, _, _, _, _, corr, _, _) in enumerate(rows):
        if cat in LAUNCH_SIDE_CATS:
            if corr is not None:
                by_corr.setdefault(int(corr), idx)
        elif cat in GPU_CATS:
            ops.append(idx)
        elif cat == "cuda_sync":
            has_syncs = True
    launch_of = {i: by_corr.get(int(rows[i][7])) if rows[i][7] is not None else None for i in ops}
    queues = _queue_lengths(rows, ops, launch_of, opts.cuda_graphs)
    cpu, gpu, syncs, launches = [], [], [], {}
    for idx, (cat, name, pid, tid, ts, dur, stream, corr, record, record_stream) in enumerate(rows):
        if cat in LAUNCH_SIDE_CATS and not lo <= ts <= hi:
            continue
        if cat in GPU_SIDE_CATS:  # kept when launched by a kept call: window_of drops the others
            call = by_corr.get(int(corr)) if corr is not None else None
            if cat not in (*GPU_CATS, "cuda_sync") or call is None or not lo <= rows[call][4] <= hi:
                continue
        ev = cpg.Event(idx, cat or "", name or "", str(pid), str(tid), float(ts), float(dur))
        if record is not None:
            ev.sync_src, ev.sync_dst = record, record_stream  # resolved by _event_waits
        if cat in GPU_SIDE_CATS:
            ev.stream, ev.launch = None if stream is None else int(stream), call
            if idx in queues:
                ev.q_launch, ev.q_start, ev.n_launch = queues[idx]
            (gpu if cat in GPU_CATS else syncs).append(ev)
            continue
        if cat in LAUNCH_SIDE_CATS:
            launches[idx] = ev
        cpu.append(ev)
    if waits:
        _event_waits(gpu, syncs, launches, by_corr)
    if opts.infer_syncs and not has_syncs:
        syncs = inferred_syncs(rows, ops, launch_of, launches)
    return TraceEvents(cpu, gpu, syncs, launches)


WAIT_SYNCS = ("Stream Wait Event", "Event Sync")
"""``cuda_sync`` events whose source is found among every launch before them (:func:`_event_waits`)."""


def _queue_lengths(rows: list[tuple], ops: list[int], launch_of: dict[int, int | None],
                   cuda_graphs: bool) -> dict[int, tuple[int, int, int]]:
    """``(q_launch, q_start, n_launch)`` of each GPU operation (``ops``: row idx) launched by a
    counted call, by operation idx (numpy). The points of each stream (+1 at the launch call, -1
    when its operation starts) in (ts, launch before start, idx) order, ties kept in operation order
    (a stable sort); q_start is the queue after the operation's point, q_launch after the last
    point of its call on the stream, n_launch the operations of that call on the stream."""
    counted = HTA_LAUNCH_CALLS | (GRAPH_LAUNCH_CALLS if cuda_graphs else frozenset())
    mine = [(i, c) for i in ops if (c := launch_of[i]) is not None and rows[c][1] in counted]
    if not mine:
        return {}
    codes: dict[int | None, int] = {}
    op_idx = np.array([i for i, _ in mine], dtype=np.int64)
    call_idx = np.array([c for _, c in mine], dtype=np.int64)
    stream = np.array([codes.setdefault(None if rows[i][6] is None else int(rows[i][6]), len(codes)) for i, _ in mine],
                      dtype=np.int64)
    n = len(mine)
    st = np.r_[stream, stream]
    ts = np.array([float(rows[c][4]) for c in call_idx.tolist()] + [float(rows[i][4]) for i in op_idx.tolist()])
    kind = np.r_[np.zeros(n, np.int64), np.ones(n, np.int64)]
    key = np.r_[call_idx, op_idx]
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
    _, inverse, counts = np.unique(call_idx * len(codes) + stream, return_inverse=True, return_counts=True)
    n_launch = counts[inverse]
    return dict(zip(op_idx.tolist(), zip(q_launch.tolist(), q_start.tolist(), n_launch.tolist(), strict=True),
                    strict=True))


def inferred_syncs(rows: list[tuple], ops: list[int], launch_of: dict[int, int | None],
                   launches: dict[int, cpg.Event]) -> list[cpg.Event]:
    """``cuda_sync`` events as PyTorch >= 2.1 records them, inferred from the runtime calls of a trace
    without them: a ``Context Sync`` for each ``cudaDeviceSynchronize`` (every stream), a ``Stream
    Sync`` for each ``cudaStreamSynchronize`` on the stream of the last GPU operation launched from
    the same thread before it (the trace does not say which stream it waited for). For the sync
    calls among ``launches`` (those kept); the streams are looked up among every operation's launch
    (``rows``, ``ops``, ``launch_of``: see :func:`load_trace`)."""
    per_thread: dict[tuple[str, str], list[tuple[float, int | None]]] = defaultdict(list)
    for i in ops:
        if (c := launch_of[i]) is not None:
            per_thread[(str(rows[c][2]), str(rows[c][3]))].append(
                (float(rows[c][4]), None if rows[i][6] is None else int(rows[i][6])))
    for launched in per_thread.values():
        launched.sort(key=lambda p: p[0])
    out = []
    for call in launches.values():
        if call.name == "cudaDeviceSynchronize":
            out.append(cpg.Event(-call.idx - 1, "cuda_sync", "Context Sync", "", "", call.ts, call.dur,
                                 launch=call.idx))
        elif call.name == "cudaStreamSynchronize":
            launched = per_thread.get((call.pid, call.tid), [])
            i = bisect.bisect_left(launched, call.ts, key=lambda p: p[0])
            if i:
                out.append(cpg.Event(-call.idx - 1, "cuda_sync", "Stream Sync", "", "", call.ts, call.dur,
                                     stream=launched[i - 1][1], launch=call.idx))
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


def _windows(steps: list[tuple[int | None, float, float]], events: TraceEvents,
             step: int | None) -> list[tuple[int | None, float, float]]:
    """``steps`` (:func:`_step_windows`), or the whole trace (step None) when it has no steps, as
    HTA's ``annotation=""``."""
    if steps:
        return steps
    if step is not None or not events.cpu:
        return []
    return [(None, min(e.ts for e in events.cpu), max(e.end for e in events.cpu))]


def _step_windows(db: TraceDB, trace_id: int, step: int | None) -> list[tuple[int | None, float, float]]:
    """(step, start us, end us) of each ProfilerStep of the trace (or of ``step``)."""
    steps = db.con.execute("SELECT step, ts_us, end_us FROM steps WHERE trace_id = ? ORDER BY ts_us",
                           [trace_id]).fetchall()
    return [(s, float(a), float(b)) for s, a, b in steps if step is None or s == step]


def window_of(events: TraceEvents, start: float, end: float, data_loading: list[re.Pattern[str]]) -> cpg.Window:
    """HTA's clipping of [start, end] (``critical_path_analysis``): CPU events starting inside with a
    positive duration; GPU operations and syncs whose runtime call does."""
    cpu = [e for e in events.cpu if start <= e.ts <= end and e.dur > 0]
    nodes = {e.idx for e in cpu if e.cat in cpg.NODE_CATS or any(p.search(e.name) for p in data_loading)}

    def launched_inside(e: cpg.Event) -> bool:
        call = events.launches.get(e.launch) if e.launch is not None else None
        return call is not None and start <= call.ts <= end and call.dur > 0

    return cpg.Window(cpu, nodes, [e for e in events.gpu if launched_inside(e)],
                      [e for e in events.syncs if launched_inside(e)], events.launches)


def critical_path(db: TraceDB, opts: CriticalPathOptions | None = None) -> CriticalPathResult:
    """The critical path of each (rank, step): :class:`CriticalPathResult`. Errors:
    :class:`~trace_report.errors.UsageError` for a rank or a step no trace has."""
    opts = opts or CriticalPathOptions()
    db.check_rank(opts.rank)
    patterns = [re.compile(p) for p in opts.data_loading]
    traces = db.con.execute("SELECT trace_id, rank FROM traces WHERE ? IS NULL OR rank = ? ORDER BY rank, trace_id",
                            [opts.rank, opts.rank]).fetchall()
    _check_step(db, opts.step)
    summary, operators, notes, paths = [], [], [], {}
    for trace_id, rank in traces:
        steps = _step_windows(db, trace_id, opts.step)
        one_step = opts.step is not None and steps
        cpu_window = (min(s for _, s, _ in steps), max(e for *_, e in steps)) if one_step else None
        events = load_trace(db, trace_id, opts, cpu_window)
        for step, start, end in _windows(steps, events, opts.step):
            try:
                graph = cpg.build(window_of(events, start, end, patterns))
                length, path = cpg.longest_path(graph)
            except cpg.CycleError as exc:
                notes.append(f"rank {rank} step {step}: no critical path ({exc})")
                continue
            kinds = [(e, cpg.edge_kind(graph, e, patterns)) for e in path]
            paths[(trace_id, step)] = kinds
            summary.append(_summary_row(trace_id, rank, step, end - start, length, kinds))
            operators += _operator_rows(graph, trace_id, rank, step, length, kinds, opts.top)
    if not summary:
        notes.append("no window to analyse (no events, or no such step)")
    if traces and not db.scalar("SELECT count(*) FROM events WHERE cat = 'cuda_sync'"):
        notes.append("the trace has no cuda_sync events (PyTorch >= 2.1 records them): GPU -> CPU waits inferred "
                     "from cudaDeviceSynchronize / cudaStreamSynchronize calls" if opts.infer_syncs else
                     "the trace has no cuda_sync events (PyTorch >= 2.1 records them): GPU -> CPU waits are not "
                     "edges, so a sync call's time is left off the path, as in HTA")
    frame = drop_single_trace_ids(pd.DataFrame(summary, columns=SUMMARY_COLUMNS))
    ops = drop_single_trace_ids(pd.DataFrame(operators, columns=OPERATOR_COLUMNS))
    return CriticalPathResult(frame, ops, notes, paths)


def _check_step(db: TraceDB, step: int | None) -> None:
    """:class:`~trace_report.errors.UsageError` (exit 2) when ``step`` is given and no trace has
    that ProfilerStep; the message lists the steps there are."""
    if step is None:
        return
    steps = [int(s) for (s,) in db.con.execute("SELECT DISTINCT step FROM steps WHERE step IS NOT NULL ORDER BY 1")
             .fetchall()]
    if step not in steps:
        raise UsageError(f"no ProfilerStep#{step} (steps: {', '.join(map(str, steps)) or 'none'})")


def _summary_row(trace_id: int, rank: int, step: int | None, window_us: float, length_us: float,
                 kinds: list[tuple[cpg.Edge, str]]) -> list[object]:
    per_kind = dict.fromkeys(KINDS, 0.0)
    for edge, kind in kinds:
        if kind in per_kind:
            per_kind[kind] += edge.weight
    return [trace_id, rank, step, window_us / 1e3, length_us / 1e3, *[per_kind[k] / 1e3 for k in KINDS], len(kinds)]


def _operator_rows(graph: cpg.Graph, trace_id: int, rank: int, step: int | None, length_us: float,
                   kinds: list[tuple[cpg.Edge, str]], top: int) -> list[list[object]]:
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for edge, kind in kinds:
        if edge.weight <= 0:
            continue
        ev = graph.events.get(edge.event) if edge.event is not None else None
        key = (kind, ev.name if ev is not None else "(no operator)")
        totals[key][0] += edge.weight
        totals[key][1] += 1
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return [[trace_id, rank, step, kind, name, us / 1e3, 100.0 * us / length_us if length_us else 0.0, int(n)]
            for (kind, name), (us, n) in ranked]
