"""ops, memory and stragglers on real traces against plain-Python passes over the JSON (the FLOP
formulas against torch.utils.flop_counter: tests/store/test_op_cost.py)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

import trace_report as tr
from tests.conftest import TRACES, events_of, invoke, load_json, tar_ranks, trace_file
from trace_report.analyses.common.stragglers import stragglers
from trace_report.analyses.memory import memory_peaks, memory_timeline
from trace_report.analyses.ops import OpsOptions, ops

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def test_ops_gpu_time_by_external_id(a100, a100_events):
    """gpu_self_us per operator name = GPU ops whose launch call's External id is the operator's."""
    ops_by_ext = {e["args"]["External id"]: e["name"] for e in a100_events
                  if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
    launch_ext = {e["args"]["correlation"]: e["args"].get("External id") for e in a100_events
                  if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    want: dict[str, float] = defaultdict(float)
    for e in a100_events:
        if e.get("cat") in GPU_CATS:
            name = ops_by_ext.get(launch_ext.get(e["args"].get("correlation")))
            if name and name.startswith("aten::"):
                want[name] += float(e["dur"])
    got = ops(a100, OpsOptions(limit=None)).frame.set_index("name")
    for name, us in want.items():
        assert got.loc[name, "gpu_self_us"] == pytest.approx(us, rel=1e-9), name
    assert got["gpu_self_us"].sum() == pytest.approx(sum(want.values()), rel=1e-9)
    # a wrapper launches nothing itself but causes its callee's kernels
    assert got.loc["aten::conv2d", "gpu_self_us"] == 0
    assert got.loc["aten::conv2d", "gpu_us"] == pytest.approx(got.loc["aten::cudnn_convolution", "gpu_us"])


def test_memory_peaks_against_json(shared):
    """Peak of Total Allocated / Total Reserved on cuda:0 in the step, including the level it starts at."""
    path = trace_file("tracelens_h100_bert_small")
    evs = events_of(load_json(path))
    step = next(e for e in evs if e.get("name", "").startswith("ProfilerStep#"))
    mem = [e for e in evs if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    s0, s1 = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    inside = [e for e in mem if s0 <= float(e["ts"]) < s1]
    before = [e for e in mem if float(e["ts"]) < s0]
    level = [max(before, key=lambda e: float(e["ts"]))] if before else []
    with tr.open(path) as db:
        row = memory_peaks(db).frame.set_index("device").loc["cuda:0"]
        timeline = memory_timeline(db).frame
    assert row["events"] == len(inside)
    assert row["peak_allocated_bytes"] == max(e["args"]["Total Allocated"] for e in inside + level)
    assert row["peak_reserved_bytes"] == max(e["args"]["Total Reserved"] for e in inside + level)
    assert len(timeline) == sum(1 for e in evs if e.get("name") == "[memory]")


def test_memory_2021_running_sum(shared):
    """2021 traces carry only Bytes: allocated_bytes is their running sum per device, with a note."""
    path = trace_file("kineto_rn50_nw4_2021jun")
    mem = [e for e in events_of(load_json(path)) if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1]
    with tr.open(path) as db:
        result = memory_timeline(db)
        peaks = memory_peaks(db).frame
    cuda = result.frame[result.frame["device"] == "cuda:0"]
    assert cuda["allocated_bytes"].iloc[-1] == sum(e["args"]["Bytes"] for e in mem)
    assert cuda["allocated_bytes"].max() == peaks[peaks["device"] == "cuda:0"]["peak_allocated_bytes"].max()
    assert "relative" in result.notes[0]


def test_stragglers_dlrm(shared):
    """Step time per rank = ProfilerStep dur of each rank's trace; the slowest is the longest."""
    ranks = tar_ranks(shared / "data" / "traces" / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz")
    durs = {r: next(float(e["dur"]) for e in evs if e["name"].startswith("ProfilerStep#")) for r, evs in ranks.items()}
    with tr.open(TRACES / "param_dlrm_kineto_v100x8") as db:
        result = stragglers(db)
    frame = result.frame.set_index("rank")
    assert frame["step_us"].to_dict() == durs
    assert frame["behind_us"].to_dict() == {r: d - min(durs.values()) for r, d in durs.items()}
    slowest = max(durs, key=durs.get)
    assert frame.index[frame["slowest"]].tolist() == [slowest]
    spread = max(durs.values()) - min(durs.values())
    assert result.notes == [f"step 10: 8 ranks, spread {spread:,.1f} us ({100 * spread / min(durs.values()):.1f}% "
                            f"of the fastest), slowest rank {slowest}"]


def test_commands_end_to_end(shared, tmp_path):
    """ops, memory (with chart) and breakdown --stragglers print JSON rows with their keys."""
    vit = trace_file("tracelens_h100_falconsai_vit")
    result = invoke(["ops", vit, "-f", "json", "-n", "3", "--by-shape"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 3 and {"name", "input_dims", "gpu_us", "flop", "tflop_per_s"} <= set(rows[0])
    result = invoke(["memory", trace_file("tracelens_h100_bert_small"), "-f", "json"])
    assert result.exit_code == 0, result.output
    assert {"device", "peak_allocated_bytes"} <= set(json.loads(result.stdout)[0])
    result = invoke(["breakdown", TRACES / "param_dlrm_kineto_v100x8", "--stragglers", "-f", "csv"])
    assert result.exit_code == 0 and result.stdout.splitlines()[0] == "step,rank,step_us,behind_us,behind_pct,slowest"
    result = invoke(["memory", trace_file("hta_a100_ddp_nccl")])
    assert result.exit_code == 0 and "profile_memory=True" in result.stderr


@pytest.mark.slow
def test_memory_chart_file(shared, tmp_path):
    """memory --chart writes an HTML page with the Vega-Lite spec of both series."""
    chart = tmp_path / "memory.html"
    result = invoke(["memory", trace_file("tracelens_h100_bert_small"), "--chart", chart, "-f", "csv"])
    assert result.exit_code == 0, result.output
    text = chart.read_text()
    assert "allocated" in text and "reserved" in text and "<script" in text
