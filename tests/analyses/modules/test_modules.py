"""Per-module attribution (``trace-report modules``) against a plain-Python pass over the trace
JSON: the nn.Module intervals of each thread nested with a stack (TraceLens' way), the GPU
operations matched to their launch call by correlation id and given to every module whose
interval holds the call on its thread, and the FLOP of a Linear from its addmm/mm shapes."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from advise_traces import TraceBuilder
from conftest import GPU_OP_CATS, RUNTIME_CATS, TRACES, complete_events, invoke, trace_file

import trace_report as tr
from trace_report.analyses.modules import ModuleOptions, modules
from trace_report.analyses.modules.tree import module_calls
from trace_report.errors import UsageError

needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

BERT = "tracelens_h100_bert_small"  # 84 nn.Module events, one ProfilerStep, record_shapes
TOL_US = 1e-6


def reference(path: Path) -> dict[str, dict[str, Any]]:
    """Per module path: calls, depth, cpu_us, gpu_ops, gpu_us, from the trace JSON alone."""
    events = complete_events(path)
    mods = sorted((e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module:")),
                  key=lambda e: (e["ts"], -e["dur"]))
    paths: dict[int, str] = {}
    stacks: dict[tuple, list[dict]] = defaultdict(list)
    for m in mods:  # a stack per thread: pop what ended before m starts; the top then holds m
        stack = stacks[(m["pid"], m["tid"])]
        while stack and stack[-1]["ts"] + stack[-1]["dur"] < m["ts"] + m["dur"]:
            stack.pop()
        name = m["name"].split(":", 1)[1].strip()
        paths[id(m)] = f"{paths[id(stack[-1])]}.{name}" if stack else name
        stack.append(m)
    gpu = {e["args"]["correlation"]: e for e in events
           if e.get("cat") in GPU_OP_CATS and "correlation" in e.get("args", {})}
    launches = [(e, gpu[e["args"]["correlation"]]) for e in events
                if e.get("cat") in RUNTIME_CATS and e.get("args", {}).get("correlation") in gpu]
    out: dict[str, dict[str, Any]] = {}
    for m in mods:
        row = out.setdefault(paths[id(m)], {"calls": 0, "cpu_us": 0.0, "gpu_ops": 0, "gpu_us": 0.0,
                                            "depth": paths[id(m)].count(".") + 1})
        row["calls"] += 1
        row["cpu_us"] += m["dur"]
        for call, op in launches:
            if (call["pid"], call["tid"]) == (m["pid"], m["tid"]) and m["ts"] <= call["ts"] < m["ts"] + m["dur"]:
                row["gpu_ops"] += 1
                row["gpu_us"] += op["dur"]
    return out


@pytest.fixture(scope="module")
def bert() -> tuple[Path, Any]:
    path = trace_file(BERT)
    db = tr.open(path)
    yield path, db
    db.close()


@needs_shared
def test_tree_cpu_and_gpu_equal_a_plain_pass(bert: tuple[Path, Any]) -> None:
    path, db = bert
    expected = reference(path)
    result = modules(db)
    got = result.frame.set_index("path")
    assert len(expected) == 84 and set(got.index) == set(expected)
    assert (got["kind"] == "module").all()
    for name, row in expected.items():
        assert got.loc[name, "calls"] == row["calls"], name
        assert got.loc[name, "depth"] == row["depth"], name
        assert got.loc[name, "gpu_ops"] == row["gpu_ops"], name
        assert got.loc[name, "cpu_us"] == pytest.approx(row["cpu_us"], abs=TOL_US), name
        assert got.loc[name, "gpu_us"] == pytest.approx(row["gpu_us"], abs=TOL_US), name
    root = got.loc["BertLMHeadModel_0"]
    assert root["gpu_ops"] > 0 and root["steps"] == 1
    assert result.frame["path"].iloc[0] == "BertLMHeadModel_0"  # tree order: the root first


@needs_shared
def test_linear_flop_from_its_matmul_shapes(bert: tuple[Path, Any]) -> None:
    path, db = bert
    events = complete_events(path)
    frame = modules(db).frame.set_index("path")
    linears = [p for p in frame.index if p.rsplit(".", 1)[-1].startswith("Linear_")]
    assert linears
    for p in linears:
        name = f"nn.Module: {p.rsplit('.', 1)[-1]}"
        mod = next(e for e in events if e.get("cat") == "python_function" and e["name"] == name)
        mms = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in ("aten::addmm", "aten::mm")
               and e["tid"] == mod["tid"] and mod["ts"] <= e["ts"] < mod["ts"] + mod["dur"]]
        flop = 0.0
        for e in mms:
            dims = e["args"]["Input Dims"]
            a, b = (dims[1], dims[2]) if e["name"] == "aten::addmm" else (dims[0], dims[1])
            flop += 2.0 * a[0] * a[1] * b[1]
        assert mms and frame.loc[p, "flop"] == pytest.approx(flop), p


@needs_shared
def test_depth_keeps_the_top_of_the_tree(bert: tuple[Path, Any]) -> None:
    _, db = bert
    full = modules(db).frame
    top = modules(db, ModuleOptions(depth=2)).frame
    assert set(top["path"]) == set(full.loc[full["depth"] <= 2, "path"]) and top["depth"].max() == 2
    by_step = modules(db, ModuleOptions(by_step=True)).frame
    assert set(by_step["step"]) == {6} and "steps" not in by_step


@needs_shared
def test_no_module_events_give_a_note_and_no_rows() -> None:
    db = tr.open(trace_file("hta_cpu_only"))
    try:
        result = modules(db)
    finally:
        db.close()
    assert result.frame.empty and list(result.frame.columns)[:3] == ["rank", "module", "depth"]
    assert any("torch.profiler.profile(with_stack=True)" in n for n in result.notes)


@needs_shared
def test_cli_depth_json_and_errors(bert: tuple[Path, Any]) -> None:
    path, db = bert
    res = invoke(["modules", path, "--depth", "1", "-f", "json"])
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["path"] for r in rows] == ["BertLMHeadModel_0"]
    bad = invoke(["modules", path, "--rank", "3"])
    assert bad.exit_code == 2 and bad.stderr.strip().splitlines()[-1].startswith("Error: no trace of rank 3")
    with pytest.raises(UsageError, match="depth must be 1 or more"):
        modules(db, ModuleOptions(depth=0))


@needs_shared
def test_conv_flop_counted_once_through_nested_convolutions() -> None:
    """ViT's patch embedding: aten::conv2d > aten::convolution > aten::_convolution, two of them
    with a FLOP estimate; the module counts the outer one only (2 N K C kh kw H' W')."""
    path = trace_file("tracelens_h100_falconsai_vit")
    conv = next(e for e in complete_events(path) if e.get("cat") == "cpu_op" and e["name"] == "aten::convolution")
    (n, c, h, w), (k, _, kh, kw) = conv["args"]["Input Dims"][:2]
    stride = json.loads(conv["args"]["Concrete Inputs"][3])
    out_h, out_w = (h - kh) // stride[0] + 1, (w - kw) // stride[1] + 1  # padding 0, dilation 1 here
    db = tr.open(path)
    try:
        frame = modules(db).frame.set_index("path")
    finally:
        db.close()
    row = frame.loc["ViTModel_0.ViTEmbeddings_0.ViTPatchEmbeddings_0.Conv2d_0"]
    assert row["flop"] == pytest.approx(2.0 * n * k * c * kh * kw * out_h * out_w)


def test_step_of_a_mark_is_the_highest_step_holding_its_start(tmp_path: Path) -> None:
    """Overlapping and nested ProfilerSteps: a mark's step is the highest-numbered step whose
    [start, end) holds the mark's start, none outside every step (plain Python below)."""
    b = TraceBuilder()
    steps = [(1, 0.0, 1000.0), (2, 900.0, 1100.0), (3, 1200.0, 100.0), (4, 3000.0, 500.0)]
    for n, ts, dur in steps:
        b.step(n, ts, dur)
    starts = [100.0, 950.0, 1000.0, 1250.0, 1500.0, 2500.0, 3000.0, 3499.0, 3500.0, 5.0]
    for i, ts in enumerate(starts):
        b._cpu(f"## mark {i} ##", "user_annotation", ts, 1.0, {})
    b.launch(0.0, 5.0, 10.0, 5.0)
    with tr.open(b.write(tmp_path / "steps.json")) as db:
        calls = module_calls(db.con, None).to_pandas()
    got = dict(zip(calls["name"], calls["step"], strict=True))
    for i, ts in enumerate(starts):
        holding = [n for n, a, d in steps if a <= ts < a + d]
        expected = max(holding) if holding else None
        assert (None if pd.isna(got[f"## mark {i} ##"]) else int(got[f"## mark {i} ##"])) == expected, ts


@needs_shared
def test_by_class_sums_every_instance_of_a_class(bert: tuple[Path, Any]) -> None:
    """One row per nn.Module class: the calls, CPU and GPU time of LayerNorm_0 .. LayerNorm_9 (and
    of every other class) summed from the plain pass, wherever the instances are in the tree."""
    import re

    path, db = bert
    expected: dict[str, dict[str, float]] = {}
    for p, row in reference(path).items():
        cls = re.sub(r"_[0-9]+$", "", p.rsplit(".", 1)[-1])
        acc = expected.setdefault(cls, {"calls": 0, "cpu_us": 0.0, "gpu_ops": 0, "gpu_us": 0.0})
        for k in acc:
            acc[k] += row[k]
    got = modules(db, ModuleOptions(by_class=True)).frame.set_index("module")
    assert set(got.index) == set(expected) and expected["LayerNorm"]["calls"] > 1
    for cls, row in expected.items():
        assert got.loc[cls, "calls"] == row["calls"], cls
        assert got.loc[cls, "gpu_ops"] == row["gpu_ops"], cls
        assert got.loc[cls, "cpu_us"] == pytest.approx(row["cpu_us"], abs=TOL_US), cls
        assert got.loc[cls, "gpu_us"] == pytest.approx(row["gpu_us"], abs=TOL_US), cls
    assert list(got["gpu_us"]) == sorted(got["gpu_us"], reverse=True)  # most GPU time first
