"""`trace-report advise` on real traces: each finding's value and saving against a plain-Python pass
over the trace's JSON (the union of GPU-op intervals, the launch of each operation through its
correlation id, the synchronising runtime calls, the DataLoader ranges), and silence where the
trace shows no such problem. Constructed edge cases: tests/analyses/advise/test_advise_rules.py."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from advise_traces import clip, length, union
from conftest import GPU_OP_CATS, KERNEL_CATS, RUNTIME_CATS, TRACES, events_of, load_json, tar_ranks, trace_file
from gpu_steps_plain import launched_in_steps
from gpu_steps_plain import steps as plain_steps

import trace_report as tr
from trace_report.analyses.advise import Thresholds, advise

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

SYNC = re.compile(r"^(cuda|hip)(Device|Stream|Event)Synchronize$|^(cuda|hip)Memcpy$")
COMM = re.compile(r"^(nccl|hip|hccl)|ncclKernel")  # HTA's communication kernel pattern


def corr(e: dict) -> int | None:
    return (e.get("args") or {}).get("correlation")


class Plain:
    """The numbers advise rests on, from the JSON alone."""

    def __init__(self, events: list[dict]):
        self.step_rows = plain_steps({"traceEvents": events})
        x = [e for e in events if e.get("ph") == "X" and "dur" in e]
        self.gpu = [e for e in x if e.get("cat") in GPU_OP_CATS]
        self.gpu_us = sum(e["dur"] for e in self.gpu)
        self.runtime = {corr(e): e for e in x if e.get("cat") in RUNTIME_CATS and corr(e) is not None}
        self.syncs = [e for e in x if e.get("cat") in RUNTIME_CATS and SYNC.match(e["name"])]
        self.steps = [e for e in x if str(e["name"]).startswith("ProfilerStep#")]
        self.busy = union([(e["ts"], e["ts"] + e["dur"]) for e in self.gpu if e["dur"] > 0])
        self.loading = union([(e["ts"], e["ts"] + e["dur"]) for e in x
                              if str(e["name"]).startswith("enumerate(DataLoader)#")])
        if self.steps:
            self.windows = [(s["ts"], s["ts"] + s["dur"]) for s in self.steps]
        else:
            self.windows = [(self.busy[0][0], self.busy[-1][1])]
        self.span = (min(e["ts"] for e in x if e.get("cat") != "Trace"),
                     max(e["ts"] + e["dur"] for e in x if e.get("cat") != "Trace"))

    @property
    def wall_us(self) -> float:
        return sum(b - a for a, b in self.windows)

    @property
    def step_us(self) -> float:
        """Step time as the GPU sees it (gpu_steps_plain), the denominator of "% of step time"; the
        windows' wall time without ProfilerStep."""
        return sum(r["step_us"] for r in self.step_rows) if self.step_rows else self.wall_us

    def idle_by_cause(self) -> dict[str, float]:
        """GPU idle inside the windows by cause, as docs/analysis.md defines it."""
        starts: dict[float, float] = {}
        for e in self.gpu:
            launch = self.runtime.get(corr(e))
            if launch is not None:
                starts[e["ts"]] = min(starts.get(e["ts"], float("inf")), launch["ts"] + launch["dur"])
        out = {"data_loading": 0.0, "host_sync": 0.0, "launch": 0.0, "other": 0.0}
        gaps = list(zip([None] + [b for _, b in self.busy], [a for a, _ in self.busy] + [None], strict=True))
        for gone, resume in gaps:
            for lo, hi in self.windows:
                s, e = max(gone if gone is not None else lo, lo), min(resume if resume is not None else hi, hi)
                if e <= s:
                    continue
                dl = min(clip(self.loading, s, e), e - s)
                out["data_loading"] += dl
                if resume is not None and gone is not None and any(
                        c["ts"] <= gone <= c["ts"] + c["dur"] for c in self.syncs):
                    cause = "host_sync"
                elif starts.get(resume, float("-inf")) > (gone if gone is not None else s):
                    cause = "launch"  # nothing queued when the GPU went idle (or the window began)
                else:
                    cause = "other"
                out[cause] += e - s - dl
        return out


def found(result) -> dict[str, dict]:
    return {r["finding"]: r for r in result.frame.to_dict(orient="records")}


@pytest.fixture(scope="module")
def advised() -> Callable[[str], Any]:
    """``advised(name)``: ``advise(all_findings=True)`` of one shared trace, computed once per
    module (the tests only read it)."""
    results: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in results:
            with tr.open(TRACES / name) as db:
                results[name] = advise(db, all_findings=True)
        return results[name]

    return get


@pytest.fixture(scope="module")
def a100(advised):
    return Plain(events_of(load_json(trace_file("hta_a100_ddp_nccl")))), advised("hta_a100_ddp_nccl")


@pytest.fixture(scope="module")
def rn50_jun() -> Plain:
    """The plain pass over the V100 ResNet-50 trace of June 2021 (the tests only read it)."""
    return Plain(events_of(load_json(trace_file("kineto_rn50_nw4_2021jun"))))


def test_findings_sorted_by_saving_and_verdict_names_the_first(a100):
    _, result = a100
    savings = result.frame["est_saving_ms_per_step"].dropna().tolist()
    assert savings == sorted(savings, reverse=True) and len(savings) >= 3
    first = result.frame.iloc[0]
    assert first["title"] in result.verdict and result.verdict.startswith("Biggest saving")


def test_exposed_communication_is_comm_not_overlapped_with_compute(a100):
    plain, result = a100
    comm = union([(e["ts"], e["ts"] + e["dur"]) for e in plain.gpu if e["cat"] == "kernel" and COMM.match(e["name"])])
    comp = union([(e["ts"], e["ts"] + e["dur"]) for e in plain.gpu
                  if e["cat"] == "kernel" and not COMM.match(e["name"])])
    exposed = length(comm) - sum(clip(comp, a, b) for a, b in comm)
    f = found(result)["exposed_communication"]
    assert f["value"] == pytest.approx(100 * exposed / plain.gpu_us, abs=0.01)
    assert f["est_saving_ms_per_step"] == pytest.approx(exposed / len(plain.steps) / 1e3, abs=0.01)
    assert "bucket" in f["recommendation"] and "--stragglers" not in f["recommendation"]  # one rank


def test_launch_bound_is_the_idle_waiting_for_launches_with_a_shallow_queue(a100):
    plain, result = a100
    idle = plain.idle_by_cause()
    f = found(result)["launch_bound"]
    assert f["value"] == pytest.approx(100 * idle["launch"] / plain.step_us, abs=0.01)
    assert f["est_saving_ms_per_step"] == pytest.approx(idle["launch"] / len(plain.steps) / 1e3, abs=0.01)
    delays = [k["ts"] - (plain.runtime[corr(k)]["ts"] + plain.runtime[corr(k)]["dur"])
              for k in plain.gpu if corr(k) in plain.runtime]
    assert statistics.median(delays) < 10  # µs: each op starts right after its launch, the queue drains


def test_layout_conversions_saving_is_their_kernel_time(a100):
    plain, result = a100
    layout = sum(e["dur"] for e in plain.gpu if "nchwToNhwc" in e["name"] or "nhwcToNchw" in e["name"])
    f = found(result)["layout_conversions"]
    assert f["value"] == pytest.approx(100.0 * layout / plain.gpu_us, abs=1e-3)
    assert f["est_saving_ms_per_step"] == pytest.approx(layout / len(plain.steps) / 1e3, abs=1e-3)


def test_deep_queue_is_never_launch_bound(rn50_jun, advised):
    """V100 ResNet-50: the CPU runs milliseconds ahead (median launch-to-start delay >> kernel time):
    no launch_bound. What remains is the GPU idle with nothing queued and no launch under way
    (the CPU's work between its bursts of launches): cpu_bound, after the GPU-work finding."""
    plain = rn50_jun
    delays = [k["ts"] - (plain.runtime[corr(k)]["ts"] + plain.runtime[corr(k)]["dur"])
              for k in plain.gpu if corr(k) in plain.runtime]
    durations = [k["dur"] for k in plain.gpu]
    assert statistics.median(delays) > 1000 * statistics.median(durations)
    result = advised("kineto_rn50_nw4_2021jun")
    f = found(result)
    assert "launch_bound" not in f
    assert "no launch call under way" in f["cpu_bound"]["evidence"] and "launch queue is deep" in f["cpu_bound"][
        "evidence"]
    # the top finding is GPU work: FP32 convolutions on a V100 without tensor cores
    assert result.frame.iloc[0]["finding"] == "no_tensor_cores"


def test_pageable_copies_share_of_gpu_time(rn50_jun, advised):
    plain = rn50_jun
    pageable = sum(e["dur"] for e in plain.gpu if "Pageable" in e["name"])
    f = found(advised("kineto_rn50_nw4_2021jun"))["pageable_memcpy"]
    assert f["value"] == pytest.approx(100 * pageable / plain.gpu_us, abs=1e-3)
    assert f["est_saving_ms_per_step"] == pytest.approx(pageable / 2 / len(plain.steps) / 1e3, abs=1e-3)
    assert "pin_memory=True" in f["recommendation"] and "non_blocking=True" in f["recommendation"]


@pytest.mark.parametrize("name", ["hta_ns_resolution", "tracelens_mi300_torch_compile_triton"])
def test_a_sync_that_only_waits_for_busy_gpu_is_no_finding(name):
    """One device synchronisation takes 15% (V100) / 90% (MI300X) of the span, but the GPU stays busy:
    waiting for work to finish costs nothing."""
    plain = Plain(events_of(load_json(trace_file(name))))
    assert sum(c["dur"] for c in plain.syncs) > 0.1 * (plain.span[1] - plain.span[0])
    assert plain.idle_by_cause()["host_sync"] < 0.02 * plain.wall_us
    with tr.open(TRACES / name) as db:
        result = advise(db)
    assert "host_sync" not in found(result)
    assert "launch_bound" not in found(result) and "cpu_bound" not in found(result)


def test_data_loading_per_iteration_without_profiler_steps():
    """2021 ResNet-50 without ProfilerStep: its iterations are inferred from the 6
    Optimizer.step#SGD.step calls (5 windows, each from the end of one call to the end of the
    next); the DataLoader ranges and the GPU idle during them are counted inside those windows."""
    events = events_of(load_json(trace_file("kineto_rn50_autograd_api_nw0")))
    plain = Plain(events)
    assert not plain.steps
    ends = sorted(e["ts"] + e["dur"] for e in events if e.get("ph") == "X"
                  and str(e.get("name", "")).startswith("Optimizer.step#") and e.get("cat") != "gpu_user_annotation")
    plain.windows = list(zip(ends, ends[1:], strict=False))
    idle = plain.idle_by_cause()
    with tr.open(TRACES / "kineto_rn50_autograd_api_nw0") as db:
        result = advise(db)
    f = found(result)["data_loading"]
    assert f["unit"] == "% of iteration time" and f["per"] == "iteration"
    loading = sum(clip(plain.loading, a, b) for a, b in plain.windows)
    assert f["value"] == pytest.approx(100 * loading / plain.wall_us, abs=0.01)
    assert f["est_saving_ms_per_step"] == pytest.approx(idle["data_loading"] / len(plain.windows) / 1e3, abs=0.01)
    assert any(f"{len(plain.windows)} iterations inferred from the repeated Optimizer.step#SGD.step" in n
               for n in result.notes)


def test_eight_rank_dlrm_is_exposed_communication_first():
    """DLRM on 8 V100s: NCCL is 76-90% of each rank's GPU time and almost none of it overlaps
    computation. Counted over the GPU operations launched inside the ProfilerStep (step_time's
    rule), as the step time the saving is a share of; each rank also ran work outside it."""
    ranks = tar_ranks(TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz")
    exposed_pct, exposed_ms, outside = {}, {}, 0.0
    for r, events in ranks.items():
        plain = Plain(events)
        ops = launched_in_steps({"traceEvents": events})
        outside += plain.gpu_us - sum(e["dur"] for e in ops)
        comm = union([(e["ts"], e["ts"] + e["dur"]) for e in ops
                      if e["cat"] in KERNEL_CATS and COMM.match(e["name"])])
        comp = union([(e["ts"], e["ts"] + e["dur"]) for e in ops
                      if e["cat"] in KERNEL_CATS and not COMM.match(e["name"])])
        exposed = length(comm) - sum(clip(comp, a, b) for a, b in comm)
        exposed_pct[r] = 100 * exposed / sum(e["dur"] for e in ops)
        exposed_ms[r] = exposed / len(plain.step_rows) / 1e3
    assert outside > 0  # the whole trace's figures would differ
    with tr.open(TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz") as db:
        result = advise(db)
        per_rank = advise(db, by_rank=True).frame
    top = result.frame.iloc[0]
    assert top["finding"] == "exposed_communication" and sorted(top["ranks"]) == sorted(ranks)
    assert "Communication not overlapped" in result.verdict
    rows = per_rank[per_rank["finding"] == "exposed_communication"].set_index("rank")["value"]
    saving = per_rank[per_rank["finding"] == "exposed_communication"].set_index("rank")["est_saving_ms_per_step"]
    for r, pct in exposed_pct.items():
        assert rows[r] == pytest.approx(pct, abs=0.01)
        assert saving[r] == pytest.approx(exposed_ms[r], abs=0.002)


def test_nothing_below_two_percent_unless_all():
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        default, every = advise(db), advise(db, all_findings=True)
    assert (default.frame["saving_pct_of_step"].dropna() >= 2.0).all()
    assert len(every.frame) > len(default.frame)
    assert any("shown with --all" in n for n in default.notes)


def test_gpu_bound_trace_says_so():
    """ResNet-50 Feb 2021 (V100, GPU busy 87% of step time, queue ~150 deep): the one idle finding is
    the GPU's wait for the CPU's work between bursts of launches (cpu_bound, a few % of step time); its
    fp32 GEMMs on an sm70 inferred from the volta_* kernel names (no deviceProperties), the kernel
    time (gpu_bound), a 40 ms first copy and kernel duration variance (TraceLens' rule, ~8% of step
    time above the kernels' medians) are the findings; without them the verdict says GPU-bound."""
    with tr.open(TRACES / "kineto_rn50_nw4_2021feb") as db:
        result = advise(db)
        assert set(result.frame["finding"]) == {"no_tensor_cores", "gpu_bound", "startup_in_window", "kernel_variance",
                                                "cpu_bound"}
        strict = advise(db, thresholds=Thresholds(min_tensor_core_cc=99.0, min_saving_pct=15.0))
    assert strict.frame.empty and strict.verdict.startswith("GPU-bound")


def test_cpu_only_trace_skips_gpu_checks():
    with tr.open(TRACES / "hta_cpu_only") as db:
        result = advise(db)
    assert result.frame.empty
    assert any("no GPU activity" in n for n in result.notes)


def test_cli_prints_blocks_and_json_keeps_every_field():
    from conftest import invoke

    from trace_report.analyses.advise.checks import ADVICE_COLUMNS

    out = invoke(["advise", TRACES / "hta_a100_ddp_nccl"])
    assert out.exit_code == 0
    first = out.stdout.splitlines()[0]
    assert first.startswith("Biggest saving:") and "1. " in out.stdout
    js = invoke(["advise", TRACES / "hta_a100_ddp_nccl", "-f", "json"])
    import json

    rows = json.loads(js.stdout)
    assert rows and set(ADVICE_COLUMNS) == set(rows[0])


def test_report_headline_names_the_biggest_finding():
    import html

    from trace_report.present.report import ReportOptions, advice_of, advice_section, headline_section

    with tr.open(TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz") as db:
        advice = advice_of(db, ReportOptions())
        head = headline_section(db, db.con, ReportOptions(), advice)
        section = advice_section(advice)
    assert html.escape(advice.verdict) in head.body and "exposed_communication" in advice.verdict
    assert section.body.index(html.escape(advice.verdict)) < section.body.index("<table")


# Each finding: a real trace that must produce it and one that must not (all_findings=True, so the
# 2% floor does not hide the rule itself). Constructed edge cases: test_advise_rules.py.
PAIRS = [
    ("pageable_memcpy", "kineto_rn50_nw4_2021jun", "hta_a100_ddp_nccl"),
    ("exposed_communication", "hta_a100_ddp_nccl", "kineto_rn50_nw4_2021jun"),
    ("host_sync", "kineto_gpu_metrics_input", "tracelens_mi300_torch_compile_triton"),
    ("data_loading", "kineto_rn50_autograd_api_nw0", "kineto_rn50_nw4_2021jun"),
    ("launch_bound", "tracelens_h100_bert_small", "kineto_rn50_nw4_2021jun"),
    ("cpu_bound", "tracelens_mi300_resnet18_ddp_train", "tracelens_h100_bert_small"),
    ("layout_conversions", "hta_a100_ddp_nccl", "tracelens_h100_bert_small"),
    ("no_tensor_cores", "hta_ns_resolution", "tracelens_h100_bert_small"),
    ("fp32_without_tf32", None, "tracelens_b200_vllm_eager"),
    ("low_gpu_utilization", "tracelens_h100_timesformer", "hta_ns_resolution"),
    ("gpu_bound", "hta_ns_resolution", "tracelens_h100_timesformer"),
    ("eager_softmax", "tracelens_h100_timesformer", "hta_ns_resolution"),
]


@pytest.mark.parametrize(("finding", "yes", "no"), PAIRS, ids=[p[0] for p in PAIRS])
def test_each_finding_fires_where_it_should_and_only_there(finding, yes, no, advised):
    for name, expected in ((yes, True), (no, False)):
        if name is None:  # no shared trace runs FP32 GEMMs on sm80+: test_advise_rules.py builds one
            continue
        result = advised(name)
        assert (finding in found(result)) is expected, (finding, name, list(found(result)))


@pytest.mark.parametrize("name", ["tracelens_h100_bert_small", "kineto_rn50_nw4_2021jun"])
def test_memory_check_reads_the_peaks_the_memory_command_shows(name: str) -> None:
    """advise's memory check rests on the largest ``Total Allocated`` / ``Total Reserved`` of each
    GPU's ``[memory]`` events (a plain pass over the JSON), the same peak the ``memory`` command
    gives as the maximum of its rows (each step, and outside every step: one definition, view
    memory_events). A GPU is an event's ``Device Id`` >= 0, ``cuda:0`` for a CUDA event without
    one. The 2021 trace carries no totals: no allocated peak (NaN)."""
    from trace_report.analyses.advise import memory_peaks
    from trace_report.analyses.memory import memory_peaks as step_peaks

    path = trace_file(name)
    def gpu(args: dict) -> int:
        return int(args.get("Device Id", 0 if args.get("Device Type") == 1 else -1))

    mem = [e["args"] for e in events_of(load_json(path)) if e.get("name") == "[memory]" and gpu(e["args"]) >= 0]
    assert mem  # both traces have GPU [memory] events
    with tr.open(path) as db:
        ids = [t for (t,) in db.con.execute("SELECT trace_id FROM traces").fetchall()]
        peaks = memory_peaks(db.con, ids).set_index("device")
        per_step = step_peaks(db).frame
    devices = {gpu(a) for a in mem}
    assert set(peaks.index) == devices
    for d in devices:
        allocated = [a["Total Allocated"] for a in mem if gpu(a) == d and "Total Allocated" in a]
        reserved = [a["Total Reserved"] for a in mem if gpu(a) == d and "Total Reserved" in a]
        got = peaks.loc[d]
        if allocated:
            assert got["allocated_bytes"] == max(allocated)
            steps = per_step[per_step["device"] == f"cuda:{d}"]
            assert got["allocated_bytes"] == steps["peak_allocated_bytes"].max()  # its rows: steps and outside them
        else:
            assert got["allocated_bytes"] != got["allocated_bytes"]  # NaN: allocations relative, not totals
        if reserved:
            assert got["reserved_bytes"] == max(reserved)
