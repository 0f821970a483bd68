"""`trace-report advise`: findings and their numbers, checked against plain-Python passes over real
traces (and torch-tb-profiler's thresholds); silence when nothing applies."""

from __future__ import annotations

import json
import statistics

import duckdb
import pytest
from conftest import (
    GPU_OP_CATS,
    KERNEL_CATS,
    RUNTIME_CATS,
    TRACES,
    events_of,
    folder_events,
    invoke,
    load_json,
    tar_ranks,
    trace_file,
)

import trace_report as tr
from trace_report.analyses.advise import Thresholds, _Checker, advise, memory_peaks

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

KERNEL, RUNTIME, GPU_OPS = KERNEL_CATS, RUNTIME_CATS, GPU_OP_CATS





def corr(e: dict) -> int | None:
    return (e.get("args") or {}).get("correlation")


def steps_of(events: list[dict]) -> list[dict]:
    return [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
            and e.get("cat") in ("user_annotation", "cpu_op", "Operator")]


def busy_in(events: list[dict], lo: float, hi: float) -> float:
    spans = sorted((max(e["ts"], lo), min(e["ts"] + e["dur"], hi)) for e in events
                   if e.get("cat") in GPU_OPS and e["ts"] + e["dur"] > lo and e["ts"] < hi)
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def by_finding(result) -> dict[str, dict]:
    return {r["finding"]: r for r in result.frame.to_dict(orient="records")}


@pytest.fixture(scope="module")
def a100_advice():
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        return advise(db)


def test_layout_conversions_over_two_percent(a100_advice, a100_events):
    gpu = [e for e in a100_events if e.get("cat") in GPU_OPS]
    layout = sum(e["dur"] for e in gpu if "nchwToNhwc" in e["name"] or "nhwcToNchw" in e["name"])
    f = by_finding(a100_advice)["layout_conversions"]
    assert f["value"] == pytest.approx(100.0 * layout / sum(e["dur"] for e in gpu), abs=1e-3)
    assert f["threshold"] == 2.0 and "channels_last" in f["recommendation"]


def test_low_gpu_utilization_is_busy_share_of_steps(a100_advice, a100_events):
    steps = steps_of(a100_events)
    busy = sum(busy_in(a100_events, s["ts"], s["ts"] + s["dur"]) for s in steps)
    f = by_finding(a100_advice)["low_gpu_utilization"]
    assert f["value"] == pytest.approx(100.0 * busy / sum(s["dur"] for s in steps), abs=1e-3)
    assert f["threshold"] == 50.0  # torch-tb-profiler: utilization < 0.5


def test_tensor_cores_in_use_means_no_tensor_core_finding(a100_advice):
    assert "no_tensor_cores" not in by_finding(a100_advice)


def test_data_loading_share_matches_tb_profiler_input():
    """tb-profiler's own test input: one step with one enumerate(DataLoader)# range."""
    events = folder_events("kineto_gpu_metrics_input")
    (step,) = steps_of(events)
    loader = [e for e in events if e["name"].startswith("enumerate(DataLoader)#")]
    with tr.open(TRACES / "kineto_gpu_metrics_input") as db:
        f = by_finding(advise(db))["data_loading"]
    assert f["value"] == pytest.approx(100.0 * sum(e["dur"] for e in loader) / step["dur"], abs=1e-3)
    assert f["threshold"] == 5.0


def test_v100_fp32_resnet_without_tensor_cores_and_launch_bound():
    data = load_json(trace_file("kineto_rn50_nw4_2021jun"))
    events = [e for e in events_of(data) if e.get("ph") == "X"]
    assert data["deviceProperties"][0]["computeMajor"] == 7
    tc_words = ("h884", "s884", "h1688", "s1688", "hmma", "16816", "xmma", "tensorop", "tf32")
    kernels = [e for e in events if e.get("cat") in KERNEL]
    assert not any(w in k["name"] for k in kernels for w in tc_words)
    with tr.open(TRACES / "kineto_rn50_nw4_2021jun") as db:
        found = by_finding(advise(db))
    assert "compute capability 7.0" in found["no_tensor_cores"]["evidence"]
    assert "mixed precision" in found["no_tensor_cores"]["recommendation"]
    # launch-bound, HTA's rule: GPU ops (kernels, memcpy, memset) launched in steps that ran shorter
    # than their launch call
    launches = {corr(e): e for e in events if e.get("cat") in RUNTIME and corr(e) is not None}
    steps = steps_of(events)
    gpu_ops = [e for e in events if e.get("cat") in GPU_OP_CATS]
    in_steps = [(k, launches[corr(k)]) for k in gpu_ops if corr(k) in launches
                and any(s["ts"] <= launches[corr(k)]["ts"] < s["ts"] + s["dur"] for s in steps)]
    shorter = sum(k["dur"] < launch["dur"] for k, launch in in_steps)
    f = found["launch_bound"]
    assert f["value"] == pytest.approx(100.0 * shorter / len(in_steps), abs=1e-3)
    assert f"{len(in_steps) / len(steps):,.0f} GPU ops per step" in f["evidence"]
    assert f"median GPU op {statistics.median(k['dur'] for k, _ in in_steps):.1f} us" in f["evidence"]


def test_silence_when_nothing_applies():
    with tr.open(TRACES / "kineto_rn50_nw4_2021feb") as db:
        result = advise(db)
    assert result.frame.empty
    assert any(n.startswith("no findings") for n in result.notes)


def test_cpu_only_trace_skips_gpu_checks():
    with tr.open(TRACES / "hta_cpu_only") as db:
        result = advise(db)
    assert result.frame.empty
    assert any("no GPU activity" in n for n in result.notes)


def test_multi_rank_per_rank_and_aggregated():
    path = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
    ranks = tar_ranks(path)
    low = set()
    for rank, events in ranks.items():
        steps = steps_of(events)
        busy = sum(busy_in(events, s["ts"], s["ts"] + s["dur"]) for s in steps)
        if 100.0 * busy / sum(s["dur"] for s in steps) < 50.0:
            low.add(rank)
    with tr.open(path) as db:
        per_rank = advise(db, by_rank=True).frame
        total = advise(db).frame
    assert set(per_rank.loc[per_rank["finding"] == "low_gpu_utilization", "rank"]) == low
    row = total[total["finding"] == "low_gpu_utilization"].iloc[0]
    assert set(row["ranks"]) == low
    assert row["value"] == pytest.approx(per_rank.loc[per_rank["finding"] == "low_gpu_utilization", "value"].min())


def test_memory_near_capacity_from_memory_events():
    """[memory] instant events (profile_memory=True): peak Total Allocated vs totalGlobalMem."""
    data = load_json(trace_file("tracelens_h100_timesformer"))
    mem = [e for e in data["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Id", -1) >= 0]
    peak = max(e["args"]["Total Allocated"] for e in mem)
    capacity = data["deviceProperties"][0]["totalGlobalMem"]
    con = duckdb.connect()
    con.execute("CREATE TABLE events (trace_id INTEGER, name VARCHAR, args VARCHAR)")
    con.execute("CREATE TABLE traces (trace_id INTEGER, metadata VARCHAR)")
    con.executemany("INSERT INTO events VALUES (1, ?, ?)", [(e["name"], json.dumps(e["args"])) for e in mem])
    con.execute("INSERT INTO traces VALUES (1, ?)", [json.dumps({"deviceProperties": data["deviceProperties"]})])
    peaks = memory_peaks(con, [1])
    assert peaks["allocated_bytes"].max() == peak and peaks["capacity_bytes"].iloc[0] == capacity
    quiet = _Checker(Thresholds())
    quiet.memory(0, peaks)
    assert not quiet.rows  # about 5% of 80 GB: far from the 90% threshold
    loud = _Checker(Thresholds(memory_pct=1.0))
    loud.memory(0, peaks)
    (row,) = loud.rows
    assert row["finding"] == "memory_near_capacity" and row["value"] == pytest.approx(100.0 * peak / capacity,
                                                                                         abs=1e-3)




def test_cli_advise_rows_and_silence():
    found = invoke(["advise", str(TRACES / "hta_a100_ddp_nccl"), "-f", "json"])
    assert found.exit_code == 0, found.output
    rows = json.loads(found.stdout)
    assert {"rank", "finding", "value", "threshold", "unit", "evidence", "recommendation"} == set(rows[0])
    quiet = invoke(["advise", str(TRACES / "kineto_rn50_nw4_2021feb")])
    assert quiet.exit_code == 0 and quiet.stdout == ""
    assert "no findings" in quiet.stderr
    quiet_json = invoke(["advise", str(TRACES / "kineto_rn50_nw4_2021feb"), "-f", "json"])
    assert json.loads(quiet_json.stdout) == []
