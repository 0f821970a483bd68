"""What the GPU waits for at a window's start and in a window that recorded almost nothing
(views gpu_idle_causes, gpu_idle_by_cause, window_recorded): expected values from plain-Python
passes over the JSON."""

from __future__ import annotations

import pytest
from advise_traces import TraceBuilder
from conftest import GPU_OP_CATS, RUNTIME_CATS, TRACES, complete_events, trace_file

import trace_report as tr
from trace_report.analyses.advise import advise

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

RECORDED_CATS = {"cpu_op", "python_function", "cuda_runtime", "cuda_driver", *GPU_OP_CATS}


def _step(events: list[dict]) -> tuple[float, float]:
    (s,) = [e for e in events if str(e["name"]).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    return s["ts"], s["ts"] + s["dur"]


def test_preprocessing_before_the_first_kernel_is_cpu_bound() -> None:
    """TimeSformer inference: the pipeline's preprocessing runs on the CPU for ~218 ms of the one
    ProfilerStep before the first kernel's launch; nothing is queued, the GPU waits for the CPU."""
    events = complete_events(trace_file("tracelens_h100_timesformer"))
    lo, hi = _step(events)
    gpu = [e for e in events if e.get("cat") in GPU_OP_CATS]
    first = min(gpu, key=lambda e: e["ts"])
    calls = {(e.get("args") or {}).get("correlation"): e for e in events if e.get("cat") in RUNTIME_CATS}
    launch = calls[first["args"]["correlation"]]
    assert lo < launch["ts"] < first["ts"] < hi
    waited = launch["ts"] - lo  # no launch under way, nothing queued: CPU work
    assert waited > 0.5 * (hi - lo)
    with tr.open(TRACES / "tracelens_h100_timesformer") as db:
        result = advise(db)
    top = result.frame.iloc[0]
    assert top["finding"] == "cpu_bound" and "(cpu_bound)" in result.verdict
    # the first period, plus the short waits of the same kind later in the step
    assert waited / 1e3 <= top["est_saving_ms_per_step"] <= waited / 1e3 + 1.0
    assert "no launch call under way" in top["evidence"]


def test_a_window_that_recorded_almost_nothing_says_so() -> None:
    """HTA's Triton example: a 13.3 s ProfilerStep in which ~1.5 ms of work was recorded; no
    low-utilisation advice, a verdict that says the window shows nothing to judge."""
    events = complete_events(trace_file("hta_triton_example"))
    lo, hi = _step(events)
    recorded = sum(max(0.0, min(e["ts"] + e["dur"], hi) - max(e["ts"], lo)) for e in events
                   if e.get("cat") in RECORDED_CATS)
    assert 100 * recorded / (hi - lo) < 2.0
    with tr.open(TRACES / "hta_triton_example") as db:
        result = advise(db, all_findings=True)
    assert "low_gpu_utilization" not in set(result.frame["finding"])
    assert result.verdict.startswith("No finding: the events recorded in the windows")
    assert any("utilisation not judged" in n for n in result.notes)


@pytest.mark.parametrize(("cpu_ms", "judged"), [(0.5, False), (400.0, True)])
def test_low_utilisation_needs_recorded_events(tmp_path, cpu_ms: float, judged: bool) -> None:
    """Two 1 s steps, each with one 1 ms kernel: with 0.5 ms of recorded CPU work the steps record
    almost nothing (under 2%), with 400 ms of operators they do, and low utilisation is judged."""
    b = TraceBuilder()
    for i in range(2):
        t = 1_000_000.0 + i * 1_000_000.0
        b.step(i + 1, t, 1_000_000.0)
        b.cpu_op("aten::to", t + 10.0, cpu_ms * 1000.0)
        b.launch(t + cpu_ms * 1000.0 + 20.0, 10.0, t + cpu_ms * 1000.0 + 40.0, 1000.0)
    with tr.open(b.write(tmp_path / "t.json")) as db:
        result = advise(db, all_findings=True)
    assert ("low_gpu_utilization" in set(result.frame["finding"])) is judged
