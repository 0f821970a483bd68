"""The critical-path graph of one window of one rank (HTA's lightweight critical path), in plain
Python: events in, the longest path out. No database, no networkx.

Source of every rule: HTA 0.6 ``hta/analyzers/critical_path_analysis.py`` (``CPGraph``) and the
call stacks of ``hta/common/call_stack.py`` (``CallStackGraph``, ``compare_events``):

- Nodes: the start and the end of each CPU operator and runtime call (``cpu_op``,
  ``cuda_runtime``, ``cuda_driver``; plus data-loading events when asked) and of each GPU
  operation launched inside the window; ordered by (time, event index).
- Runtime lock (``_construct_graph_from_cuda_runtime_events``): ``cudaLaunchKernel``,
  ``cudaMemcpyAsync`` and ``cudaHostAlloc`` hold one lock across threads: start -> end of each call
  (its duration), zero-weight edges from the starts of calls still open and from the previous call's
  end to each end.
- Call stacks (``_construct_graph_from_call_stacks``): per CPU thread (the backward thread merged
  into the forward thread when each is one thread), a depth-first walk of the nesting links each
  operator boundary to the next: the time between them is an edge of the enclosing operator
  (zero between top-level operators; zero for the duration of a blocking sync call,
  ``BLOCKING_SYNC_CALLS``).
- GPU (``_construct_graph_from_kernels``): each operation's start -> end (its duration); a launch
  edge from its runtime call's start when the stream's queue was empty (queue length 1 at the
  launch and 0 when it started, HTA's ``TraceCounters`` queue) and the previous operation on the
  stream had ended before the launch; else an edge from the previous operation's end on the stream
  (the kernel-to-kernel gap) when that gap is < 1500 us; ``Context Sync`` / ``Stream Sync`` events
  (``cuda_sync``) give zero-weight edges from the last operation on every stream / on their stream
  to the end of the runtime call that waited.
- Operations of one stream that overlap (one starts before the previous one on its stream ends:
  clock skew, or programmatic dependent launch): HTA adds its kernel-to-kernel edge from the
  previous end back to the later start, a negative weight that ``_validate_graph`` sets to 0
  (or, with ``critical_path_strict_negative_weight_check``, rejects the graph), so a path through
  both counts their overlap twice and can be longer than the time it spans. Here the later
  operation instead gets an edge from the previous end to its own end (its time past the
  previous one, attributed to it), none when it ends first (the previous end stays the stream's
  last), so the overlap is counted once.
- Weights: destination time - source time, negative ones (clock rounding) set to 0 as HTA's
  ``_validate_graph`` does; the longest path is computed in one pass over a topological order
  (Kahn's algorithm), O(V + E), as ``networkx.dag_longest_path`` finds it.

Beyond HTA: a CUDA-graph launch (``cudaGraphLaunch``) puts all its operations on the queue at once,
so the first of them gets the launch edge when the queue was otherwise empty (``n_launch``); HTA
leaves these launches out (https://github.com/facebookresearch/HolisticTraceAnalysis/issues/290).

Waits through CUDA events (PyTorch >= 2.1 ``cuda_sync`` events, as HTA's ``_construct_graph_from_kernels``):
a ``Stream Wait Event`` (``cudaStreamWaitEvent``) gives a zero-weight edge from the end of the
operation recorded before the event (``cudaEventRecord``) to the start of the next operation
launched onto the waiting stream, which then has a launch or kernel-gap edge only when that
operation ended before its launch / before the previous operation on its stream; an ``Event Sync``
(``cudaEventSynchronize``) a zero-weight edge from that operation's end to the end of the call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

OPERATOR = "operator"
DEPENDENCY = "dependency"
LAUNCH = "launch_delay"
KERNEL_GAP = "kernel_kernel_delay"
SYNC = "sync_dependency"
"""Edge types, HTA's ``CPEdgeType`` (``critical_path_operator``, ...)."""

LOCK_CALLS = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})
"""Runtime calls that share the CUDA runtime lock (HTA's ``CUDA_RUNTIME_EVENTS``)."""
BLOCKING_SYNC_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery",
                                 "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync"})
"""Calls whose own time is not CPU work on the path (HTA's ``CPGraph.BLOCKING_SYNC_CALLS``)."""
NODE_CATS = frozenset({"cpu_op", "cuda_runtime", "cuda_driver"})
"""CPU categories with nodes (HTA's ``get_operator_or_cuda_runtime_mask``)."""
KERNEL_GAP_LIMIT_US = 1500.0
"""A longer gap between two operations of a stream is not a kernel-to-kernel delay (HTA's
``KERNEL_KERNEL_DELAY_THRESHOLD_US``)."""


class CycleError(ValueError):
    """The graph of a window has a cycle (inconsistent timestamps): no longest path."""


@dataclass
class Event:
    """One trace event as the graph needs it. ``idx``: unique, orders ties (HTA: its dataframe
    index); ``ts`` / ``dur`` in us; GPU operations and ``cuda_sync`` events: ``stream`` and
    ``launch`` (the ``idx`` of the runtime call with their correlation); GPU operations launched by
    a counted call: ``q_launch`` (queue length of the stream just after the launch), ``q_start``
    (just after the operation started), ``n_launch`` (operations of that launch on the stream).
    ``Stream Wait Event`` / ``Event Sync`` events: ``sync_src``, the idx of the GPU operation waited
    for, and (Stream Wait Event) ``sync_dst``, the idx of the operation that waits."""

    idx: int
    cat: str
    name: str
    pid: str
    tid: str
    ts: float
    dur: float
    stream: int | None = None
    launch: int | None = None
    q_launch: int | None = None
    q_start: int | None = None
    n_launch: int = 1
    sync_src: int | None = None
    sync_dst: int | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True)
class Edge:
    """``src`` -> ``dst`` (node ids), its type, weight (us) and the event it is attributed to
    (HTA's ``_attribute_edge``; a launch edge: the operation it launched), or None."""

    src: int
    dst: int
    kind: str
    weight: float
    event: int | None = None


@dataclass
class Window:
    """The events of one window: ``cpu`` every CPU event starting in it with a positive duration
    (annotations too: they shape the nesting), ``node_ids`` those with nodes, ``gpu`` the GPU
    operations whose runtime call starts in it, ``syncs`` its ``cuda_sync`` events, ``launches``
    every runtime call by ``idx`` (for launch times)."""

    cpu: list[Event]
    node_ids: set[int]
    gpu: list[Event]
    syncs: list[Event] = field(default_factory=list)
    launches: dict[int, Event] = field(default_factory=dict)


@dataclass
class Graph:
    """Nodes (parallel lists: time, event idx, start or end) and edges."""

    ts: list[float] = field(default_factory=list)
    ev: list[int] = field(default_factory=list)
    is_start: list[bool] = field(default_factory=list)
    start_of: dict[int, int] = field(default_factory=dict)
    end_of: dict[int, int] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    events: dict[int, Event] = field(default_factory=dict)

    def add(self, src: int, dst: int, kind: str, *, zero: bool = False, event: int | None = None) -> Edge:
        weight = 0.0 if zero or kind in (DEPENDENCY, SYNC) else max(self.ts[dst] - self.ts[src], 0.0)
        edge = Edge(src, dst, kind, weight, event)
        self.edges.append(edge)
        return edge


def build(window: Window) -> Graph:
    """The graph of ``window`` by HTA's rules (module docstring)."""
    g = Graph()
    _nodes(g, [e for e in window.cpu if e.idx in window.node_ids] + window.gpu)
    g.events.update({e.idx: e for e in window.cpu if e.idx not in g.events})  # names of parents
    _runtime_lock(g)
    for thread in _threads(window.cpu).values():
        _call_stack(g, thread, window.node_ids)
    _gpu(g, window)
    return g


def _nodes(g: Graph, events: list[Event]) -> None:
    points = [(e.ts, e.idx, 0, e) for e in events] + [(e.end, e.idx, 1, e) for e in events]
    points.sort(key=lambda p: p[:3])
    for n, (t, idx, end, e) in enumerate(points):
        g.ts.append(t)
        g.ev.append(idx)
        g.is_start.append(not end)
        (g.end_of if end else g.start_of)[idx] = n
        g.events[idx] = e


def _is_lock(g: Graph, node: int) -> bool:
    return g.events[g.ev[node]].name in LOCK_CALLS


def _runtime_lock(g: Graph) -> None:
    open_starts: list[int] = []
    last: int | None = None
    for node in range(len(g.ts)):
        if not _is_lock(g, node):
            continue
        if g.is_start[node]:
            open_starts.append(node)
        else:
            while open_starts:
                prev = open_starts.pop()
                if g.ev[prev] == g.ev[node]:
                    g.add(prev, node, OPERATOR, event=g.ev[node])
                else:
                    g.add(prev, node, DEPENDENCY)
            if last is not None and not g.is_start[last]:
                g.add(last, node, DEPENDENCY)
        last = node


def _one_tid(events: list[Event], word: str) -> str | None:
    tids = {e.tid for e in events if e.cat in ("cpu_op", "user_annotation") and word in e.name}
    return next(iter(tids)) if len(tids) == 1 else None


def _threads(cpu: list[Event]) -> dict[tuple[str, str], list[Event]]:
    """CPU events per (pid, tid), the backward thread (the one thread with ``autograd`` events)
    merged into the forward one (``forward``), HTA's ``_get_fwd_tid`` / ``_get_bwd_tid``."""
    fwd, bwd = _one_tid(cpu, "forward"), _one_tid(cpu, "autograd")
    out: dict[tuple[str, str], list[Event]] = {}
    for e in cpu:
        tid = fwd if fwd and bwd and fwd != bwd and e.tid == bwd else e.tid
        out.setdefault((e.pid, tid), []).append(e)
    return out


def _nesting(events: list[Event]) -> dict[int, list[int]]:
    """Children per event idx (-1: the root), HTA's ``CallStackGraph``: boundaries sorted as
    ``compare_events`` orders them (ends before starts at one time; longer first among starts),
    a start pushed under the top of the stack, any end popping the top."""
    points = [(e.ts, 1, -e.dur, e.idx) for e in events] + [(e.end, 0, e.dur, -e.idx) for e in events]
    points.sort()
    children: dict[int, list[int]] = {-1: []}
    stack: list[int] = []
    for _, is_start, _, key in points:
        if is_start:
            children.setdefault(stack[-1] if stack else -1, []).append(key)
            children.setdefault(key, [])
            stack.append(key)
        elif stack:
            stack.pop()
    return children


def _walk(children: dict[int, list[int]]) -> Iterator[tuple[int, int, bool]]:
    """(event idx, parent idx, entering) in depth-first order, without recursion."""
    stack: list[tuple[int, int, int]] = [(-1, -1, 0)]
    while stack:
        idx, parent, pos = stack.pop()
        if pos == 0 and idx != -1:
            yield idx, parent, True
        kids = children.get(idx, [])
        if pos < len(kids):
            stack.append((idx, parent, pos + 1))
            stack.append((kids[pos], idx, 0))
        elif idx != -1:
            yield idx, parent, False


def _call_stack(g: Graph, thread: list[Event], node_ids: set[int]) -> None:
    last: int | None = None
    last_parent: int | None = None
    depth = 0
    for idx, parent, entering in _walk(_nesting(thread)):
        if idx not in node_ids:
            continue
        node = g.start_of[idx] if entering else g.end_of[idx]
        if last is not None and not (_is_lock(g, last) and _is_lock(g, node)
                                     and (g.is_start[last] or not g.is_start[node])):
            kind = DEPENDENCY if entering and depth == 0 else OPERATOR
            zero = not entering and g.events[idx].name in BLOCKING_SYNC_CALLS
            g.add(last, node, kind, zero=zero, event=_attributed(g, last, node, last_parent))
        last, last_parent = node, parent
        depth += 1 if entering else -1


def _attributed(g: Graph, src: int, dst: int, src_parent: int | None) -> int | None:
    """HTA's ``_attribute_edge`` cases 1-4: the source event when it starts the edge, else the
    destination event when the edge ends it, else the source's parent."""
    if g.is_start[src]:
        return g.ev[src]
    if not g.is_start[dst]:
        return g.ev[dst]
    return src_parent if src_parent is not None and src_parent >= 0 else None


def _gpu(g: Graph, window: Window) -> None:
    items = [(e.ts, e.idx, e, False) for e in window.gpu] + [(e.end, e.idx, e, True) for e in window.syncs]
    items.sort(key=lambda i: i[:2])
    last: dict[int | None, int] = {}
    waiting: dict[int, int] = {}  # operation idx -> idx of the operation it waits for (Stream Wait Event)
    for _, _, e, is_sync in items:
        if is_sync:
            if e.name == "Stream Wait Event":
                if e.sync_src is not None and e.sync_dst is not None:
                    waiting[e.sync_dst] = e.sync_src
            else:
                _sync(g, e, last)
            continue
        start, end = g.start_of[e.idx], g.end_of[e.idx]
        g.add(start, end, OPERATOR, event=e.idx)
        src = waiting.pop(e.idx, None)
        src_end = g.end_of.get(src) if src is not None else None  # None: it ran before the window
        if src_end is not None:
            g.add(src_end, start, SYNC)
        call = window.launches.get(e.launch) if e.launch is not None else None
        prev = last.get(e.stream)
        if prev is not None and g.ts[start] < g.ts[prev]:  # it overlaps the previous operation
            if g.ts[end] > g.ts[prev]:
                g.add(prev, end, OPERATOR, event=e.idx)
                last[e.stream] = end
            continue
        alone = e.q_launch == e.n_launch and e.q_start == e.n_launch - 1
        if (alone and call is not None and call.idx in g.start_of
                and (prev is None or g.ts[prev] < call.ts) and (src_end is None or g.ts[src_end] < call.ts)):
            g.add(g.start_of[call.idx], start, LAUNCH, event=e.idx)
        elif (prev is not None and g.ts[start] - g.ts[prev] < KERNEL_GAP_LIMIT_US
              and (src_end is None or g.ts[src_end] < g.ts[prev])):
            g.add(prev, start, KERNEL_GAP, event=g.ev[prev])
        last[e.stream] = end


def _sync(g: Graph, e: Event, last: dict[int | None, int]) -> None:
    waiter = g.end_of.get(e.launch) if e.launch is not None else None
    if waiter is None:
        return
    if e.name == "Context Sync":
        sources = list(last.values())
    elif e.name == "Stream Sync":
        sources = [last[e.stream]] if e.stream in last else []
    elif e.name == "Event Sync":  # cudaEventSynchronize: waits for the operation before the record
        sources = [g.end_of[e.sync_src]] if e.sync_src in g.end_of else []
    else:
        sources = []
    for node in sources:
        if node != waiter:
            g.add(node, waiter, SYNC)


def longest_path(g: Graph) -> tuple[float, list[Edge]]:
    """The length (us) and the edges of the longest path of ``g``, in path order; (0, []) for a
    graph without edges. :class:`CycleError` when ``g`` is not acyclic."""
    n = len(g.ts)
    out: list[list[Edge]] = [[] for _ in range(n)]
    indegree = [0] * n
    for edge in g.edges:
        out[edge.src].append(edge)
        indegree[edge.dst] += 1
    ready = [v for v in range(n) if indegree[v] == 0]
    dist = [0.0] * n
    best: list[Edge | None] = [None] * n
    seen = 0
    while ready:
        u = ready.pop()
        seen += 1
        for edge in out[u]:
            if best[edge.dst] is None or dist[u] + edge.weight > dist[edge.dst]:
                dist[edge.dst], best[edge.dst] = dist[u] + edge.weight, edge
            indegree[edge.dst] -= 1
            if indegree[edge.dst] == 0:
                ready.append(edge.dst)
    if seen < n:
        raise CycleError(f"{n - seen} of {n} nodes are on or after a cycle")
    if not g.edges:
        return 0.0, []
    end = max(range(n), key=lambda v: dist[v])
    length = dist[end]
    path: list[Edge] = []
    while (edge := best[end]) is not None:
        path.append(edge)
        end = edge.src
    return length, path[::-1]


COMM_KERNEL = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
"""Communication kernels (HTA's ``CommunicateKernelGroupingPattern``, matched at the start)."""


def edge_kind(g: Graph, edge: Edge, data_loading: list[re.Pattern[str]]) -> str:
    """What bounds the path along ``edge`` (HTA's ``CPGraph.bound_by``, our names): launch_overhead,
    kernel_gap, sync, dependency (zero weight), gpu_comm, gpu_compute, data_loading or cpu."""
    if edge.kind == LAUNCH:
        return "launch_overhead"
    if edge.kind == KERNEL_GAP:
        return "kernel_gap"
    if edge.kind == SYNC:
        return "sync"
    if edge.kind == DEPENDENCY:
        return "dependency"
    e = g.events.get(edge.event) if edge.event is not None else None
    if e is not None and e.stream is not None:
        return "gpu_comm" if COMM_KERNEL.match(e.name) else "gpu_compute"
    if e is not None and any(p.search(e.name) for p in data_loading):
        return "data_loading"
    return "cpu"
