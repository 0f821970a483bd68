"""top-kernels ranks memcpy and memset with the kernels: ``kind`` says which,
``pct_of_gpu_time`` is of kernels + memcpy + memset so the rows sum to 100, and ``--kernels-only``
hides the memory operations with a note on the GPU time they hold. Checked against plain passes
over the JSON."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import GPU_OP_CATS, KERNEL_CATS, events_of, invoke, load_json, trace_file

import trace_report as tr
from trace_report.analyses.top_kernels import NO_KERNELS_NOTE, TopKernelsOptions, top_kernels

KIND = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
        "gpu_memset": "memset", "Memset": "memset"}
NOTE = re.compile(r"memcpy/memset rows hidden \(--kernels-only\): (\d+) names?, ([\d.]+) (µs|ms|s), "
                  r"([\d.]+)% of GPU time")


def plain_gpu_ops(path: Path) -> list[dict[str, Any]]:
    """The GPU operations (kernels, memcpy, memset) of a trace file, by a plain pass over the JSON."""
    return [e for e in events_of(load_json(path)) if e.get("ph") == "X" and e.get("cat") in GPU_OP_CATS]


def memory_totals(ops: list[dict[str, Any]]) -> dict[str, tuple[str, int, float]]:
    """Per memcpy/memset name: (kind, count, total µs)."""
    per: dict[str, list[Any]] = defaultdict(lambda: ["", 0, 0.0])
    for e in ops:
        if KIND[e["cat"]] != "kernel":
            per[e["name"]][0] = KIND[e["cat"]]
            per[e["name"]][1] += 1
            per[e["name"]][2] += float(e["dur"])
    return {k: (kind, n, t) for k, (kind, n, t) in per.items()}


@pytest.fixture(scope="module", params=["hta_trace_diff", "kineto_rn50_nw4_2021jun"])
def traced(request: pytest.FixtureRequest) -> Any:
    path = trace_file(request.param)  # hta_trace_diff: control.json.gz, ~10-16% memcpy
    with tr.open(path) as db:
        yield path, plain_gpu_ops(path), db


def test_memcpy_rows_match_plain_pass(traced: Any) -> None:
    path, ops, db = traced
    gpu_us = sum(float(e["dur"]) for e in ops)
    memory = memory_totals(ops)
    assert memory and any(kind == "memcpy" for kind, _, _ in memory.values())
    frame = top_kernels(db, TopKernelsOptions(limit=None)).frame
    assert set(frame["kind"]) <= {"kernel", "memcpy", "memset"}
    assert frame["pct_of_gpu_time"].sum() == pytest.approx(100.0)
    assert frame["total_us"].sum() == pytest.approx(gpu_us)
    assert frame["count"].sum() == len(ops)
    rows = frame[frame["kind"] != "kernel"].set_index("name")
    assert set(rows.index) == set(memory)
    for name, (kind, n, t) in memory.items():
        assert rows.loc[name, "kind"] == kind
        assert rows.loc[name, "count"] == n
        assert rows.loc[name, "total_us"] == pytest.approx(t)
        assert rows.loc[name, "pct_of_gpu_time"] == pytest.approx(100.0 * t / gpu_us)
    kernels = frame[frame["kind"] == "kernel"]
    plain_kernels = [float(e["dur"]) for e in ops if e["cat"] in KERNEL_CATS]
    assert kernels["count"].sum() == len(plain_kernels)
    assert kernels["total_us"].sum() == pytest.approx(sum(plain_kernels))
    # ranked together by total time
    assert list(frame["total_us"]) == sorted(frame["total_us"], reverse=True)


def test_limit_ranks_memcpy_with_kernels(traced: Any) -> None:
    _, _, db = traced
    full = top_kernels(db, TopKernelsOptions(limit=None)).frame
    top = top_kernels(db, TopKernelsOptions(limit=15)).frame
    assert top.to_dict(orient="records") == full.head(15).to_dict(orient="records")


def test_kernels_only_hides_memory_rows_with_a_note(traced: Any) -> None:
    _, ops, db = traced
    gpu_us = sum(float(e["dur"]) for e in ops)
    memory = memory_totals(ops)
    full = top_kernels(db, TopKernelsOptions(limit=None)).frame
    result = top_kernels(db, TopKernelsOptions(limit=10, kernels_only=True))
    kernel_rows = full[full["kind"] == "kernel"].head(10).reset_index(drop=True)
    assert result.frame.to_dict(orient="records") == kernel_rows.to_dict(orient="records")
    # the denominator stays all GPU time: the same pct as without --kernels-only
    assert result.frame["pct_of_gpu_time"].tolist() == kernel_rows["pct_of_gpu_time"].tolist()
    hidden_us = sum(t for _, _, t in memory.values())
    m = NOTE.fullmatch(result.note or "")
    assert m, result.note
    assert int(m[1]) == len(memory)
    scale = {"µs": 1.0, "ms": 1e3, "s": 1e6}[m[3]]
    assert float(m[2]) * scale == pytest.approx(hidden_us, rel=0.01)
    assert m[4] == f"{100.0 * hidden_us / gpu_us:.1f}"
    everything = top_kernels(db, TopKernelsOptions(limit=None, kernels_only=True)).frame
    assert everything["pct_of_gpu_time"].sum() == pytest.approx(100.0 * (gpu_us - hidden_us) / gpu_us)


def test_kernels_only_with_steps_only_keeps_both_notes() -> None:
    path = trace_file("hta_trace_diff")
    with tr.open(path) as db:
        both = top_kernels(db, TopKernelsOptions(limit=None, steps_only=True, kernels_only=True))
        steps = top_kernels(db, TopKernelsOptions(limit=None, steps_only=True)).frame
    assert both.note and both.note.startswith("steps only") and "memcpy/memset rows hidden" in both.note
    kernels = steps[steps["kind"] == "kernel"].reset_index(drop=True)
    assert both.frame.to_dict(orient="records") == kernels.to_dict(orient="records")


def _write(path: Path, events: list[dict[str, Any]], rank: int | None = None) -> Path:
    doc: dict[str, Any] = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    path.write_text(json.dumps(doc))
    return path


def _op(cat: str, name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur}


def test_by_rank_limit_counts_kernels_only(tmp_path: Path) -> None:
    """--by-rank with --kernels-only: the limit is per rank and counts kernel rows; each rank's
    pct is of its own GPU time."""
    folder = tmp_path / "run"
    folder.mkdir()
    for rank in (0, 1):
        events = [_op("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 800 + rank),
                  _op("kernel", "k_big", 1000, 60), _op("kernel", "k_mid", 1100, 30),
                  _op("kernel", "k_small", 1200, 10 + rank), _op("gpu_memset", "Memset (Device)", 1300, 100)]
        _write(folder / f"rank{rank}.json", events, rank)
    with tr.open(folder) as db:
        rows = db.top_kernels(limit=2, by_rank=True, kernels_only=True)
        note = db.top_kernels_result(limit=2, by_rank=True, kernels_only=True).note
        every = db.top_kernels(limit=None, by_rank=True)
    assert rows[["rank", "name"]].values.tolist() == [[0, "k_big"], [0, "k_mid"], [1, "k_big"], [1, "k_mid"]]
    assert rows["pct_of_gpu_time"].tolist() == pytest.approx([100 * 60 / 1000, 100 * 30 / 1000,
                                                              100 * 60 / 1002, 100 * 30 / 1002])
    assert every.groupby("rank")["pct_of_gpu_time"].sum().tolist() == pytest.approx([100.0, 100.0])
    assert every["kind"].tolist()[:2] == ["memcpy", "memset"]
    hidden = 800 + 801 + 200
    assert note == f"memcpy/memset rows hidden (--kernels-only): 2 names, {hidden / 1e3:.1f} ms, " \
                   f"{100 * hidden / 2002:.1f}% of GPU time"


def test_memcpy_only_trace_is_not_cpu_only(tmp_path: Path) -> None:
    """A trace with memcpy but no kernel shows its memcpy rows (no CPU fallback); with
    --kernels-only, no rows and the note."""
    path = _write(tmp_path / "memcpy.json", [
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 0, "tid": 1, "ts": 0, "dur": 900},
        _op("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 10, 700),
        _op("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 800, 50)])
    with tr.open(path) as db:
        default = db.top_kernels_result(limit=None)
        only = db.top_kernels_result(limit=None, kernels_only=True)
    assert default.note is None
    assert default.frame[["name", "kind"]].values.tolist() == [
        ["Memcpy HtoD (Pageable -> Device)", "memcpy"], ["Memcpy DtoH (Device -> Pageable)", "memcpy"]]
    assert default.frame["pct_of_gpu_time"].tolist() == pytest.approx([100 * 700 / 750, 100 * 50 / 750])
    assert len(only.frame) == 0
    assert list(only.frame.columns) == ["name", "count", "total_us", "mean_us", "min_us", "max_us",
                                        "pct_of_gpu_time", "kind"]
    assert only.note == ("memcpy/memset rows hidden (--kernels-only): 2 names, 750 µs, 100.0% of GPU time; "
                         "the selection has no GPU kernel, only memcpy/memset")


def test_cpu_only_trace_falls_back_with_kernels_only(tmp_path: Path) -> None:
    path = _write(tmp_path / "cpu.json", [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": 1, "ts": 0, "dur": 40}])
    with tr.open(path) as db:
        result = db.top_kernels_result(kernels_only=True)
    assert result.note == NO_KERNELS_NOTE
    assert result.frame["kind"].tolist() == ["cpu_op"]


def test_report_headline_names_the_top_gpu_operation_by_kind(tmp_path: Path) -> None:
    """The issue's case: GPU time mostly a pageable memcpy; the headline card names it."""
    from trace_report.present.report import ReportOptions, headline_section

    path = _write(tmp_path / "pageable.json", [
        _op("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 840), _op("kernel", "small_kernel", 900, 40),
        _op("kernel", "other_kernel", 950, 120)])
    with tr.open(path) as db:
        sec = headline_section(db, db.con, ReportOptions())
    assert sec is not None
    assert "top GPU operation (memcpy)" in sec.body and "84.0% of GPU time" in sec.body
    assert "top kernel" not in sec.body


def test_cli_kernels_only(shared: Path) -> None:
    path = trace_file("hta_trace_diff")
    ops = plain_gpu_ops(path)
    gpu_us = sum(float(e["dur"]) for e in ops)
    memory = memory_totals(ops)
    hidden_us = sum(t for _, _, t in memory.values())
    default = invoke(["top-kernels", path, "-n", "1000", "-f", "json"])
    assert default.exit_code == 0 and "memcpy/memset rows hidden" not in default.stderr
    rows = json.loads(default.stdout)
    assert {r["name"]: r["kind"] for r in rows if r["kind"] != "kernel"} == {k: v[0] for k, v in memory.items()}
    assert sum(r["pct_of_gpu_time"] for r in rows) == pytest.approx(100.0)
    result = invoke(["top-kernels", path, "--kernels-only", "-n", "5", "-f", "json"])
    assert result.exit_code == 0, result.output
    kept = json.loads(result.stdout)
    assert kept == [r for r in rows if r["kind"] == "kernel"][:5]
    assert (f"note: memcpy/memset rows hidden (--kernels-only): {len(memory)} names, {hidden_us / 1e3:.1f} ms, "
            f"{100 * hidden_us / gpu_us:.1f}% of GPU time") in result.stderr
