"""advise's rules of other tools (advise/anchors.py) and the evidence by time, on small constructed
traces (advise_traces.py) at each rule's edge and on real traces that must and must not produce
the finding. Expected values come from plain Python over the events written or the JSON read."""

from __future__ import annotations

import gzip
import json
import math
import sqlite3
import statistics
import tarfile
from contextlib import closing
from pathlib import Path

import pytest
from advise_traces import TraceBuilder, gaps, intervals, union
from conftest import SHARED, TRACES, complete_events

import trace_report as tr
from trace_report.analyses.advise import advise

DATA = SHARED / "data" / "traces"


def _found(path: Path) -> tuple[dict[str, dict], list[str]]:
    with tr.open(path) as db:
        result = advise(db, all_findings=True)
    return {r["finding"]: r for r in result.frame.to_dict(orient="records")}, result.notes


def _event(b: TraceBuilder, name: str, cat: str, ts: float, dur: float, args: dict | None = None) -> None:
    b._cpu(name, cat, ts, dur, {"External id": 1 + len(b.events), **(args or {})})


def _bytes(b: TraceBuilder, n: int) -> None:
    b.events[-1]["args"]["bytes"] = n


def _steps(b: TraceBuilder, n: int = 3, step: float = 1000.0) -> None:
    for k in range(n):
        b.step(k, k * step, step)
        b.launch(k * step, 5, k * step + 10, 800)


# --- item 2: the evidence names the call with the most time, and where -------------------------

def test_host_sync_evidence_names_the_call_with_most_time_and_its_annotation(tmp_path):
    b = TraceBuilder()
    for k in range(3):
        s = k * 1000.0
        b.step(k, s, 1000)
        b.launch(s, 5, s + 10, 100)
        for i in range(10):  # many short synchronisations ...
            b.sync(s + 20 + i * 2, 1)
        _event(b, "## sparse_data_dist ##", "user_annotation", s + 100, 600)
        # ... and one long device-to-pageable copy, whose launch returns when the copy is done
        b.launch(s + 110, 500, s + 600, 10, name="Memcpy DtoH (Device -> Pageable)", cat="gpu_memcpy")
        b.launch(s + 700, 5, s + 710, 100)
    found, _ = _found(b.write(tmp_path / "t.json"))
    long_calls = [c for c in b.runtime if c.name == "cudaMemcpyAsync"]
    us = sum(c.dur for c in long_calls)
    assert f"most: cudaMemcpyAsync ({len(long_calls)} calls, {us / 1e3:.3g} ms in all) in ## sparse_data_dist ##" \
        in found["host_sync"]["evidence"]


# --- nsys analyze: cuda_memcpy_sync, cuda_memset_sync, gpu_gaps ----------------------------------

def test_sync_memcpy_skips_small_host_to_device_copies_only(tmp_path):
    b = TraceBuilder()
    _steps(b)
    b.launch(3000, 40, 3010, 20, name="Memcpy HtoD (Pageable -> Device)", cat="gpu_memcpy", api="cudaMemcpy")
    _bytes(b, 64 * 1024)  # the edge: 64 KB host-to-device is left out
    b.launch(3100, 50, 3110, 30, name="Memcpy HtoD (Pageable -> Device)", cat="gpu_memcpy", api="cudaMemcpy")
    _bytes(b, 64 * 1024 + 1)
    b.launch(3200, 70, 3210, 40, name="Memcpy DtoH (Device -> Pageable)", cat="gpu_memcpy", api="cudaMemcpy")
    _bytes(b, 16)  # device-to-host: no size exemption
    b.launch(3300, 30, 3310, 40, name="Memcpy HtoD (Pinned -> Device)", cat="gpu_memcpy")  # Async: not this rule
    found, _ = _found(b.write(tmp_path / "t.json"))
    row = found["sync_memcpy"]
    assert row["value"] == 2
    assert math.isnan(row["est_saving_ms_per_step"])
    assert "most: cudaMemcpy (2 calls, 120 us in all)" in row["evidence"]


def test_sync_memset_only_on_pinned_or_managed_memory(tmp_path):
    b = TraceBuilder()
    _steps(b)
    b.launch(3000, 40, 3010, 20, name="Memset (Device)", cat="gpu_memset", api="cudaMemset")
    only_device = b.write(tmp_path / "device.json")
    b.launch(3100, 40, 3110, 20, name="Memset (Pinned)", cat="gpu_memset", api="cudaMemset")
    assert "sync_memset" not in _found(only_device)[0]
    assert _found(b.write(tmp_path / "pinned.json"))[0]["sync_memset"]["value"] == 1


@pytest.mark.parametrize("gap_ms", [400.0, 600.0])
def test_long_gpu_gaps_over_500_ms(tmp_path, gap_ms):
    b = TraceBuilder()
    b.launch(0, 5, 10, 100)
    b.launch(gap_ms * 1e3, 5, 110 + gap_ms * 1e3, 100)
    found, _ = _found(b.write(tmp_path / "t.json"))
    expected = [e - s for s, e in gaps(union(intervals(b.gpu))) if e - s > 500e3]
    assert ("long_gpu_gaps" in found) == bool(expected) == (gap_ms > 500)
    if expected:
        assert found["long_gpu_gaps"]["value"] == pytest.approx(max(expected) / 1e3, abs=1e-3)


# --- PyTorch's pattern matcher -------------------------------------------------------------------

def test_single_tensor_optimizer(tmp_path):
    b = TraceBuilder()
    _steps(b)
    _event(b, "torch/optim/adam.py(345): _multi_tensor_adam", "python_function", 2900, 50)
    assert "optimizer_single_tensor" not in _found(b.write(tmp_path / "multi.json"))[0]
    _event(b, "torch/optim/adam.py(300): _single_tensor_adam", "python_function", 2950, 40)
    row = _found(b.write(tmp_path / "single.json"))[0]["optimizer_single_tensor"]
    assert row["value"] == 1 and math.isnan(row["est_saving_ms_per_step"])


def test_grad_not_set_to_none_saves_the_zeroing_kernels(tmp_path):
    b = TraceBuilder()
    _steps(b)
    _event(b, "Optimizer.zero_grad#SGD.zero_grad", "user_annotation", 2850, 140)
    _event(b, "aten::zeros", "cpu_op", 2855, 30)
    _event(b, "aten::zero_", "cpu_op", 2860, 20)  # inside aten::zeros: not a gradient
    _event(b, "aten::zero_", "cpu_op", 2900, 20)
    b.launch(2905, 5, 2950, 7)
    _event(b, "aten::zero_", "cpu_op", 2930, 20)
    b.launch(2935, 5, 2960, 9)
    found, _ = _found(b.write(tmp_path / "t.json"))
    row = found["grad_not_set_to_none"]
    assert row["value"] == 2
    assert row["est_saving_ms_per_step"] == pytest.approx((7 + 9) / 3 / 1e3, abs=1e-3)


def _conv(b: TraceBuilder, ts: float, bias: bool, after: str) -> None:
    _event(b, "nn.Module: Conv2d_0", "python_function", ts, 30)
    _event(b, "aten::conv2d", "cpu_op", ts + 5, 20, {
        "Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3], [16] if bias else [], [], [], [], []],
        "Input type": ["float", "float", "float" if bias else "", "ScalarList", "ScalarList", "ScalarList", "Int"]})
    _event(b, after, "python_function", ts + 40, 20)


@pytest.mark.parametrize(("bias", "after", "fires"), [(True, "nn.Module: BatchNorm2d_0", True),
                                                      (False, "nn.Module: BatchNorm2d_0", False),
                                                      (True, "nn.Module: ReLU_0", False)])
def test_conv_bias_before_batchnorm(tmp_path, bias, after, fires):
    b = TraceBuilder()
    _steps(b)
    _conv(b, 2800, bias, after)
    found, notes = _found(b.write(tmp_path / "t.json"))
    assert ("conv_bias_before_batchnorm" in found) == fires
    assert not any("record_shapes" in n for n in notes)


@pytest.mark.parametrize(("dtype", "dims", "fires"), [
    ("c10::BFloat16", [[141, 512], [512, 512]], True), ("c10::Half", [[144, 512], [512, 513]], True),
    ("c10::BFloat16", [[144, 512], [512, 512]], False), ("float", [[141, 512], [512, 512]], False)])
def test_matmul_dims_not_aligned(tmp_path, dtype, dims, fires):
    b = TraceBuilder()
    _steps(b)
    _event(b, "aten::mm", "cpu_op", 2800, 20, {"Input Dims": dims, "Input type": [dtype, dtype]})
    assert ("matmul_dims_not_aligned" in _found(b.write(tmp_path / "t.json"))[0]) == fires


def test_no_shapes_is_said_once(tmp_path):
    b = TraceBuilder()
    _steps(b)
    _, notes = _found(b.write(tmp_path / "t.json"))
    assert sum("record_shapes" in n for n in notes) == 1


# --- TraceLens: kernel variance ----------------------------------------------------------------

def test_kernel_variance_needs_ten_calls_and_cv_over_one(tmp_path):
    def build(calls: int) -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for i in range(calls):
            dur = 1000.0 if i == 0 else 10.0
            b.launch(t, 5, t + 10, dur, name="variable_kernel")
            t += dur + 20
        return b
    nine, ten = build(9), build(10)
    assert "kernel_variance" not in _found(nine.write(tmp_path / "nine.json"))[0]
    row = _found(ten.write(tmp_path / "ten.json"))[0]["kernel_variance"]
    durs = [g.dur for g in ten.gpu]
    assert statistics.stdev(durs) / statistics.mean(durs) > 1
    above = sum(durs) - len(durs) * statistics.median(durs)
    assert f"{above / 1e3:.3g} ms of it above their median" in row["evidence"] or f"{above:.3g} us" in row["evidence"]
    assert row["est_saving_ms_per_step"] != row["est_saving_ms_per_step"]  # NaN: calls may differ in shape


# --- real traces -----------------------------------------------------------------------------------

def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _misaligned(e: dict) -> bool:
    a = e.get("args") or {}
    types, dims = a.get("Input type") or [], a.get("Input Dims") or []
    return (e.get("name") in ("aten::mm", "aten::bmm", "aten::addmm") and bool(types)
            and types[0] in ("c10::Half", "c10::BFloat16")
            and any(d % 8 for s in dims if isinstance(s, list) for d in s[-2:]))


@pytest.mark.parametrize(("trace", "fires"), [("tracelens_h100_bert_small", True),
                                              ("tracelens_mi300_resnet18_ddp_train", False)])
def test_matmul_dims_on_real_traces(shared, trace, fires):
    path = next((DATA / trace).glob("*.json.gz"))
    expected = sum(_misaligned(e) for e in _events(path))
    found, _ = _found(path)
    assert bool(expected) == fires == ("matmul_dims_not_aligned" in found)
    if fires:
        assert found["matmul_dims_not_aligned"]["value"] == expected


def _zero_grad_zeroes(events: list[dict]) -> int:
    """aten::zero_ inside a zero_grad range of its thread, not inside an aten::zeros."""
    def spans(pred):
        return [(e["pid"], e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and pred(e)]
    grads = spans(lambda e: e["name"].endswith(": zero_grad") or e["name"].startswith("Optimizer.zero_grad#"))
    zeros = spans(lambda e: e["name"] == "aten::zeros")
    n = 0
    for p, t, s, e in spans(lambda e: e["name"] == "aten::zero_" and e.get("cat") == "cpu_op"):
        inside = any(gp == p and gt == t and gs <= s < ge for gp, gt, gs, ge in grads)
        under_zeros = any(zp == p and zt == t and zs <= s and e <= ze for zp, zt, zs, ze in zeros)
        n += inside and not under_zeros
    return n


@pytest.mark.parametrize(("trace", "fires"), [("param_linear_kineto_2080ti", True),
                                              ("tracelens_mi300_resnet18_ddp_train", False)])
def test_grad_not_set_to_none_on_real_traces(shared, trace, fires):
    path = next((DATA / trace).glob("*.json*"))
    expected = _zero_grad_zeroes(_events(path))
    found, _ = _found(path)
    assert bool(expected) == fires == ("grad_not_set_to_none" in found)
    if fires:
        assert found["grad_not_set_to_none"]["value"] == expected


@pytest.mark.parametrize(("trace", "fires"), [("kineto_rn50_autograd_api_nw0", True),
                                              ("tracelens_h100_bert_small", False)])
def test_long_gpu_gaps_on_real_traces(shared, trace, fires):
    path = next((DATA / trace).glob("*.json.gz"))
    ops = sorted((e["ts"], e["ts"] + e["dur"]) for e in _events(path)
                 if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
                 and e.get("dur", 0) > 0)
    long = [e - s for s, e in gaps(union(ops)) if e - s > 500e3]
    found, _ = _found(path)
    assert bool(long) == fires == ("long_gpu_gaps" in found)
    if fires:
        assert found["long_gpu_gaps"]["value"] == pytest.approx(max(long) / 1e3, abs=1e-3)


def test_small_synchronous_host_to_device_copies_are_no_sync_memcpy(shared):
    """rn50 (legacy autograd profiler) has cudaMemcpy calls, all host-to-device copies of <= 64 KB."""
    path = DATA / "kineto_rn50_autograd_api_nw0" / "worker0.pt.trace.json.gz"
    events = _events(path)
    assert any(e.get("name") == "cudaMemcpy" for e in events)
    assert "sync_memcpy" not in _found(path)[0]


# --- stragglers (HTA/TraceLens: step time across ranks) ----------------------------------------

@pytest.mark.parametrize(("slow_step_us", "fires"), [(1020.0, False), (1100.0, True)])
def test_a_rank_behind_the_fastest_by_over_2_percent_is_a_straggler(tmp_path, slow_step_us, fires):
    folder = tmp_path / "run"
    folder.mkdir()
    for rank, step in ((0, 1000.0), (1, slow_step_us)):
        b = TraceBuilder(rank=rank, world_size=2)
        for k in range(3):
            b.step(k, k * step, step)
            b.launch(k * step, 5, k * step + 10, 500)
        b.write(folder / f"rank{rank}.json")
    found, _ = _found(folder)
    assert ("stragglers" in found) == fires
    if fires:
        row = found["stragglers"]
        assert row["ranks"] == [1]
        assert row["value"] == pytest.approx(100.0 * (slow_step_us - 1000.0) / 1000.0, abs=1e-3)
        assert row["est_saving_ms_per_step"] == pytest.approx((slow_step_us - 1000.0) / 1e3, abs=1e-3)


def test_stragglers_on_the_dlrm_ranks(shared):
    """DLRM on 8 V100s: one ProfilerStep per rank; the slowest rank's step is the finding's."""
    steps: dict[int, float] = {}
    with tarfile.open(DATA / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".json"):
                doc = json.load(tar.extractfile(member))
                rank = doc["distributedInfo"]["rank"]
                steps[rank] = sum(e["dur"] for e in doc["traceEvents"]
                                  if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")
    slowest = max(steps, key=steps.get)
    behind = steps[slowest] - min(steps.values())
    found, _ = _found(DATA / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz")
    row = found["stragglers"]
    assert row["ranks"] == [slowest]
    assert row["value"] == pytest.approx(100.0 * behind / min(steps.values()), abs=1e-2)
    assert f"the others waited {behind / 1e3:.3g} ms in all" in row["evidence"]


# --- kernel variance and synchronous copies on real data -----------------------------------------

def _variable_share(events: list[dict]) -> float:
    """% of GPU time (kernels, copies, memsets) in kernels with >= 10 calls and CV > 1."""
    durs: dict[str, list[float]] = {}
    total = 0.0
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") == "X" and cat in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            total += e["dur"]
            if cat == "kernel":
                durs.setdefault(e["name"], []).append(e["dur"])
    variable = [d for d in durs.values()
                if len(d) >= 10 and statistics.mean(d) > 0 and statistics.stdev(d) / statistics.mean(d) > 1]
    return 100.0 * sum(map(sum, variable)) / total


@pytest.mark.parametrize(("trace", "fires"), [("kineto_rn50_autograd_api_nw0", True),
                                              ("tracelens_h100_bert_small", False)])
def test_kernel_variance_on_real_traces(shared, trace, fires):
    path = next((DATA / trace).glob("*.json.gz"))
    share = _variable_share(_events(path))
    found, _ = _found(path)
    assert (share > 2.0) == fires == ("kernel_variance" in found)
    if fires:
        assert found["kernel_variance"]["value"] == pytest.approx(share, abs=1e-2)


def test_sync_memcpy_on_an_nsys_export(shared):
    """CloverLeaf's cudaMemcpy calls, counted in the export's own tables: every device-to-host copy
    and the host-to-device copies over 64 KB (nsys' cuda_memcpy_sync)."""
    path = SHARED / "data" / "nsys" / "pipit_nsys_a100_cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite"
    with closing(sqlite3.connect(path)) as con:
        (expected,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = m.correlationId AND r.globalTid / 16777216 = m.globalPid / 16777216 "
            "JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value LIKE 'cudaMemcpy\\_v%' ESCAPE '\\' AND NOT (m.copyKind = 1 AND m.bytes <= 65536)").fetchone()
    found, _ = _found(path)
    assert expected > 0 and found["sync_memcpy"]["value"] == expected


def test_kernel_variance_leaves_collectives_to_the_communication_findings() -> None:
    """hta_trace_diff's A100 run: ncclKernel_SendRecv varies (CV > 1 over >= 10 calls, computed
    from the JSON) because a collective's kernel waits for the other ranks; exposed_communication
    counts that wait, so kernel_variance neither names it nor counts its time."""
    events = complete_events(TRACES / "hta_trace_diff" / "control.json.gz")
    durs = [float(e["dur"]) for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_SendRecv")]
    assert len(durs) >= 10 and statistics.stdev(durs) / statistics.mean(durs) > 1
    with tr.open(TRACES / "hta_trace_diff" / "control.json.gz") as db:
        frame = advise(db, all_findings=True).frame
    row = frame.set_index("finding").loc["kernel_variance"]
    assert "nccl" not in row["evidence"].lower()
    assert "exposed_communication" in set(frame["finding"])
