"""launch_bound vs cpu_bound (table macro ``launch_cpu_split_of``, advise's ``launch_bound``):
what the CPU did while the GPU waited for a launch, on constructed steps and on real traces."""

from __future__ import annotations

from pathlib import Path

import pytest
from advise_traces import TraceBuilder
from conftest import complete_events, trace_file

import trace_report
from trace_report.analyses.advise import advise


def _loop(tmp_path: Path, own_us: float) -> Path:
    """One 10 ms step of 20 operators on one thread, each an aten::add of ``own_us`` of its own
    followed by a 5 us launch of a 2 us kernel that starts as the launch returns: the GPU waits
    for every launch."""
    b = TraceBuilder()
    b.step(1, 0.0, 10_000.0)
    t = 10.0
    for _ in range(20):
        b.cpu_op("aten::add", t, own_us + 5.0)
        b.launch(t + own_us, 5.0, t + own_us + 5.0, 2.0)
        t += own_us + 5.0 + 1.0
    return b.write(tmp_path / "loop.json")


def _first(path: Path) -> tuple[str, dict]:
    with trace_report.open(path) as db:
        frame = advise(db).frame
        split = db.con.execute("SELECT * FROM launch_cpu_split_of(100.0)").df().iloc[0].to_dict()
    return str(frame["finding"].iloc[0]), split


def test_thin_operators_are_launch_bound(tmp_path: Path) -> None:
    first, split = _first(_loop(tmp_path, 20.0))
    assert first == "launch_bound"
    # between the kernels the thread runs 20 us of aten::add and a 5 us launch; 1 us outside; the
    # step begins with nothing queued, so the first launch is waited on too: 20 launches
    assert split["launch_us"] == pytest.approx(20 * 5.0, abs=1e-6)
    assert split["op_us"] == 0.0 and split["python_us"] == 0.0


def test_thick_operators_are_cpu_bound(tmp_path: Path) -> None:
    first, split = _first(_loop(tmp_path, 400.0))
    assert first == "cpu_bound"
    assert split["top_name"] == "aten::add" and split["top_kind"] == "op"
    # the operators' own time inside the 19 waits: each operator starts 1 us before the previous
    # kernel ends, so 399 of its 400 us; the first one runs while the step waits for its first
    # kernel with nothing queued: all of its 400 us
    assert split["op_us"] == pytest.approx(19 * 399.0 + 400.0, abs=1e-6)


def test_one_bert_workload_one_name_on_both_vendors() -> None:
    """The same batch-1 BERT inference on an H100 and an MI300X: the same finding."""
    found = {}
    for name in ("tracelens_h100_bert_small", "tracelens_mi300_bert_small"):
        with trace_report.open(trace_file(name)) as db:
            frame = advise(db).frame
        found[name] = set(frame["finding"]) & {"launch_bound", "cpu_bound"}
    assert found["tracelens_h100_bert_small"] == found["tracelens_mi300_bert_small"] == {"launch_bound"}


def test_hipfree_names_the_cpu_work() -> None:
    """MI300X ResNet-18: the GPU waits on hipFree calls (plain pass: their summed duration)."""
    path = trace_file("tracelens_mi300_resnet18_ddp_train")
    free_us = sum(float(e["dur"]) for e in complete_events(path) if e.get("name") == "hipFree")
    with trace_report.open(path) as db:
        frame = advise(db).frame
        split = db.con.execute("SELECT * FROM launch_cpu_split_of(100.0)").df().iloc[0].to_dict()
    row = frame[frame["finding"] == "cpu_bound"].iloc[0]
    assert split["top_name"] == "hipFree" and split["top_kind"] == "runtime"
    assert 0.5 * free_us <= split["top_us"] <= free_us  # the part inside the waits
    assert "here hipFree" in row["recommendation"]


def test_launch_bound_names_the_launching_operator(tmp_path: Path) -> None:
    with trace_report.open(_loop(tmp_path, 20.0)) as db:
        row = advise(db).frame.iloc[0]
    assert row["finding"] == "launch_bound"
    assert "most: aten::add (20 launches" in row["evidence"] and "(start with aten::add)" in row["recommendation"]


def test_layout_names_the_operator_that_launched_the_conversions() -> None:
    """hta_a100_ddp_nccl: the innermost operator around each launch call of the nchwToNhwc/nhwcToNchw
    kernels that carries the call's External id, with the most of their GPU time, by a plain pass
    over the JSON."""
    path = trace_file("hta_a100_ddp_nccl")
    events = complete_events(path)
    ops: dict[tuple[int, object, object], list[tuple[float, float, str]]] = {}  # (External id, pid, tid)
    calls: dict[int, dict] = {}  # correlation -> its first launch call
    for e in events:
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op" and "External id" in args:
            key = (int(args["External id"]), e["pid"], e["tid"])
            ops.setdefault(key, []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), str(e["name"])))
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            calls.setdefault(int(args["correlation"]), e)
    by_op: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "kernel" and ("nchwToNhwcKernel" in e["name"] or "nhwcToNchwKernel" in e["name"]):
            call = calls[int(e["args"]["correlation"])]
            t = float(call["ts"])
            around = [o for o in ops.get((int(call["args"]["External id"]), call["pid"], call["tid"]), [])
                      if o[0] <= t <= o[1]]
            name = max(around)[2]
            by_op[name] = by_op.get(name, 0.0) + float(e["dur"])
    expected = max(by_op, key=lambda k: (by_op[k], k))
    with trace_report.open(path) as db:
        frame = advise(db, all_findings=True).frame
    row = frame[frame["finding"] == "layout_conversions"].iloc[0]
    assert f"most: {expected} (" in row["evidence"] and f"around {expected}" in row["recommendation"]


def test_data_loading_names_the_loader_settings_seen() -> None:
    """kineto_gpu_metrics_input: the DataLoader's label shows a single-process iterator and no
    pinning operator is recorded (plain pass), so the advice names num_workers and pin_memory."""
    events = complete_events(trace_file("kineto_gpu_metrics_input"))
    labels = {e["name"] for e in events if str(e.get("name", "")).startswith("enumerate(DataLoader)#")}
    assert any("_SingleProcessDataLoaderIter" in n for n in labels)
    assert not any(e.get("name") in ("aten::pin_memory", "aten::_pin_memory") for e in events)
    with trace_report.open(trace_file("kineto_gpu_metrics_input")) as db:
        frame = advise(db, all_findings=True).frame
    row = frame[frame["finding"] == "data_loading"].iloc[0]
    assert "num_workers=0" in row["evidence"] and "no aten::pin_memory call" in row["evidence"]
    assert "num_workers=4 or more, pin_memory=True" in row["recommendation"]
