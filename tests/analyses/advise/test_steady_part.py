"""advise on the steady part (analyses/advise/windows.py, view analysis_windows with steady_from):
when one-time work dominates, the findings read from the windows are computed on the windows after
it, and say so; expected values from the builder's spans by plain interval arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest
from advise_traces import TraceBuilder, clip, intervals, union

import trace_report
from trace_report.analyses.advise import advise

MS = 1000.0


def _trace(tmp_path: Path) -> tuple[Path, TraceBuilder, float]:
    """Step 1 (200 ms) holds a 180 ms cudaFree with an idle GPU (context creation); steps 2-6 (20 ms
    each) launch one 5 ms kernel each. Returns the end of the one-time work too."""
    b = TraceBuilder()
    b.step(1, 1_000_000.0, 200 * MS)
    free = b.runtime_call("cudaFree", 1_000_100.0, 180 * MS)
    for i in range(5):
        t = 1_200_000.0 + i * 20 * MS
        b.step(i + 2, t, 20 * MS)
        b.runtime_call("cudaFree", t + 0.1 * MS, 0.005 * MS)  # the name's steady cost
        b.launch(t + 1 * MS, 0.01 * MS, t + 1.01 * MS, 5 * MS)
    return b.write(tmp_path / "steady.json"), b, free.end


def test_window_findings_on_the_steady_part(tmp_path: Path) -> None:
    path, b, one_time_end = _trace(tmp_path)
    steady = [s for s in b.steps if s.ts >= one_time_end]
    assert [s.name for s in steady] == [f"ProfilerStep#{n}" for n in range(2, 7)]
    busy = union(intervals(b.gpu))
    steady_wall = sum(s.dur for s in steady)
    steady_busy = sum(clip(busy, s.ts, s.end) for s in steady)
    all_wall = sum(s.dur for s in b.steps)

    res = advise(trace_report.open(path), all_findings=True)
    rows = res.frame.set_index("finding")
    # the one-time work: a share of every window
    assert rows.loc["startup_in_window", "value"] == pytest.approx(100 * 180 * MS / all_wall)
    assert "computed on the steady part: steps 2-6" in rows.loc["startup_in_window", "evidence"]
    # utilisation: of the steady steps only (over all six it would be under a tenth)
    assert rows.loc["low_gpu_utilization", "value"] == pytest.approx(100 * steady_busy / steady_wall)
    assert rows.loc["low_gpu_utilization", "evidence"].endswith("on the steady part: steps 2-6")
    # the idle time per step: what the steady steps leave idle, divided by their count
    idle = steady_wall - steady_busy
    waits = rows.loc[["cpu_bound", "low_gpu_utilization"], "est_saving_ms_per_step"].sum()
    assert waits == pytest.approx(idle / len(steady) / MS, rel=1e-3)
    assert any("computed on the steady part (steps 2-6" in n for n in res.notes)


def test_a_single_window_has_no_steady_part(tmp_path: Path) -> None:
    """Without ProfilerStep or a repeated label the trace is one window: nothing starts after the
    one-time work, so the figures stay whole-window and the note says they include it."""
    b = TraceBuilder()
    b.runtime_call("cudaFree", 1_000_100.0, 180 * MS)
    for i in range(3):
        t = 1_200_000.0 + i * 20 * MS
        b.runtime_call("cudaFree", t + 0.1 * MS, 0.005 * MS)
        b.launch(t + 1 * MS, 0.01 * MS, t + 1.01 * MS, 5 * MS)
    b.launch(1_000_000.0, 0.01 * MS, 1_000_010.0, 0.01 * MS)  # the GPU span starts before the cudaFree
    res = advise(trace_report.open(b.write(tmp_path / "one.json")), all_findings=True)
    assert "startup_in_window" in set(res.frame["finding"])
    assert not any("steady part:" in e for e in res.frame["evidence"])
    assert any("every other figure here includes it" in n for n in res.notes)
