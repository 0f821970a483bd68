"""ops on the trace shapes that made its nesting query quadratic (234 s on 1M events):
one busy thread, deep nesting, identical timestamps, no ProfilerStep (or one step around
everything), a long-running parent; and operators that partly overlap on a thread.

Expected values come from how each trace was built (every operator's children are known when it
is written) or, for the overlapping operators, from the definitions applied pair by pair in plain
Python; never from the stack pass under test.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import trace_report as tr
from tests.conftest import invoke
from trace_report.analyses.ops import OpsOptions, ops
from trace_report.analyses.ops import nesting as ops_nesting


@dataclass
class Op:
    """An operator as written: its children and the µs of GPU work its launch calls run."""

    name: str
    ts: float
    dur: float
    children: list[Op] = field(default_factory=list)
    gpu_self: float = 0.0

    def gpu(self) -> float:
        return self.gpu_self + sum(c.gpu() for c in self.children)


class TraceWriter:
    """Kineto events of one CPU thread (pid 1, tid 1) and one stream, with External ids and
    correlations numbered as they are written."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.ext = 0
        self.corr = 0
        self.gpu_ts = 0.0

    def op(self, op: Op, cat: str = "cpu_op") -> int:
        self.ext += 1
        self.events.append({"ph": "X", "cat": cat, "name": op.name, "pid": 1, "tid": 1, "ts": op.ts,
                            "dur": op.dur, "args": {"External id": self.ext}})
        return self.ext

    def launch(self, ts: float, kernel_us: float, ext: int | None) -> None:
        """A cudaLaunchKernel at ``ts`` (carrying External id ``ext``, or none) and its kernel."""
        self.corr += 1
        args = {"correlation": self.corr} | ({} if ext is None else {"External id": ext})
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                            "ts": ts, "dur": 0.25, "args": args})
        self.gpu_ts = max(self.gpu_ts, ts + 1.0)
        self.events.append({"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": self.gpu_ts,
                            "dur": kernel_us, "args": {"correlation": self.corr, "stream": 7, "device": 0}})
        self.gpu_ts += kernel_us

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"traceEvents": self.events}))
        return path


DEPTH = 8
STEP = 2.0
SPAN = 2 * DEPTH * STEP + 4.0


def deep_thread(modules: int) -> tuple[TraceWriter, list[Op]]:
    """One thread: ``aten::outer`` (dur: the whole trace) around one ``ProfilerStep#1`` annotation
    around ``modules`` modules. A module is a chain of DEPTH operators all starting at the same
    timestamp (``aten::level0`` .. ``aten::level7``, each 2 µs shorter than its parent), two
    zero-duration ``aten::empty`` at that timestamp inside the innermost (the second inside the
    first: equal intervals nest in file order), a launch carrying the innermost operator's External
    id, and every other module a launch without External id after ``aten::level2`` ended (it
    belongs to ``aten::level1``, the innermost operator around it)."""
    w = TraceWriter()
    end = 1.0 + modules * (SPAN + 1.0)
    outer = Op("aten::outer", 0.0, end + 1.0)
    step = Op("ProfilerStep#1", 0.5, end)
    outer.children.append(step)
    w.op(outer)
    w.op(step, cat="user_annotation")
    for m in range(modules):
        t = 1.0 + m * (SPAN + 1.0)
        chain = [Op(f"aten::level{k}", t, SPAN - k * STEP) for k in range(DEPTH)]
        ids = [w.op(op) for op in chain]
        first, second = Op("aten::empty", t, 0.0), Op("aten::empty", t, 0.0)
        w.op(first)
        w.op(second)
        first.children.append(second)
        chain[-1].children.append(first)
        for parent, child in zip(chain, chain[1:], strict=False):
            parent.children.append(child)
        step.children.append(chain[0])
        kernel_us = 1.0 + (m % 7) * 0.125
        w.launch(t + 0.5, kernel_us, ids[-1])
        chain[-1].gpu_self += kernel_us
        if m % 2:
            late = t + SPAN - 1.5 * STEP  # inside level0 and level1 only
            w.launch(late, 2.0, None)
            chain[1].gpu_self += 2.0
    return w, [outer]


def expected_by_name(roots: list[Op]) -> dict[str, dict[str, float]]:
    """Per aten:: name: count, self_cpu_us, cpu_us, gpu_self_us, gpu_us, from the built tree."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    todo = list(roots)
    while todo:
        op = todo.pop()
        todo.extend(op.children)
        if not op.name.startswith("aten::"):
            continue
        row = out[op.name]
        row["count"] += 1
        row["self_cpu_us"] += max(op.dur - sum(c.dur for c in op.children), 0.0)
        row["cpu_us"] += op.dur
        row["gpu_self_us"] += op.gpu_self
        row["gpu_us"] += op.gpu()
    return out


def assert_ops_match(db: tr.TraceDB, want: dict[str, dict[str, float]]) -> None:
    got = ops(db, OpsOptions(limit=None)).frame.set_index("name")
    assert sorted(got.index) == sorted(want)
    for name, row in want.items():
        for col, value in row.items():
            assert got.loc[name, col] == pytest.approx(value, rel=1e-9, abs=1e-9), (name, col)


def test_deep_busy_thread_self_and_gpu_times(tmp_path):
    """~30k events on one thread: self CPU, GPU self and GPU-caused time per name as built."""
    writer, roots = deep_thread(2_500)
    want = expected_by_name(roots)
    assert want["aten::level0"]["self_cpu_us"] == pytest.approx(2_500 * STEP)
    assert want["aten::empty"]["self_cpu_us"] == 0
    with tr.open(writer.write(tmp_path / "deep.json")) as db:
        assert_ops_match(db, want)


def random_thread(seed: int, n: int) -> list[dict]:
    """Operators and annotations on two threads with starts and ends on a coarse grid: equal
    intervals, touching and partly overlapping ones, zero durations; launches with and without
    an External id."""
    rng = random.Random(seed)
    events: list[dict] = []
    for i in range(n):
        ts = float(rng.randrange(0, 60))
        dur = float(rng.choice([0, 0, 1, 2, 3, 5, 8, 13, 30]))
        cat = "user_annotation" if i % 9 == 0 else "cpu_op"
        events.append({"ph": "X", "cat": cat, "name": f"aten::op{i}", "pid": 1, "tid": 1 + i % 2, "ts": ts,
                       "dur": dur, "args": {"External id": i + 1}})
    for c in range(n // 2):
        ts = float(rng.randrange(0, 70)) + rng.choice([0.0, 0.5])
        ext = rng.choice([None, rng.randrange(1, n + 1)])
        args = {"correlation": 10_000 + c} | ({} if ext is None else {"External id": ext})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1 + c % 2, "ts": ts, "dur": 0.0, "args": args})
        events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100.0 + c,
                       "dur": 0.25 * (1 + c % 5), "args": {"correlation": 10_000 + c, "stream": 7}})
    rng.shuffle(events)
    return events


def by_definition(events: list[dict]) -> dict[str, dict[str, float]]:
    """Each cpu_op's self, GPU self and GPU-caused µs from the definitions (ops_nesting's module
    docstring), pair by pair: P encloses Q on the same thread when P.ts <= Q.ts and P.end >= Q.end,
    the earlier in the file enclosing its equal; Q's parent is the enclosing row with the latest
    start, then earliest end, then latest in the file; a launch belongs to the operator of its
    External id, else to the innermost operator or annotation around it on its thread."""
    rows = [(i, e) for i, e in enumerate(events) if e["cat"] in ("cpu_op", "user_annotation")]

    def encloses(p: tuple[int, dict], q: tuple[int, dict]) -> bool:
        (i, a), (j, b) = p, q
        a_end, b_end = a["ts"] + a["dur"], b["ts"] + b["dur"]
        return (i != j and a["tid"] == b["tid"] and a["ts"] <= b["ts"] and a_end >= b_end
                and (a["ts"] < b["ts"] or a_end > b_end or i < j))

    def inner_key(p: tuple[int, dict]) -> tuple[float, float, int]:
        return p[1]["ts"], -(p[1]["ts"] + p[1]["dur"]), p[0]

    kernel_us = {e["args"]["correlation"]: e["dur"] for e in events if e["cat"] == "kernel"}
    by_ext = {e["args"]["External id"]: i for i, e in sorted(rows, key=lambda r: -r[0])}
    gpu_self: dict[int, float] = defaultdict(float)
    for e in events:
        if e["cat"] != "cuda_runtime":
            continue
        owner = by_ext.get(e["args"].get("External id"))
        if owner is None:
            around = [r for r in rows if r[1]["tid"] == e["tid"] and r[1]["ts"] <= e["ts"] <= r[1]["ts"] + r[1]["dur"]]
            owner = max(around, key=inner_key)[0] if around else None
        if owner is not None:
            gpu_self[owner] += kernel_us[e["args"]["correlation"]]
    parent = {r[0]: max((p for p in rows if encloses(p, r)), key=inner_key, default=(None,))[0] for r in rows}
    out: dict[str, dict[str, float]] = {}
    for q in rows:
        if q[1]["cat"] != "cpu_op":
            continue
        inside = [r for r in rows if encloses(q, r)]
        children = [r for r in rows if parent[r[0]] == q[0]]
        out[q[1]["name"]] = {"count": 1, "cpu_us": q[1]["dur"],
                             "self_cpu_us": max(q[1]["dur"] - sum(r[1]["dur"] for r in children), 0.0),
                             "gpu_self_us": gpu_self[q[0]],
                             "gpu_us": gpu_self[q[0]] + sum(gpu_self[r[0]] for r in inside)}
    return out


@pytest.mark.parametrize("window_rows", [ops_nesting.WINDOW_ROWS_PER_ROW, 0])
@pytest.mark.parametrize("seed", [1, 2])
def test_overlapping_operators_by_definition(tmp_path, monkeypatch, seed, window_rows):
    """Operators that partly overlap, touch or repeat an interval: every value as the definitions
    give it pair by pair (window_rows 0: the rows partly overlapping ones still enclose are summed
    by the Fenwick tree, not window by window)."""
    monkeypatch.setattr(ops_nesting, "WINDOW_ROWS_PER_ROW", window_rows)
    events = random_thread(seed, 240)
    path = tmp_path / "overlap.json"
    path.write_text(json.dumps({"traceEvents": events}))
    want = by_definition(events)
    assert any(v["gpu_us"] > v["gpu_self_us"] for v in want.values())
    with tr.open(path) as db:
        got = ops(db, OpsOptions(all_ops=True, limit=None)).frame.set_index("name")
    assert sorted(got.index) == sorted(want)
    for name, row in want.items():
        for col, value in row.items():
            assert got.loc[name, col] == pytest.approx(value, rel=1e-12, abs=1e-12), (name, col)


def cli_seconds(*args: object, runs: int = 2) -> float:
    """The shortest wall time of ``runs`` runs of ``trace-report ARGS`` in a fresh interpreter (start-up
    included, as a user sees it)."""
    best = math.inf
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "trace_report.cli.app", *map(str, args)], capture_output=True,
                              text=True, check=False)
        best = min(best, time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
    return best


@pytest.mark.slow
def test_ops_within_3x_breakdown_at_1m_events(tmp_path):
    """On a 1M-event trace of the bad shape (one thread, 800k operators nested 10
    deep under one step), ``ops`` takes at most 3x the time of ``breakdown`` on the same database
    (both timed here as commands), with the values as built."""
    writer, roots = deep_thread(80_000)
    assert len(writer.events) >= 1_000_000
    path = writer.write(tmp_path / "big.json")
    writer.events.clear()
    database = tmp_path / "big.duckdb"
    assert invoke(["ingest", path, "-o", database]).exit_code == 0
    path.unlink()
    breakdown_s = cli_seconds("breakdown", database)
    ops_s = cli_seconds("ops", database)
    assert ops_s <= 3 * breakdown_s, f"ops {ops_s:.1f} s, breakdown {breakdown_s:.1f} s"
    with tr.open(database) as db:
        assert_ops_match(db, expected_by_name(roots))
