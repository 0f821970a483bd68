"""The computation of ``critical-path`` (its declaration: the package's ``__init__``): the
critical path of each step of each rank, as HTA's.

HTA's lightweight critical path (``CriticalPathAnalysis.critical_path_analysis``), built from the
``events`` rows.

Per rank (trace) and ProfilerStep (the whole trace when it has none): the events of the window as
HTA clips them (CPU events starting inside it with a positive duration; GPU operations whose
runtime call starts inside it with a positive duration), the graph of
:mod:`trace_report.analyses.critical_path.graph` (HTA's rules, cited there) and its longest path.
``step_ms`` is the ProfilerStep's length; ``span_ms`` the time from its start to the last end of
the window's events (GPU operations launched in a step often end after it), which no path exceeds
(operations that overlap on one stream are counted once: the graph module). The path's time is
summed by what bounds it (HTA's ``bound_by``): ``cpu``, ``gpu_compute``,
``gpu_comm`` (NCCL/RCCL kernels), ``launch_overhead`` (runtime call start -> kernel start when the
stream was idle), ``kernel_gap`` (previous kernel end -> kernel start on a stream),
``data_loading`` (CPU operators matching ``data_loading``) and ``sync`` (GPU -> CPU sync edges:
zero by HTA's rule, the wait shows as GPU time on the path); per step the operators with the most
time on the path.

Queue lengths (whether a kernel was launched onto an idle stream) are those of HTA's
``TraceCounters._get_queue_length_time_series_for_rank`` over the whole trace: +1 at each launch call
(HTA's ``get_runtime_launch_events_mask``), -1 when its GPU operation starts. With ``cuda_graphs``
a ``cudaGraphLaunch`` counts too (+1 per operation it launches; HTA leaves it out:
https://github.com/facebookresearch/HolisticTraceAnalysis/issues/290).
``hta_rounding``: timestamps of a fractional (ns-resolution) trace rounded as HTA's parser does
(start up, end down to whole us), so that path lengths equal HTA's (tests/analyses/critical_path/test_critical_path.py).
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import trace_report.analyses.critical_path.graph as cpg
from trace_report.analyses.common.result import drop_single_trace_ids
from trace_report.analyses.critical_path import CriticalPathOptions
from trace_report.analyses.critical_path.load import TraceEvents, load_trace
from trace_report.errors import UsageError
from trace_report.store.trace_events import EVENTS, trace_event_sources
from trace_report.store.tracedb import TraceDB

KINDS = ("cpu", "gpu_compute", "gpu_comm", "launch_overhead", "kernel_gap", "data_loading", "sync")
SUMMARY_COLUMNS = ["trace_id", "rank", "step", "step_ms", "span_ms", "path_ms", *[f"{k}_ms" for k in KINDS],
                   "path_edges"]
OPERATOR_COLUMNS = ["trace_id", "rank", "step", "kind", "name", "ms", "pct_of_path", "edges"]


@dataclass
class CriticalPathResult:
    """``frame``: one row per (rank, step), ``SUMMARY_COLUMNS`` (ms); ``operators``: the ``top``
    operators per step by ms on the path, ``OPERATOR_COLUMNS``; ``paths``: the path edges per
    (trace_id, step) with their kind (for tests and notebooks); ``notes``."""

    frame: pd.DataFrame
    operators: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    paths: dict[tuple[int, int | None], list[tuple[cpg.Edge, str]]] = field(default_factory=dict)


def _windows(steps: list[tuple[int | None, float, float]], events: TraceEvents,
             step: int | None) -> list[tuple[int | None, float, float]]:
    """``steps`` (:func:`_step_windows`), or the whole trace (step None) when it has no steps, as
    HTA's ``annotation=""``."""
    if steps:
        return steps
    if step is not None or not events.cpu:
        return []
    return [(None, min(e.ts for e in events.cpu), max(e.end for e in events.cpu))]


def _step_windows(db: TraceDB, step: int | None) -> dict[int, list[tuple[int | None, float, float]]]:
    """Per trace, (step, start us, end us) of each ProfilerStep (or of ``step``), by start: one
    query for every trace (a query per trace read the events of every trace again: quadratic in
    the ranks)."""
    out: dict[int, list[tuple[int | None, float, float]]] = defaultdict(list)
    for trace_id, s, a, b in db.con.execute("SELECT trace_id, step, ts_us, end_us FROM steps "
                                            "WHERE $step IS NULL OR step = $step ORDER BY trace_id, ts_us, event_id",
                                            {"step": step}).fetchall():
        out[int(trace_id)].append((s, float(a), float(b)))
    return out


@dataclass(frozen=True)
class WindowIndex:
    """Where each window's events lie in a trace's :class:`TraceEvents`, found by binary search:
    ``cpu_ts``, the start of each CPU event (``events.cpu`` is in (ts, event_id) order); for GPU
    operations and syncs, the start of their runtime call (calls with a positive duration only),
    sorted, with the events' positions in ``events.gpu`` / ``events.syncs``. Built once per trace:
    a scan of every event per window made the every-step pass quadratic in the trace's length."""

    cpu_ts: np.ndarray
    gpu: tuple[np.ndarray, np.ndarray]
    syncs: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, events: TraceEvents) -> WindowIndex:
        return cls(np.fromiter((e.ts for e in events.cpu), float, len(events.cpu)),
                   _by_launch(events.gpu, events.launches), _by_launch(events.syncs, events.launches))


def _by_launch(launched: list[cpg.Event], launches: dict[int, cpg.Event]) -> tuple[np.ndarray, np.ndarray]:
    """(start of the runtime call, position in ``launched``) of the events whose call has a
    positive duration, by call start (then position)."""
    calls = [(launches.get(e.launch) if e.launch is not None else None) for e in launched]
    pos = np.array([i for i, c in enumerate(calls) if c is not None and c.dur > 0], dtype=np.int64)
    ts = np.array([calls[i].ts for i in pos.tolist()], dtype=float)  # type: ignore[union-attr]
    order = np.lexsort((pos, ts))
    return ts[order], pos[order]


def _inside(at: tuple[np.ndarray, np.ndarray], start: float, end: float) -> list[int]:
    """Positions (ascending) of the events whose runtime call starts in [start, end]."""
    ts, pos = at
    return np.sort(pos[np.searchsorted(ts, start, "left"):np.searchsorted(ts, end, "right")]).tolist()


def window_of(events: TraceEvents, start: float, end: float, data_loading: list[re.Pattern[str]],
              index: WindowIndex | None = None) -> cpg.Window:
    """HTA's clipping of [start, end] (``critical_path_analysis``): CPU events starting inside with a
    positive duration; GPU operations and syncs whose runtime call does (a call with a positive
    duration), each in the order of ``events``. ``index``: :meth:`WindowIndex.of` these events,
    for a caller that cuts several windows."""
    index = index or WindowIndex.of(events)
    lo, hi = np.searchsorted(index.cpu_ts, start, "left"), np.searchsorted(index.cpu_ts, end, "right")
    cpu = [e for e in events.cpu[lo:hi] if e.dur > 0]
    nodes = {e.idx for e in cpu if e.cat in cpg.NODE_CATS or any(p.search(e.name) for p in data_loading)}
    return cpg.Window(cpu, nodes, [events.gpu[i] for i in _inside(index.gpu, start, end)],
                      [events.syncs[i] for i in _inside(index.syncs, start, end)], events.launches)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (on again after it, if it was on): the
    graph events and edges of a trace are millions of small objects without cycles, which every
    collection of the oldest generation walks again, for most of the time spent creating them;
    reference counting still frees them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class CriticalPathTable:
    """The table ``critical-path`` shows (``frame``: the summary, or with ``operators`` the
    operators on the path) and the notes."""

    frame: pd.DataFrame
    notes: list[str]


def critical_path_table(db: TraceDB, options: CriticalPathOptions) -> CriticalPathTable:
    """:func:`critical_path` as the command shows it (the declaration's compute)."""
    result = critical_path(db, options)
    return CriticalPathTable(result.operators if options.operators else result.frame, result.notes)


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
    windows = _step_windows(db, opts.step)
    sources = trace_event_sources(db.con)  # each trace's own pieces: not every trace's per trace
    with gc_paused():
        for trace_id, rank in traces:
            _trace_paths(db, trace_id, rank, opts, patterns, windows.get(int(trace_id), []),
                         sources.get(int(trace_id), EVENTS), (summary, operators, notes, paths))
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


def _trace_paths(db: TraceDB, trace_id: int, rank: int, opts: CriticalPathOptions, patterns: list[re.Pattern[str]],
                 steps: list[tuple[int | None, float, float]], source: str,
                 out: tuple[list, list, list, dict]) -> None:
    """The path of each window of one trace (``steps``: its :func:`_step_windows`; ``source``: the
    relation its events are read from), appended to ``out`` (summary rows, operator rows, notes,
    paths)."""
    summary, operators, notes, paths = out
    one_step = opts.step is not None and steps
    cpu_window = (min(s for _, s, _ in steps), max(e for *_, e in steps)) if one_step else None
    events = load_trace(db, trace_id, cuda_graphs=opts.cuda_graphs, infer_syncs=opts.infer_syncs,
                        hta_rounding=opts.hta_rounding, cpu_window=cpu_window, source=source)
    index = WindowIndex.of(events)
    for step, start, end in _windows(steps, events, opts.step):
        try:
            graph = cpg.build(window_of(events, start, end, patterns, index))
            length, path = cpg.longest_path(graph)
        except cpg.CycleError as exc:
            notes.append(f"rank {rank} step {step}: no critical path ({exc})")
            continue
        kinds = [(e, cpg.edge_kind(graph, e, patterns)) for e in path]
        paths[(trace_id, step)] = kinds
        span = max([end, *graph.ts]) - start
        summary.append(_summary_row(trace_id, rank, step, (end - start, span), length, kinds))
        operators += _operator_rows(graph, trace_id, rank, step, length, kinds, opts.top)


def _check_step(db: TraceDB, step: int | None) -> None:
    """:class:`~trace_report.errors.UsageError` (exit 2) when ``step`` is given and no trace has
    that ProfilerStep; the message lists the steps there are."""
    if step is None:
        return
    steps = [int(s) for (s,) in db.con.execute("SELECT DISTINCT step FROM steps WHERE step IS NOT NULL ORDER BY 1")
             .fetchall()]
    if step not in steps:
        raise UsageError(f"no ProfilerStep#{step} (steps: {', '.join(map(str, steps)) or 'none'})")


def _summary_row(trace_id: int, rank: int, step: int | None, window_us: tuple[float, float], length_us: float,
                 kinds: list[tuple[cpg.Edge, str]]) -> list[object]:
    """``window_us``: (the step's length, its span: to the last end of its graph's events)."""
    per_kind = dict.fromkeys(KINDS, 0.0)
    for edge, kind in kinds:
        if kind in per_kind:
            per_kind[kind] += edge.weight
    return [trace_id, rank, step, window_us[0] / 1e3, window_us[1] / 1e3, length_us / 1e3,
            *[per_kind[k] / 1e3 for k in KINDS], len(kinds)]


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
