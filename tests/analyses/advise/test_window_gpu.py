"""advise's GPU-time findings count the GPU work of the windows they divide by (view
window_gpu_ops, analyses/advise/window_gpu.py): no share of step, iteration or GPU time passes
100%, and a finding's time is that of the operations launched inside the ProfilerSteps, from a
plain-Python pass over the JSON (also test_advise.py: DLRM's exposed communication per step)."""

from __future__ import annotations

import pytest
from advise_traces import TraceBuilder
from conftest import TRACES, load_json, trace_file
from gpu_steps_plain import launched_in_steps

import trace_report as tr
from trace_report.analyses.advise import advise

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")


@pytest.mark.parametrize("name", ["kineto_rn50_autograd_api_nw0", "hta_a100_ddp_nccl", "tracelens_h100_timesformer",
                                  "hta_trace_diff", "hta_triton_example", "kineto_rn50_nw4_2021jun"])
def test_no_share_passes_100_percent(name: str) -> None:
    with tr.open(TRACES / name) as db:
        frame = advise(db, by_rank=True, all_findings=True).frame
    assert (frame["saving_pct_of_step"].dropna() <= 100.0).all(), frame[["finding", "saving_pct_of_step"]]
    shares = frame[frame["unit"].str.startswith("%")]
    assert (shares["value"] <= 100.0).all(), shares[["finding", "value", "unit"]]


def test_work_before_the_first_step_is_not_counted(tmp_path) -> None:
    """A long cuDNN-style kernel launched before the first ProfilerStep (autotuning) is no step's
    work: the layout-conversion share and its saving per step count only the steps' kernels."""
    b = TraceBuilder()
    conv = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>()"
    b.launch(900_000.0, 10.0, 900_020.0, 50_000.0, name=conv)  # before the steps: 50 ms
    for i in range(4):
        t = 1_000_000.0 + i * 10_000.0
        b.step(i + 1, t, 10_000.0)
        b.launch(t + 100.0, 10.0, t + 200.0, 1_000.0, name=conv)
        b.launch(t + 300.0, 10.0, t + 1_300.0, 4_000.0)
    with tr.open(b.write(tmp_path / "t.json")) as db:
        rows = advise(db, all_findings=True).frame.set_index("finding")
    assert rows.loc["layout_conversions", "value"] == pytest.approx(100 * 1_000.0 / 5_000.0, abs=1e-3)
    assert rows.loc["layout_conversions", "est_saving_ms_per_step"] == pytest.approx(1.0, abs=1e-3)


def test_plain_reference_reads_the_steps() -> None:
    """The plain pass itself: on a trace whose work is all launched in its steps it keeps every operation."""
    trace = load_json(trace_file("hta_a100_ddp_nccl"))
    every = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
             ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(launched_in_steps(trace)) == len(every)
