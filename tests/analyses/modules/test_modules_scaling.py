"""``modules`` on module events that nest, repeat an interval, touch and partly overlap (values from
the definitions in analyses/modules/modules.sql applied pair by pair in plain Python), and on a trace of
the size where its range self-joins were quadratic (20 s for 40k module events on
one thread; the sorted passes of analyses/modules/tree.py)."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest

import trace_report as tr
from tests.analyses.ops.test_ops_scaling import cli_seconds
from tests.conftest import invoke
from trace_report.analyses.modules import ModuleOptions, modules


def random_modules(seed: int, n: int) -> list[dict]:
    """nn.Module events on two threads with starts and ends on a coarse grid (equal intervals,
    touching, partly overlapping, zero durations), launches with kernels, and aten::mm operators
    with shapes (some nested in others) for FLOP."""
    rng = random.Random(seed)
    events: list[dict] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
                           "ts": 0.0, "dur": 50.0, "args": {}},
                          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1,
                           "ts": 50.0, "dur": 60.0, "args": {}}]
    for i in range(n):
        ts, dur = float(rng.randrange(0, 90)), float(rng.choice([0, 1, 2, 3, 5, 8, 13, 30, 60]))
        events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: M{i % 9}_{i % 4}", "pid": 1,
                       "tid": 1 + i % 2, "ts": ts, "dur": dur, "args": {}})
    for c in range(n):
        ts = float(rng.randrange(0, 100)) + rng.choice([0.0, 0.5])
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1 + c % 2,
                       "ts": ts, "dur": 0.25, "args": {"correlation": 1000 + c}})
        events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 200.0 + c,
                       "dur": 0.25 * (1 + c % 5), "args": {"correlation": 1000 + c, "stream": 7, "device": 0}})
    for k in range(n // 2):
        ts, dur = float(rng.randrange(0, 90)), float(rng.choice([0, 1, 4, 9, 20]))
        m = 2 + k % 5
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1 + k % 2, "ts": ts,
                       "dur": dur, "args": {"External id": 5000 + k, "Input Dims": [[m, 3], [3, 4]],
                                            "Input type": ["float", "float"]}})
    rng.shuffle(events)
    return events


def by_definition(events: list[dict]) -> dict[str, dict[str, float]]:
    """Per path: calls, depth, cpu_us, gpu_ops, gpu_us, flop (None: no operator) from the rule of
    modules.sql, pair by pair (enclosing on the same thread: ts <=, end >=, of equal intervals
    the earlier in the file; FLOP of the aten::mm no other aten::mm encloses, 2 M K N)."""
    indexed = list(enumerate(events))

    def encloses(p: tuple[int, dict], q: tuple[int, dict]) -> bool:
        (i, a), (j, b) = p, q
        a_end, b_end = a["ts"] + a["dur"], b["ts"] + b["dur"]
        return (i != j and (a["pid"], a["tid"]) == (b["pid"], b["tid"]) and a["ts"] <= b["ts"] and a_end >= b_end
                and (a["ts"] < b["ts"] or a_end > b_end or i < j))

    mods = [(i, e) for i, e in indexed if e["cat"] == "python_function"]
    mms = [(i, e) for i, e in indexed if e["name"] == "aten::mm"]
    outer_mms = [q for q in mms if not any(encloses(p, q) for p in mms)]
    kernels = {e["args"]["correlation"]: e["dur"] for e in events if e["cat"] == "kernel"}
    calls = [e for e in events if e["cat"] == "cuda_runtime"]
    out: dict[str, dict] = {}
    for q in mods:
        outers = sorted((p for p in mods if encloses(p, q)), key=lambda p: (p[1]["ts"], -p[1]["dur"], p[0]))
        names = [p[1]["name"].split(":", 1)[1].strip() for p in [*outers, q]]
        path = ".".join(names)
        e = q[1]

        def inside(x: dict, e: dict = e) -> bool:
            return (x["pid"], x["tid"]) == (e["pid"], e["tid"]) and e["ts"] <= x["ts"] < e["ts"] + e["dur"]

        row = out.setdefault(path, {"calls": 0, "depth": len(names), "cpu_us": 0.0, "gpu_ops": 0, "gpu_us": 0.0,
                                    "flop": None})
        row["calls"] += 1
        row["cpu_us"] += e["dur"]
        launched = [kernels[c["args"]["correlation"]] for c in calls if inside(c)]
        row["gpu_ops"] += len(launched)
        row["gpu_us"] += sum(launched)
        flops = [2.0 * o["args"]["Input Dims"][0][0] * 3 * 4 for _, o in outer_mms if inside(o)]
        if flops:
            row["flop"] = (row["flop"] or 0.0) + sum(flops)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_partly_overlapping_modules_by_definition(tmp_path, seed):
    events = random_modules(seed, 160)
    path = tmp_path / "mods.json"
    path.write_text(json.dumps({"traceEvents": events}))
    want = by_definition(events)
    assert any(r["depth"] > 2 for r in want.values()) and any(r["flop"] for r in want.values())
    with tr.open(path) as db:
        got = modules(db).frame.set_index("path")
    assert sorted(got.index) == sorted(want)
    for p, row in want.items():
        for col, value in row.items():
            if col == "flop" and value is None:
                assert got.loc[p, "flop"] != got.loc[p, "flop"] or got.loc[p, "flop"] is None, p
            else:
                assert got.loc[p, col] == pytest.approx(value, rel=1e-12, abs=1e-12), (p, col)


def nested_modules_trace(blocks: int) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """One thread, ``blocks`` calls of a module tree four deep (Model_0 > Layer_0 > Block_0 >
    Linear_0, all starting together) each with two kernel launches in the innermost; the expected
    per-path calls and GPU µs as built."""
    events, want = [], defaultdict(lambda: {"calls": 0, "gpu_ops": 0, "gpu_us": 0.0})
    names = ["Model_0", "Layer_0", "Block_0", "Linear_0"]
    corr = 0
    for b in range(blocks):
        t = b * 20.0
        for depth, name in enumerate(names):
            events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: {name}", "pid": 1, "tid": 1,
                           "ts": t, "dur": 16.0 - 2 * depth, "args": {}})
        for k in range(2):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t + 1.0 + k, "dur": 0.5, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": t + 3.0 + k,
                           "dur": 0.5 + k, "args": {"correlation": corr, "stream": 7, "device": 0}})
        for depth in range(len(names)):
            row = want[".".join(names[:depth + 1])]
            row["calls"] += 1
            row["gpu_ops"] += 2
            row["gpu_us"] += 2.0
    return events, dict(want)


@pytest.mark.slow
def test_modules_within_3x_breakdown_on_40k_module_calls(tmp_path):
    """40k module events and 20k launches on one thread (the shape that took the
    range self-joins 20 s); ``modules`` within 3x of ``breakdown`` on the same database (both timed
    as commands), values as built."""
    events, want = nested_modules_trace(10_000)
    path = tmp_path / "mods.json"
    path.write_text(json.dumps({"traceEvents": events}))
    database = tmp_path / "mods.duckdb"
    assert invoke(["ingest", path, "-o", database]).exit_code == 0
    breakdown_s = cli_seconds("breakdown", database)
    modules_s = cli_seconds("modules", database)
    assert modules_s <= 3 * breakdown_s, f"modules {modules_s:.1f} s, breakdown {breakdown_s:.1f} s"
    with tr.open(database) as db:
        got = modules(db, ModuleOptions()).frame.set_index("path")
    assert sorted(got.index) == sorted(want)
    for p, row in want.items():
        for col, value in row.items():
            assert got.loc[p, col] == pytest.approx(value), (p, col)
