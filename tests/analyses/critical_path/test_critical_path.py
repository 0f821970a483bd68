"""The critical path (``trace-report critical-path``): HTA's graph rules on small constructed traces
whose longest path is worked out by hand below, and HTA's own ``critical_path_analysis`` on the
shared traces.

Tolerance against HTA. With ``hta_rounding`` (HTA's whole-us rounding of ns traces) the path
length must equal HTA's to 1e-6 ms: both sides sum the same whole-us weights, so any difference is
a defect in the graph. Without it our lengths use the trace's own times: sub-us events and
fractional weights that HTA rounds away stay in, and the length differs from HTA's by < 5% on
these traces (measured: 4.2% on tracelens_h100_bert_small, 0.6% on hta_a100_ddp_nccl).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr
from trace_report.analyses.critical_path import CriticalPathOptions, critical_path
from trace_report.analyses.critical_path import graph as cpg

HTA_EXACT = CriticalPathOptions(data_loading=(), hta_rounding=True, infer_syncs=False)


def _x(name: str, cat: str, ts: float, dur: float, *, tid: object = 1, pid: object = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict:
    return _x(name, "kernel", ts, dur, pid=0, tid=stream, stream=stream, correlation=corr, device=0)


def _write(tmp_path: Path, events: list[dict]) -> Path:
    path = tmp_path / "trace.json"
    doc = {"schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"rank": 0}, "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def _launch_trace(sync: bool) -> list[dict]:
    """One step [0, 100] on thread 1: aten::mm [10, 40] launches K1 (cudaLaunchKernel [20, 30]) onto
    an idle stream, K1 runs [35, 85]; aten::add [50, 60] launches K2 ([52, 58]), which waits for K1
    and runs [90, 95]. With ``sync``: cudaDeviceSynchronize [62, 98] (its GPU side, Context Sync,
    correlation 3), then aten::zero_ [99, 100]."""
    events = [
        _x("ProfilerStep#1", "user_annotation", 0, 100),
        _x("aten::mm", "cpu_op", 10, 30),
        _x("cudaLaunchKernel", "cuda_runtime", 20, 10, correlation=1),
        _kernel("K1", 35, 50, 1),
        _x("aten::add", "cpu_op", 50, 10),
        _x("cudaLaunchKernel", "cuda_runtime", 52, 6, correlation=2),
        _kernel("K2", 90, 5, 2),
    ]
    if sync:
        events += [_x("cudaDeviceSynchronize", "cuda_runtime", 62, 36, correlation=3),
                   _x("Context Sync", "cuda_sync", 63, 35, pid=0, tid=7, correlation=3, device=0),
                   _x("aten::zero_", "cpu_op", 99, 1)]
    return events


def test_launch_kernel_gap_path_by_hand(tmp_path: Path) -> None:
    """By hand (HTA's rules): mm.start -> launch start 10 us (cpu, aten::mm), launch start -> K1
    start 15 us (launch delay: the stream was idle), K1 50 us, K1 end -> K2 start 5 us (kernel gap:
    K2 was queued behind K1), K2 5 us: 85 us. The CPU chain is 40 us (10 + 10 + 10 + 0 + 2 + 6 + 2)."""
    with tr.open(_write(tmp_path, _launch_trace(sync=False))) as db:
        result = critical_path(db, CriticalPathOptions())
    row = result.frame.iloc[0]
    assert row["step"] == 1
    assert row["path_ms"] == pytest.approx(0.085)
    assert (row["cpu_ms"], row["launch_overhead_ms"], row["gpu_compute_ms"], row["kernel_gap_ms"]) == \
        pytest.approx((0.010, 0.015, 0.055, 0.005))
    assert row["sync_ms"] == 0 and row["gpu_comm_ms"] == 0
    top = {(kind, name): ms for kind, name, ms in result.operators[["kind", "name", "ms"]].itertuples(index=False)}
    assert top == pytest.approx({("gpu_compute", "K1"): 0.050, ("launch_overhead", "K1"): 0.015,
                                 ("cpu", "aten::mm"): 0.010, ("kernel_gap", "K1"): 0.005,
                                 ("gpu_compute", "K2"): 0.005})  # a gap is the previous kernel's (HTA)
    assert list(result.operators["name"])[0] == "K1"


def test_context_sync_edge(tmp_path: Path) -> None:
    """The Context Sync makes the end of cudaDeviceSynchronize wait for K2 (a zero-weight edge), so
    aten::zero_ (1 us) follows the GPU chain: 85 + 1 = 86 us; the sync call's own 36 us are not on
    the path (a blocking call: HTA's zero weight). Without the cuda_sync event the CPU chain
    (40 + 0 + 0 + 1 us) is shorter than the GPU one, so the path stays 85 us."""
    with tr.open(_write(tmp_path, _launch_trace(sync=True))) as db:
        row = critical_path(db, CriticalPathOptions()).frame.iloc[0]
    assert row["path_ms"] == pytest.approx(0.086)
    assert row["cpu_ms"] == pytest.approx(0.011)
    assert row["sync_ms"] == 0
    no_sync = [e for e in _launch_trace(sync=True) if e["cat"] != "cuda_sync"]
    with tr.open(_write(tmp_path, no_sync)) as db:
        result = critical_path(db, CriticalPathOptions(infer_syncs=False))
        inferred = critical_path(db, CriticalPathOptions()).frame.iloc[0]["path_ms"]
    assert result.frame.iloc[0]["path_ms"] == pytest.approx(0.085)
    assert any("cuda_sync" in n for n in result.notes)
    assert inferred == pytest.approx(0.086)  # the Context Sync inferred from cudaDeviceSynchronize


@pytest.mark.parametrize("call", ["cudaDeviceSynchronize", "cudaStreamSynchronize"])
def test_inferred_sync(tmp_path: Path, call: str) -> None:
    """No cuda_sync event: the call itself [62, 98] is the wait. cudaStreamSynchronize waits for the
    stream of the last launch of its thread (K2's, stream 7): K2 end -> call end, then aten::zero_:
    86 us, as with the recorded Context Sync; 85 us (the GPU chain alone) without inference."""
    events = [*_launch_trace(sync=False), _x(call, "cuda_runtime", 62, 36, correlation=3),
              _x("aten::zero_", "cpu_op", 99, 1)]
    with tr.open(_write(tmp_path, events)) as db:
        assert critical_path(db, CriticalPathOptions()).frame.iloc[0]["path_ms"] == pytest.approx(0.086)
        plain = critical_path(db, CriticalPathOptions(infer_syncs=False)).frame.iloc[0]
    assert plain["path_ms"] == pytest.approx(0.085)


def _graph_trace() -> list[dict]:
    """graph_replay [0, 20] calls cudaGraphLaunch [5, 15] (correlation 10), which runs G1 [30, 40]
    and G2 [41, 51] on an idle stream."""
    return [_x("ProfilerStep#1", "user_annotation", 0, 60),
            _x("graph_replay", "cpu_op", 0.5, 19.5),
            _x("cudaGraphLaunch", "cuda_runtime", 5, 10, correlation=10),
            _kernel("G1", 30, 10, 10), _kernel("G2", 41, 10, 10)]


def test_cuda_graph_launch(tmp_path: Path) -> None:
    """With CUDA graphs counted, G1 gets the launch edge: 4.5 (cpu) + 25 (launch delay) + 10 + 1
    (gap) + 10 = 50.5 us. Counted as HTA does (HTA leaves graph launches out), G1 has no edge in,
    and the path is the longer of the CPU chain (19.5 us) and G1..G2 (21 us)."""
    with tr.open(_write(tmp_path, _graph_trace())) as db:
        graphs = critical_path(db, CriticalPathOptions()).frame.iloc[0]
        hta_like = critical_path(db, CriticalPathOptions(cuda_graphs=False)).frame.iloc[0]
    assert graphs["path_ms"] == pytest.approx(0.0505)
    assert graphs["launch_overhead_ms"] == pytest.approx(0.025)
    assert hta_like["path_ms"] == pytest.approx(0.021)
    assert hta_like["launch_overhead_ms"] == 0


def test_longest_path_needs_topological_order() -> None:
    """A hand-made graph whose node order is not a topological order: 0 -> 2 (1), 2 -> 1 (5),
    0 -> 1 (3): the longest path is 0 -> 2 -> 1, 6 us; a cycle is an error."""
    g = cpg.Graph(ts=[0.0, 0.0, 0.0], ev=[0, 1, 2], is_start=[True, True, True])
    g.edges = [cpg.Edge(0, 2, cpg.OPERATOR, 1.0), cpg.Edge(2, 1, cpg.OPERATOR, 5.0), cpg.Edge(0, 1, cpg.OPERATOR, 3.0)]
    length, path = cpg.longest_path(g)
    assert length == 6.0 and [(e.src, e.dst) for e in path] == [(0, 2), (2, 1)]
    g.edges.append(cpg.Edge(1, 0, cpg.DEPENDENCY, 0.0))
    with pytest.raises(cpg.CycleError):
        cpg.longest_path(g)


def hta_path_ms(folder: str, annotation: str, instance: int) -> float:
    """HTA's critical path length (ms) of one annotation instance of rank 0; skips where HTA fails."""
    shared_or_skip()
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    try:
        analysis = TraceAnalysis(trace_dir=str(TRACES / folder))
        graph, ok = analysis.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    except Exception as exc:  # noqa: BLE001 - HTA's own failure on a trace is a skip, not ours
        pytest.skip(f"HTA critical_path_analysis fails on {folder}: {exc}")
    if not ok:
        pytest.skip(f"HTA critical_path_analysis found no path on {folder}")
    return float(graph.get_critical_path_breakdown().duration.sum()) / 1e3


@pytest.mark.parametrize(("folder", "annotation", "step"), [
    pytest.param("tracelens_h100_bert_small", "ProfilerStep", 6, marks=pytest.mark.slow),  # ns, one step
    ("hta_step_based_trace_gp100", "", None),  # whole us, no ProfilerStep: the whole trace (slow: HTA's run)
])
def test_equals_hta_small(folder: str, annotation: str, step: int | None) -> None:
    expected = hta_path_ms(folder, annotation, 0)
    with tr.open(TRACES / folder) as db:
        frame = critical_path(db, HTA_EXACT).frame
    row = frame.iloc[0]
    assert row["step"] == step or (step is None and row["step"] is None)
    assert row["path_ms"] == pytest.approx(expected, abs=1e-6)
    with tr.open(TRACES / folder) as db:
        own = critical_path(db, CriticalPathOptions(data_loading=(), infer_syncs=False)).frame.iloc[0]["path_ms"]
    assert own == pytest.approx(expected, rel=0.05)


HTA_KINDS = {"cpu_bound": "cpu_ms", "gpu_compute_bound": "gpu_compute_ms", "gpu_communication_bound": "gpu_comm_ms",
             "gpu_kernel_launch_overhead": "launch_overhead_ms", "gpu_kernel_kernel_overhead": "kernel_gap_ms"}


@pytest.mark.slow
def test_equals_hta_gpu_bound_step() -> None:
    """hta_ns_resolution step 101 (its first): a GPU-bound path (launch delays, kernel gaps, GPU
    compute), equal to HTA's in length and in each kind (HTA's bound_by) to 1e-6 ms (slow: HTA's run)."""
    shared_or_skip()
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    graph, ok = TraceAnalysis(trace_dir=str(TRACES / "hta_ns_resolution")).critical_path_analysis(
        rank=0, annotation="ProfilerStep", instance_id=0)
    if not ok:
        pytest.skip("HTA critical_path_analysis found no path on hta_ns_resolution")
    by_kind = graph.get_critical_path_breakdown().groupby("bound_by").duration.sum() / 1e3
    with tr.open(TRACES / "hta_ns_resolution") as db:
        row = critical_path(db, CriticalPathOptions(data_loading=(), hta_rounding=True, infer_syncs=False,
                                                    step=101)).frame.iloc[0]
    assert row["path_ms"] == pytest.approx(by_kind.sum(), abs=1e-6)
    for hta_kind, ours in HTA_KINDS.items():
        assert row[ours] == pytest.approx(float(by_kind.get(hta_kind, 0.0)), abs=1e-6), hta_kind
    assert row["gpu_compute_ms"] > 0.9 * row["path_ms"]


@pytest.mark.slow
def test_equals_hta_ddp_first_step() -> None:
    """hta_a100_ddp_nccl: forward and backward threads merged, three steps; HTA's first (slow: HTA's run)."""
    expected = hta_path_ms("hta_a100_ddp_nccl", "ProfilerStep", 0)
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        frame = critical_path(db, HTA_EXACT).frame
    assert list(frame["step"]) == [4, 5, 6]
    assert frame.iloc[0]["path_ms"] == pytest.approx(expected, abs=1e-6)


def test_cli(tmp_path: Path) -> None:
    path = _write(tmp_path, _launch_trace(sync=False))
    result = invoke(["critical-path", path, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows[0]["path_ms"] == pytest.approx(0.085)
    result = invoke(["critical-path", path, "--operators", "--format", "json"])
    assert json.loads(result.stdout)[0]["name"] == "K1"
    for bad in (["--rank", "3"], ["--step", "2"]):
        result = invoke(["critical-path", path, *bad])
        assert result.exit_code == 2 and result.stderr.startswith("Error: "), result.output
        assert "Traceback" not in result.output


def _one_step_equals_every_step(path: Path, **opts: object) -> None:
    with tr.open(path) as db:
        every = critical_path(db, CriticalPathOptions(**opts))
        assert len(every.frame) > 1
        for step in every.frame["step"].tolist():
            one = critical_path(db, CriticalPathOptions(**opts, step=step))
            want = every.frame[every.frame["step"] == step].reset_index(drop=True)
            assert one.frame.reset_index(drop=True).equals(want), step
            want_ops = every.operators[every.operators["step"] == step].reset_index(drop=True)
            assert one.operators.reset_index(drop=True).equals(want_ops), step
            # edge by edge (event idx differ: the one-step pass reads fewer rows)
            assert [(e.kind, e.weight, k) for e, k in one.paths[(1, step)]] == \
                [(e.kind, e.weight, k) for e, k in every.paths[(1, step)]], step


def _steps_trace(steps: int, sync_events: bool) -> list[dict]:
    """``steps`` copies of :func:`_launch_trace` 1 ms apart, each with a cudaDeviceSynchronize
    (its Context Sync with ``sync_events``) and a cudaStreamSynchronize, plus a kernel launched at
    the end of each step that runs into the next one (its queue is counted across steps)."""
    events = []
    for k in range(steps):
        base, corr = 1000.0 * k, 10 * k
        for e in _launch_trace(sync=True):
            e = {**e, "ts": e["ts"] + base, "args": dict(e["args"])}
            if e["name"] == "ProfilerStep#1":
                e["name"], e["dur"] = f"ProfilerStep#{k + 1}", 1000.0
            if "correlation" in e["args"]:
                e["args"]["correlation"] += corr
            if sync_events or e["cat"] != "cuda_sync":
                events.append(e)
        events += [_x("cudaStreamSynchronize", "cuda_runtime", base + 400, 20, correlation=corr + 4),
                   _x("cudaLaunchKernel", "cuda_runtime", base + 990, 5, correlation=corr + 5),
                   _kernel("K3", base + 996, 30, corr + 5)]
    return events


@pytest.mark.parametrize("sync_events", [True, False])
def test_one_step_equals_every_step_with_syncs(tmp_path: Path, sync_events: bool) -> None:
    """The one-step path (graph events for the step's rows only, queue lengths and inferred
    syncs from every launch) gives each step the path of the pass over every step."""
    path = _write(tmp_path, _steps_trace(4, sync_events))
    _one_step_equals_every_step(path)
    _one_step_equals_every_step(path, infer_syncs=False)


@pytest.mark.parametrize(("folder", "rounding", "infer"), [
    pytest.param("hta_a100_ddp_nccl", False, False, marks=pytest.mark.slow),  # 4-6 s each: the default run
    ("hta_ns_resolution", True, False),  # keeps one per trace, HTA's rounding on one and inferred syncs
    ("hta_a100_ddp_nccl", False, True),  # on the other
    pytest.param("hta_ns_resolution", False, True, marks=pytest.mark.slow)])
def test_one_step_reads_only_its_cpu_events_and_equals_every_step_pass(folder: str, rounding: bool,
                                                                       infer: bool) -> None:
    """With --step, CPU events outside the step are not read (runtime calls and GPU operations
    still are, for queue lengths and syncs): each step's row and operators equal those of the pass
    over every step (the report reads one step of a large trace)."""
    shared_or_skip()
    _one_step_equals_every_step(TRACES / folder, data_loading=(), hta_rounding=rounding, infer_syncs=infer)


def _event_wait_trace(wait: bool) -> list[dict]:
    """One step [0, 200] on thread 1: aten::mm [10, 40] launches K1 ([20, 30]) onto stream 7, K1
    runs [35, 135]; cudaEventRecord [42, 44] (correlation 2) records an event on stream 7;
    cudaStreamWaitEvent [47, 49] (3) makes stream 13 wait for it (with ``wait``, its GPU side: a
    ``Stream Wait Event`` cuda_sync, PyTorch >= 2.1's args); aten::add [51, 60] launches K2
    ([52, 58]) onto the idle stream 13, where it runs [140, 150], after K1."""
    events = [
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        _x("aten::mm", "cpu_op", 10, 30),
        _x("cudaLaunchKernel", "cuda_runtime", 20, 10, correlation=1),
        _kernel("K1", 35, 100, 1),
        _x("aten::record", "cpu_op", 41, 4),
        _x("cudaEventRecord", "cuda_runtime", 42, 2, correlation=2),
        _x("aten::wait", "cpu_op", 46, 4),
        _x("cudaStreamWaitEvent", "cuda_runtime", 47, 2, correlation=3),
        _x("aten::add", "cpu_op", 51, 9),
        _x("cudaLaunchKernel", "cuda_runtime", 52, 6, correlation=4),
        _kernel("K2", 140, 10, 4, stream=13),
    ]
    if wait:
        events.append(_x("Stream Wait Event", "cuda_sync", 48, 1, pid=0, tid=13, correlation=3, stream=13, device=0,
                         wait_on_stream=7, wait_on_cuda_event_record_corr_id=2))
    return events


def test_stream_wait_event_edge_by_hand(tmp_path: Path) -> None:
    """By hand (HTA's rules for cudaStreamWaitEvent): K2 waits for K1 (a zero-weight edge from K1's
    end to K2's start), so K2 gets no launch edge (K1 ended after K2's launch): mm.start -> launch
    10 us (cpu), launch -> K1 15 us, K1 100 us, K2 10 us: 135 us, 15 us of launch overhead. Without
    the wait event, K2 looks launched onto an idle stream and waiting 88 us for its launch
    (52 -> 140): the CPU chain to that launch (39 us: 42 less three zero-weight 1 us gaps between
    top-level operators) + 88 + 10 = 137 us, with 88 us of "launch overhead": the false
    launch-bound verdict."""
    with tr.open(_write(tmp_path, _event_wait_trace(wait=True))) as db:
        row = critical_path(db, CriticalPathOptions(infer_syncs=False)).frame.iloc[0]
    assert row["path_ms"] == pytest.approx(0.135)
    assert (row["cpu_ms"], row["launch_overhead_ms"], row["gpu_compute_ms"], row["kernel_gap_ms"]) == \
        pytest.approx((0.010, 0.015, 0.110, 0.0))
    with tr.open(_write(tmp_path, _event_wait_trace(wait=False))) as db:
        plain = critical_path(db, CriticalPathOptions(infer_syncs=False)).frame.iloc[0]
    assert plain["path_ms"] == pytest.approx(0.137) and plain["launch_overhead_ms"] == pytest.approx(0.088)


def _event_sync_trace() -> list[dict]:
    events = [e for e in _event_wait_trace(wait=False) if e["name"] not in ("K2", "aten::add")
              and e.get("args", {}).get("correlation") != 4]
    return [*events, _x("cudaEventSynchronize", "cuda_runtime", 62, 88, correlation=5),
            _x("Event Sync", "cuda_sync", 63, 87, pid=0, tid=7, correlation=5, device=0, wait_on_stream=7,
               wait_on_cuda_event_record_corr_id=2),
            _x("aten::zero_", "cpu_op", 151, 1)]


def test_event_sync_edge_by_hand(tmp_path: Path) -> None:
    """cudaEventSynchronize [62, 150] waits for the event recorded after K1 (an ``Event Sync``
    cuda_sync): K1's end (135) -> the call's end (150), zero weight, then aten::zero_ [151, 152]:
    mm.start -> K1 start 25 us, K1 100 us, 0, call end -> zero_ start 0 (a gap between top-level
    operators), zero_ 1 us: 126 us, where the CPU chain alone (the call's 88 us are a blocking
    wait: zero weight) is shorter."""
    with tr.open(_write(tmp_path, _event_sync_trace())) as db:
        row = critical_path(db, CriticalPathOptions(infer_syncs=False)).frame.iloc[0]
    assert row["path_ms"] == pytest.approx(0.126)
    assert row["gpu_compute_ms"] == pytest.approx(0.100)


@pytest.mark.parametrize("events", [_event_wait_trace(wait=True), _event_sync_trace()],
                         ids=["stream-wait", "event-sync"])
def test_event_waits_equal_hta(tmp_path: Path, events: list[dict]) -> None:
    """HTA's own critical_path_analysis on the constructed traces: the same path length."""
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    folder = tmp_path / "hta"
    folder.mkdir()
    path = _write(folder, events)
    try:
        graph, ok = TraceAnalysis(trace_dir=str(folder)).critical_path_analysis(
            rank=0, annotation="ProfilerStep", instance_id=0)
    except Exception as exc:  # noqa: BLE001 - HTA's own failure on a trace is a skip, not ours
        pytest.skip(f"HTA critical_path_analysis fails on the constructed trace: {exc}")
    assert ok
    hta_ms = float(graph.get_critical_path_breakdown().duration.sum()) / 1e3
    with tr.open(path) as db:
        ours = critical_path(db, HTA_EXACT).frame.iloc[0]["path_ms"]
    assert ours == pytest.approx(hta_ms, abs=1e-6)


class _Walks(list):
    """A list that counts the times it is walked whole (``for e in ...``)."""

    walks = 0

    def __iter__(self):  # noqa: ANN204
        type(self).walks += 1
        return super().__iter__()


def test_every_step_pass_finds_each_window_by_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step's window holds what HTA's clip keeps (recomputed here by a plain pass: CPU events
    starting inside with a positive duration; GPU operations and syncs whose runtime call does), in
    trace order, and the GPU operations are walked once per trace, not once per step: the
    every-step pass scanned every event per window (quadratic in the trace's length)."""
    shared_or_skip()
    import trace_report.analyses.critical_path.compute as cp

    windows: list[tuple[object, float, float, cpg.Window]] = []
    load, cut = cp.load_trace, cp.window_of

    def counting_load(*args: object, **kwargs: object):  # noqa: ANN202
        events = load(*args, **kwargs)
        events.gpu, events.syncs = _Walks(events.gpu), _Walks(events.syncs)
        return events

    def recording_cut(events, start, end, patterns, *index):  # noqa: ANN001, ANN002, ANN202
        window = cut(events, start, end, patterns, *index)
        windows.append((events, start, end, window))
        return window

    monkeypatch.setattr(cp, "load_trace", counting_load)
    monkeypatch.setattr(cp, "window_of", recording_cut)
    _Walks.walks = 0
    with tr.open(TRACES / "kineto_rn50_nw4_2021jun") as db:  # one trace, 6 steps
        result = critical_path(db, CriticalPathOptions())
    assert len(result.frame) == len(windows) >= 6
    assert _Walks.walks == 2  # the GPU operations and the syncs, each once, for the index
    for events, start, end, window in windows:
        def launched_inside(e: cpg.Event, ev=events, a=start, b=end) -> bool:
            call = ev.launches.get(e.launch) if e.launch is not None else None
            return call is not None and a <= call.ts <= b and call.dur > 0

        assert [e.idx for e in window.cpu] == [e.idx for e in list.__iter__(events.cpu) if start <= e.ts <= end
                                                and e.dur > 0]
        assert [e.idx for e in window.gpu] == [e.idx for e in list.__iter__(events.gpu) if launched_inside(e)]
        assert [e.idx for e in window.syncs] == [e.idx for e in list.__iter__(events.syncs) if launched_inside(e)]
    assert sum(len(w.gpu) for *_, w in windows) > 1000 and sum(len(w.cpu) for *_, w in windows) > 1000


def test_the_cyclic_collector_is_paused_while_the_graphs_are_built(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """The graph events are a million small objects on a 1M-event trace, without cycles: each
    collection of the oldest generation walked them all, for most of the time spent creating them.
    Off while the graphs are built, on again after, and left off when the caller had it off."""
    import gc

    import trace_report.analyses.critical_path.compute as cp

    seen: list[bool] = []
    build = cp.cpg.build
    monkeypatch.setattr(cp.cpg, "build", lambda window: (seen.append(gc.isenabled()), build(window))[1])
    path = _write(tmp_path, _launch_trace(sync=True))
    with tr.open(path) as db:
        assert gc.isenabled()
        critical_path(db, CriticalPathOptions())
        assert seen == [False] and gc.isenabled()
        gc.disable()
        try:
            critical_path(db, CriticalPathOptions())
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_the_steps_of_every_trace_are_read_in_one_query() -> None:
    """One query gives every trace's steps (a query per trace read every trace's events again for
    each: 35 ms a trace on a 64-rank database, quadratic in the ranks); each rank's rows are those
    of the rank analysed alone."""
    shared_or_skip()

    class Counting:
        def __init__(self, con: object) -> None:
            self.con, self.steps = con, 0

        def execute(self, query: str, *args: object):  # noqa: ANN202
            self.steps += " steps " in f" {query} ".replace("\n", " ")
            return self.con.execute(query, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self.con, name)

    with tr.open(TRACES / "param_dlrm_kineto_v100x8") as db:  # 8 ranks
        plain = db.con
        db.con = counting = Counting(plain)  # type: ignore[assignment]
        try:
            result = critical_path(db, CriticalPathOptions())
        finally:
            db.con = plain
        assert counting.steps == 1 and result.frame["rank"].nunique() == 8
        alone = critical_path(db, CriticalPathOptions(rank=5))
    mine = result.frame[result.frame["rank"] == 5].drop(columns=["trace_id"], errors="ignore").reset_index(drop=True)
    assert mine.equals(alone.frame.drop(columns=["trace_id"], errors="ignore").reset_index(drop=True))


def test_each_trace_of_a_database_is_read_from_its_own_pieces(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """On a database, each trace's events are read from the pieces ``event_files`` lists for it
    (a query of ``events`` per trace opened every trace's pieces: quadratic in the ranks, 40 ms a
    trace of a generated 64-rank database); the paths are those read through ``events``, also
    inside a run's scope, and a connection whose ``events`` was redefined reads ``events``."""
    shared_or_skip()
    import trace_report.analyses.critical_path.compute as cp
    from trace_report.store.trace_events import trace_event_sources

    db_path = tmp_path / "dlrm.duckdb"
    assert invoke(["ingest", TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz", "-o", db_path]).exit_code == 0
    read: list[tuple[int, str]] = []  # (trace_id, the relation its events were read from)
    load = cp.load_trace
    monkeypatch.setattr(cp, "load_trace", lambda *a, **k: (read.append((a[1], k["source"])), load(*a, **k))[1])
    with tr.open(db_path) as db:
        pieces = dict(db.con.execute("SELECT trace_id, list(file ORDER BY file) FROM event_files GROUP BY 1")
                      .fetchall())
        own = critical_path(db, CriticalPathOptions())
        assert len(read) == len(pieces) == 8
        for trace_id, source in read:
            named = [f for fs in pieces.values() for f in fs if f in source]
            assert source.startswith("read_parquet(") and named == pieces[trace_id]  # its pieces, no other
        with monkeypatch.context() as m:
            m.setattr(cp, "trace_event_sources", lambda con: {})
            through_events = critical_path(db, CriticalPathOptions())
        pd_equal(own.frame, through_events.frame)
        pd_equal(own.operators, through_events.operators)
        with db.scope([3, 4]):
            read.clear()
            scoped = critical_path(db, CriticalPathOptions())
            assert sorted(t for t, _ in read) == [3, 4] and all(s.startswith("read_parquet(") for _, s in read)
        ranks = [r for (r,) in db.con.execute("SELECT rank FROM traces WHERE trace_id IN (3, 4)").fetchall()]
        pd_equal(scoped.frame.reset_index(drop=True), own.frame[own.frame["rank"].isin(ranks)].reset_index(drop=True))
        db.con.execute("CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM events WHERE false")
        assert trace_event_sources(db.con) == {}


def pd_equal(a: object, b: object) -> None:
    import pandas as pd

    pd.testing.assert_frame_equal(a, b)


def test_rows_in_time_then_event_order_with_the_waits_of_their_args(tmp_path: Path) -> None:
    """The read behind every graph (numpy sorts it; the ``cuda_sync`` events' args come from a
    query of their own): every event in (ts, event id) order, ties in ts in the file's order, and
    the record correlation and stream of exactly the ``cuda_sync`` events whose args give them,
    as a plain pass over the JSON finds them."""
    from trace_report.analyses.critical_path.load import _rows

    events = _event_wait_trace(wait=True) + [
        _x("aten::tie_b", "cpu_op", 41, 1), _x("aten::tie_a", "cpu_op", 41, 2),  # same ts as aten::record
        _x("Event Sync", "cuda_sync", 48, 1, pid=0, tid=7, correlation=9, device=0)]  # no wait args
    with tr.open(_write(tmp_path, events)) as db:
        rows = _rows(db, 1, None, frozenset({"cudaLaunchKernel"}))
    # the file's order within equal ts: the ingest numbers events in file order
    expected = sorted(enumerate(events), key=lambda ie: (ie[1]["ts"], ie[0]))
    everything = list(range(len(rows)))
    assert list(rows.name[everything]) == [e["name"] for _, e in expected]
    assert list(rows.ts) == [e["ts"] for _, e in expected]
    waits = {e["name"]: (e["args"]["wait_on_cuda_event_record_corr_id"], e["args"]["wait_on_stream"])
             for _, e in expected if "wait_on_stream" in e["args"]}
    got = {rows.name[[i]][0]: (int(rows.record[i]), int(rows.record_stream[i]))
           for i in everything if not rows.record_null[i]}
    assert got == waits == {"Stream Wait Event": (2, 7)}
    assert rows.record_stream_null.sum() == len(rows) - 1


def test_text_columns_give_rows_by_position_or_mask_and_refuse_anything_else() -> None:
    """The row read's text columns (Arrow until asked): positions and boolean masks as the numpy
    columns they replaced; a scalar, a slice or a position out of range is an error, never other
    rows (a mask read as positions 0 and 1 gave rows 1, 0, 1 before)."""
    import numpy as np
    import pyarrow as pa

    from trace_report.analyses.critical_path.load import _Text

    column = _Text(pa.chunked_array([["a", None], ["c"]]))
    assert list(column[np.array([2, 0])]) == ["c", "a"]
    assert list(column[np.array([True, False, True])]) == ["a", "c"]
    assert list(column[np.array([False, True, False])]) == [None]
    assert list(column[np.array([], dtype=np.int64)]) == []
    for bad in (1, slice(0, 2), np.array([-1]), np.array([3]), np.array([0.5]), np.array([True, False])):
        with pytest.raises(TypeError):
            column[bad]


def test_overlapping_operations_of_one_stream_count_once(tmp_path: Path) -> None:
    """By hand: the launch trace with K2 running [80, 100] on K1's stream, 5 us before K1 ([35, 85])
    ends. The path aten::mm.start (10) -> launch (10 us) -> K1 start (15 us) -> K1 end (50 us) ->
    K2 end (15 us, K2's time past K1) is 90 us: the time from 10 to 100. HTA's kernel-to-kernel
    edge from K1's end back to K2's start (weight set to 0) would count K2's whole 20 us: 95 us,
    longer than the time it spans."""
    events = [{**e, "ts": 80, "dur": 20} if e["name"] == "K2" else e for e in _launch_trace(sync=False)]
    with tr.open(_write(tmp_path, events)) as db:
        row = critical_path(db, CriticalPathOptions()).frame.iloc[0]
    assert row["path_ms"] == pytest.approx(0.090)
    assert (row["cpu_ms"], row["launch_overhead_ms"], row["gpu_compute_ms"], row["kernel_gap_ms"]) == \
        pytest.approx((0.010, 0.015, 0.065, 0.0))
    assert (row["step_ms"], row["span_ms"]) == pytest.approx((0.100, 0.100))


def _window_spans_us(events: list[dict]) -> list[float]:
    """Per ProfilerStep (by start), by a plain pass over the JSON: from its start to the last end of
    HTA's window of it (CPU operators and runtime calls starting in it with a duration; GPU
    operations whose runtime call, by correlation, starts in it with a duration) or its own end."""
    from conftest import GPU_OP_CATS, RUNTIME_CATS

    def corr(e: dict) -> object:
        return (e.get("args") or {}).get("correlation")

    calls = {corr(e): e for e in events if e.get("cat") in RUNTIME_CATS and corr(e) is not None and e["dur"] > 0}
    cpu = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
           if e.get("cat") in {"cpu_op", *RUNTIME_CATS} and float(e["dur"]) > 0]
    gpu = [(float(calls[corr(e)]["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
           if e.get("cat") in GPU_OP_CATS and float(e["dur"]) > 0 and corr(e) in calls]
    steps = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                   if str(e.get("name", "")).startswith("ProfilerStep#"))
    return [max([b, *(end for at, end in cpu + gpu if a <= at <= b)]) - a for a, b in steps]


@pytest.mark.parametrize("name", [
    "hta_trace_diff/test.json.gz",  # kernels that overlap on one stream
    "hta_trace_diff/control.json.gz",
    pytest.param("kineto_rn50_nw4_2021jun", marks=pytest.mark.slow),  # paths past the step's end
    pytest.param("hta_ns_resolution", marks=pytest.mark.slow),
])
def test_no_path_is_longer_than_its_step_span(name: str) -> None:
    """Every step's path is at most its span, computed from the JSON (:func:`_window_spans_us`),
    which ``span_ms`` equals."""
    path = shared_or_skip() / "data" / "traces" / name
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
    from conftest import complete_events

    expected = _window_spans_us(complete_events(files[0]))
    with tr.open(files[0]) as db:
        frame = critical_path(db, CriticalPathOptions()).frame
    assert len(frame) == len(expected) > 0
    for row, span_us in zip(frame.itertuples(), expected, strict=True):
        assert row.span_ms == pytest.approx(span_us / 1e3, rel=1e-9, abs=1e-6), row.step
        assert row.path_ms <= span_us / 1e3 + 1e-6, row.step


def test_shared_correlation_ids_link_each_kernel_to_the_launch_before_it(tmp_path: Path) -> None:
    """Every correlation id 1 (an edited or wrapped trace): two steps [0, 100] and [100, 200],
    each one launch [20, 30] + 100k and its kernel [35, 85] + 100k. Linking every kernel to the
    first launch put both kernels into step 1 (a path longer than the step); each kernel goes to
    the launch just before it: both steps by hand as in test_launch_kernel_gap_path_by_hand,
    10 us CPU + 15 us launch delay + 50 us kernel = 75 us, each inside its own step."""
    events = []
    for k in (0, 1):
        t = 100.0 * k
        events += [_x(f"ProfilerStep#{k + 1}", "user_annotation", t, 100), _x("aten::mm", "cpu_op", t + 10, 30),
                   _x("cudaLaunchKernel", "cuda_runtime", t + 20, 10, correlation=1), _kernel("K", t + 35, 50, 1)]
    with tr.open(_write(tmp_path, events)) as db:
        frame = critical_path(db, CriticalPathOptions()).frame
    assert list(frame["step"]) == [1, 2]
    assert list(frame["path_ms"]) == pytest.approx([0.075, 0.075])
    assert list(frame["gpu_compute_ms"]) == pytest.approx([0.050, 0.050])
