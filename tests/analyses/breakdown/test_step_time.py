"""The step as the GPU sees it (view ``step_time``) and the gate that sees a slower GPU.

The view is checked against a plain-Python pass over the JSON (gpu_steps_plain.py) on a trace
whose CPU runs far ahead of its GPU (hta_ns_resolution: a launch queue ~800 deep), a CPU-bound
one and an MI300 one. The gate: B is A with every GPU event 1.3x longer and later (the CPU
unchanged); ``compare A B`` must break ``step_time>+5%`` and ``gpu_time>+5%``, which the CPU
spans alone cannot see."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import TRACES, invoke, shared_or_skip
from gpu_steps_plain import load, steps, stretch_gpu

import trace_report as tr
from trace_report.analyses.common.utilization import step_times

DEEP_QUEUE = "hta_ns_resolution/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
CPU_BOUND = "hta_trace_diff/control.json.gz"
TOL = 0.5  # µs: Python's float64 holds the ns-resolution trace's ~1.7e15 µs timestamps to ~0.25 µs
MI300 = "tracelens_mi300_bert_small/gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.parametrize("name", [DEEP_QUEUE, CPU_BOUND, MI300])
def test_step_time_view_matches_the_json(name):
    shared_or_skip()
    ref = steps(load(TRACES / name))
    with tr.open(TRACES / name) as db:
        got = step_times(db)
    assert len(got) == len(ref) > 0
    for row, r in zip(got.itertuples(index=False), ref, strict=True):
        assert row.cpu_us == pytest.approx(r["cpu_us"], abs=TOL)
        assert row.gpu_us == pytest.approx(r["gpu_us"], abs=TOL)
        assert row.step_us == pytest.approx(r["step_us"], abs=TOL)
        assert row.gpu_busy_us == pytest.approx(r["busy_us"], abs=TOL)
        assert row.bound_by == ("gpu" if r["gpu_us"] > r["cpu_us"] else "cpu")
        assert row.gpu_busy_us <= row.gpu_us + 1e-6


def test_deep_queue_steps_are_the_gpus():
    """The first ProfilerStep of the deep-queue trace lasts 35 ms on the CPU; the work launched in
    it ends ~66 ms after it: the step is the GPU's ~98 ms."""
    shared_or_skip()
    ref = steps(load(TRACES / DEEP_QUEUE))
    with tr.open(TRACES / DEEP_QUEUE) as db:
        got = step_times(db)
    first = got.iloc[0]
    assert first.bound_by == "gpu" and first.step_us == pytest.approx(ref[0]["gpu_us"])
    assert first.step_us > 2.5 * first.cpu_us


@pytest.fixture(scope="module")
def slowed(tmp_path_factory):
    """(A, B) files: B is A with a GPU 30% slower."""
    shared_or_skip()
    folder = tmp_path_factory.mktemp("slowed")
    out = []
    for name in (DEEP_QUEUE, MI300):
        b = folder / f"{name.split('/')[0]}_b.json.gz"
        with gzip.open(b, "wt") as fh:
            json.dump(stretch_gpu(load(TRACES / name), 1.3), fh)
        out.append((TRACES / name, b))
    return out


@pytest.mark.parametrize("which", [0, 1], ids=["deep_queue", "mi300"])
@pytest.mark.parametrize("rule", ["step_time>+5%", "gpu_time>+5%"])
def test_gate_sees_a_slower_gpu(slowed, which, rule):
    a, b = slowed[which]
    res = invoke(["compare", a, b, "-n", "1", "--fail-if", rule])
    assert res.exit_code == 3, res.output
    assert f"rule {rule}: BROKEN" in res.stdout
    ref_a, ref_b = steps(load(a)), steps(load(b))
    metric = "step_us" if rule.startswith("step") else "busy_us"
    change = 100 * (sum(r[metric] for r in ref_b) / sum(r[metric] for r in ref_a) - 1)
    assert change > 5
    assert f"BROKEN, {change:+.1f}%" in res.stdout


def test_gate_passes_a_trace_against_itself(slowed):
    a, _ = slowed[0]
    res = invoke(["compare", a, a, "-n", "1", "--fail-if", "step_time>+5%", "--fail-if", "gpu_time>+5%"])
    assert res.exit_code == 0, res.output
    assert "gate: passed, 2 rule(s) kept" in res.stdout
