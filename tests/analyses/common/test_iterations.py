"""The windows "per step" figures use (view iterations, views_iterations.sql): ProfilerSteps, else
iterations inferred from a repeated label, else the whole trace. Real traces without ProfilerStep
are checked against a plain pass over their JSON; constructed ones cover each rule's edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from advise_traces import BASE_US, DATALOADER, TraceBuilder, clip, union
from conftest import GPU_OP_CATS, TRACES, complete_events, shared_or_skip

import trace_report as tr
from trace_report.analyses.advise import advise
from trace_report.analyses.breakdown import breakdown
from trace_report.analyses.common.iterations import iterations
from trace_report.present.report import ReportOptions, headline_section

MS = 1000.0
CPU_CATS = {"user_annotation", "cpu_op", "Operator"}  # Operator: the 2021 spelling of cpu_op
NO_STEP_OPTIMIZER = ("param_linear_kineto_2080ti", "hta_step_based_trace_gp100", "tracelens_mi300_resnet18_ddp_train",
                     "kineto_rn50_autograd_api_nw0")


def _trace_path(folder: str) -> Path:
    shared_or_skip()
    return sorted(p for p in (TRACES / folder).iterdir() if p.name.endswith((".json", ".json.gz")))[0]


def _optimizer_windows(events: list[dict[str, Any]]) -> tuple[str, list[tuple[float, float]]]:
    """Plain pass: the CPU-side Optimizer.step# calls of the thread with the most, a call inside an
    earlier one left out; window k from the end of call k to the end of call k + 1."""
    assert not any(e["name"].startswith("ProfilerStep#") for e in events if e.get("cat") in CPU_CATS)
    calls: dict[tuple[Any, Any, str], list[tuple[float, float]]] = {}
    for e in events:
        if e.get("cat") in CPU_CATS and e["name"].startswith("Optimizer.step#") and e["name"].endswith(".step"):
            ts = float(e["ts"])
            calls.setdefault((e["pid"], e["tid"], e["name"]), []).append((ts, ts + float(e["dur"])))
    (_, _, name), spans = max(calls.items(), key=lambda kv: sum(b - a for a, b in kv[1]))
    outer: list[tuple[float, float]] = []
    for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
        if not outer or a >= max(e for _, e in outer):
            outer.append((a, b))
    return name, [(outer[k][1], outer[k + 1][1]) for k in range(len(outer) - 1)]


@pytest.mark.parametrize("folder", NO_STEP_OPTIMIZER)
def test_real_traces_without_profilerstep_infer_optimizer_iterations(folder: str) -> None:
    path = _trace_path(folder)
    events = complete_events(path)
    name, expected = _optimizer_windows(events)
    with tr.open(path) as db:
        got = iterations(db.con, [1])
        util = db.con.execute("SELECT basis, sum(wall_us), sum(busy_us), count(*) FROM gpu_utilization "
                              "GROUP BY basis").fetchall()
        steps = db.con.execute("SELECT count(*) FROM step_time").fetchone()[0]
    assert set(got["basis"]) == {f"inferred: {name}"}
    assert list(got["step"]) == list(range(1, len(expected) + 1))
    assert len(expected) >= 2
    assert got["ts_us"].tolist() == pytest.approx([a for a, _ in expected], abs=1e-3)
    assert got["end_us"].tolist() == pytest.approx([b for _, b in expected], abs=1e-3)
    # GPU utilisation over those windows: the union of the GPU operations clipped to each, by hand
    busy = union([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                  if e.get("cat") in GPU_OP_CATS and float(e.get("dur", 0)) > 0])
    wall = sum(b - a for a, b in expected)
    [(basis, wall_us, busy_us, n)] = util
    assert basis == f"inferred: {name}" and n == len(expected) == steps
    assert wall_us == pytest.approx(wall, rel=1e-9)
    assert busy_us == pytest.approx(sum(clip(busy, a, b) for a, b in expected), rel=1e-6)


def test_advise_and_breakdown_on_2080ti_say_per_iteration() -> None:
    path = _trace_path("param_linear_kineto_2080ti")
    name, expected = _optimizer_windows(complete_events(path))
    with tr.open(path) as db:
        res = advise(db, all_findings=True)
        bd = breakdown(db)
        head = headline_section(db, db.con, ReportOptions(), res).body
    assert f"{len(expected)} inferred from {name}" in head and "median iteration" in head
    assert "GPU busy (of iteration time)" in head and "per iteration" in head
    assert len(res.frame) and set(res.frame["per"]) == {"iteration"}
    assert "per iteration" in res.verdict and "per step" not in res.verdict
    assert any(f"{len(expected)} iterations inferred from the repeated {name}" in n for n in res.notes)
    for row in res.frame.itertuples():
        assert "per step" not in row.evidence and "per trace" not in row.evidence
    regions = bd.frame[bd.frame["region"] == "forward"]
    assert int(regions["steps"].iloc[0]) == len(expected)
    assert any(f"{len(expected)} from the repeated {name}" in n for n in bd.notes)


def _loop(b: TraceBuilder, n: int, *, optimizer: bool = True, loader: bool = False, step: bool = False) -> None:
    """``n`` iterations of 10 ms: a DataLoader fetch, a kernel, an optimizer step at the end."""
    for i in range(n):
        t = 1_000_000.0 + i * 10 * MS
        if step:
            b.step(i + 1, t, 10 * MS)
        if loader:
            b.dataloader(t + 0.1 * MS, 1 * MS)
        b.launch(t + 2 * MS, 0.01 * MS, t + 2.1 * MS, 3 * MS)
        if optimizer:
            b._cpu("Optimizer.step#SGD.step", "user_annotation", t + 8 * MS, 1 * MS, {})


def _windows(path: Path) -> list[tuple[str, float, float]]:
    with tr.open(path) as db:
        got = iterations(db.con, [1])
    return [(r.basis, r.ts_us - BASE_US, r.end_us - BASE_US) for r in got.itertuples()]


def test_dataloader_marks_the_start(tmp_path: Path) -> None:
    b = TraceBuilder()
    _loop(b, 4, optimizer=False, loader=True)
    got = _windows(b.write(tmp_path / "t.json"))
    starts = [1_000_000.0 + i * 10 * MS + 0.1 * MS for i in range(4)]
    assert got == [(f"inferred: {DATALOADER}", a, c) for a, c in zip(starts, starts[1:], strict=False)]


def test_optimizer_wins_over_dataloader_and_profilerstep_over_both(tmp_path: Path) -> None:
    b = TraceBuilder()
    _loop(b, 4, loader=True)
    assert {w[0] for w in _windows(b.write(tmp_path / "a.json"))} == {"inferred: Optimizer.step#SGD.step"}
    b = TraceBuilder()
    _loop(b, 4, loader=True, step=True)
    assert {w[0] for w in _windows(b.write(tmp_path / "b.json"))} == {"ProfilerStep"}


def test_two_calls_are_no_loop_and_figures_say_per_trace(tmp_path: Path) -> None:
    b = TraceBuilder()
    _loop(b, 2)
    path = b.write(tmp_path / "t.json")
    got = _windows(path)
    assert [w[0] for w in got] == ["trace"]
    with tr.open(path) as db:
        res = advise(db, all_findings=True)
    assert len(res.frame) and set(res.frame["per"]) == {"trace"}
    assert "per trace" in res.verdict and "per step" not in res.verdict


def test_forward_range_marks_the_start_outermost_only(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(3):
        t = 1_000_000.0 + i * 10 * MS
        b._cpu("## forward ##", "user_annotation", t, 4 * MS, {})
        b._cpu("DistributedDataParallel.forward", "user_annotation", t + 1 * MS, 2 * MS, {})  # inside: not a mark
        b.launch(t + 2 * MS, 0.01 * MS, t + 2.1 * MS, 3 * MS)
    got = _windows(b.write(tmp_path / "t.json"))
    starts = [1_000_000.0 + i * 10 * MS for i in range(3)]
    assert got == [("inferred: ## forward ##", a, c) for a, c in zip(starts, starts[1:], strict=False)]
