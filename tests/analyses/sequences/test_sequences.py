"""Repeated kernel sequences (``trace-report sequences``) against HTA's
get_frequent_cuda_kernel_sequences and against a plain-Python pass over the trace JSON.

Tolerance. hta_step_based_trace_gp100 has whole-µs times, so HTA's sums and ours are sums of the
same integers: equal to 1e-6 µs (only the last bits of a float sum may differ). The plain pass
reads the same JSON numbers as the ingest: equal to 1e-6 µs too.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import TRACES, complete_events, invoke, tar_ranks, trace_file

import trace_report as tr
from trace_report.analyses.sequences import COLUMNS, SequenceOptions, sequence_calls, sequences
from trace_report.errors import UsageError

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

TOL_US = 1e-6
SMALL = "hta_step_based_trace_gp100"  # 5 ProfilerSteps, whole-µs times, forward and backward threads
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
GPU_OPS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
STEP_CATS = {"cpu_op", "user_annotation", "Operator"}
EVERY = {"min_length": 1, "max_length": 10_000, "min_count": 1}


# ------------------------------------------------------------------ the references

def hta_patterns(path: Path, operator: str, min_len: int, out: Path) -> dict[str, tuple[int, float, float]]:
    """HTA's rows (rank 0): pattern (operator|kernel|...) -> (count, GPU µs, CPU µs)."""
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    from trace_report.analyses.hta import hta_trace_files

    logging.getLogger("hta").setLevel(logging.CRITICAL)
    with hta_trace_files([path]) as (tmp, files):
        analysis = TraceAnalysis(trace_files=files, trace_dir=str(tmp))
        df = analysis.get_frequent_cuda_kernel_sequences(operator, str(out), min_pattern_len=min_len, rank=0,
                                                         top_k=5, visualize=False)
    return {r["pattern"]: (r["count"], r["GPU kernel duration (us)"], r["CPU op duration (us)"])
            for _, r in df.iterrows()}


def outermost_per_call(ops: list[dict], calls: list[dict]) -> dict[int, int]:
    """HTA's call stack, swept per thread: events by start (an operator before a call at the same
    time, of two operators starting together the longer first); an operator leaves the stack when
    something starts at or after its end. A call belongs to the bottom of the stack (the outermost
    open operator). ``{index in calls: index in ops}``."""
    timeline: dict[tuple, list[tuple]] = defaultdict(list)
    for i, o in enumerate(ops):
        timeline[(o["pid"], o["tid"])].append((o["ts"], 0, -o["dur"], i))
    for j, c in enumerate(calls):
        timeline[(c["pid"], c["tid"])].append((c["ts"], 1, 0, j))
    owner = {}
    for items in timeline.values():
        stack: list[int] = []
        for ts, kind, _, k in sorted(items):
            while stack and ops[stack[-1]]["ts"] + ops[stack[-1]]["dur"] <= ts:
                stack.pop()
            if kind == 0:
                stack.append(k)
            elif stack:
                owner[k] = stack[0]
    return owner


def plain_sequences(events: list[dict], operator: str | None = None, *, steps_only: bool = True,
                    ) -> dict[tuple[str, ...], list[float]]:
    """The rule read straight from the JSON: each GPU op launched by a runtime call (same
    correlation; the first call) belongs to the outermost operator open on the call's thread when
    the call starts (cpu_op but ProfilerStep#, or with ``operator`` the CPU events whose name
    contains it); in a trace with 2+ ProfilerSteps only calls before the last step starts count.
    Pattern (operator, kernels by GPU start) -> [count, GPU µs, CPU µs]."""
    steps = [e["ts"] for e in events if e["name"].startswith("ProfilerStep#") and e.get("cat") in STEP_CATS]
    cutoff = max(steps) if len(steps) >= 2 and steps_only else math.inf
    if operator is None:
        ops = [e for e in events
               if e.get("cat") in ("cpu_op", "Operator") and not e["name"].startswith("ProfilerStep#")]
    else:
        ops = [e for e in events if e.get("cat") in ("cpu_op", "Operator", "user_annotation", "python_function")
               and operator in e["name"]]
    first_call: dict[object, dict] = {}
    for e in sorted((e for e in events if e.get("cat") in RUNTIME), key=lambda e: e["ts"]):
        first_call.setdefault((e.get("args") or {}).get("correlation"), e)
    launched = [(g, first_call.get((g.get("args") or {}).get("correlation"))) for g in events
                if g.get("cat") in GPU_OPS]
    launched = [(g, c) for g, c in launched if c is not None and c["ts"] < cutoff]
    owner = outermost_per_call(ops, [c for _, c in launched])
    per_op: dict[int, list[dict]] = defaultdict(list)
    for j, (g, _) in enumerate(launched):
        if j in owner:
            per_op[owner[j]].append(g)
    out: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for i, gpu in per_op.items():
        key = (ops[i]["name"], *(g["name"] for g in sorted(gpu, key=lambda g: g["ts"])))
        row = out[key]
        row[0] += 1
        row[1] += sum(g["dur"] for g in gpu)
        row[2] += ops[i]["dur"]
    return dict(out)


def ours(db: tr.TraceDB, **options: object) -> dict[tuple[str, ...], tuple[int, float, float]]:
    """Our rows keyed as the references key theirs (raw kernel names, as in the JSON)."""
    raw = dict(db.con.execute("SELECT name, raw_name FROM kernel_names").fetchall())
    frame = sequences(db, SequenceOptions(**options)).frame  # type: ignore[arg-type]
    return {(r.operator, *(raw.get(k, k) for k in r.kernels)): (r.count, r.total_us, r.cpu_us)
            for r in frame.itertuples()}


def assert_same(mine: dict, theirs: dict) -> None:
    assert sorted(mine) == sorted(theirs)
    for key, (count, gpu_us, cpu_us) in theirs.items():
        assert mine[key][0] == count, key
        assert mine[key][1] == pytest.approx(gpu_us, abs=TOL_US), key
        assert mine[key][2] == pytest.approx(cpu_us, abs=TOL_US), key


def pattern_key(pattern: str) -> tuple[str, ...]:
    return tuple(pattern.split("|"))


# ------------------------------------------------------------------ HTA

def test_equals_hta_on_backward_functions(tmp_path: Path) -> None:
    """Every autograd function of the backward thread is at HTA's shallowest depth: the same rows."""
    path = trace_file(SMALL)
    hta = hta_patterns(path, "autograd::engine", 2, tmp_path)
    with tr.open(path) as db:
        mine = ours(db, operator="autograd::engine", min_length=2, max_length=10_000, min_count=1)
    assert len(hta) >= 2
    assert_same(mine, {pattern_key(p): v for p, v in hta.items()})


@pytest.mark.slow
@pytest.mark.parametrize("min_len", [1, 2])
def test_hta_rows_are_ours_where_hta_keeps_the_operator(min_len: int, tmp_path: Path) -> None:
    """``aten::``: HTA keeps only the matches at the shallowest depth of the rank (the forward
    pass's top-level aten ops), ours every outermost match on its thread. With two or more kernels
    those are aten::linear and aten::mse_loss only: the same rows, and ours add the backward pass's
    aten ops. With one kernel too, a pattern HTA counts at its depth is ours with more calls
    (aten::add_ also runs under AccumulateGrad and the optimizer step, deeper): never fewer."""
    path = trace_file(SMALL)
    hta = {pattern_key(p): v for p, v in hta_patterns(path, "aten::", min_len, tmp_path).items()}
    with tr.open(path) as db:
        mine = ours(db, operator="aten::", min_length=min_len, max_length=10_000, min_count=1)
        backward_tid = db.con.execute(
            "SELECT any_value(tid) FROM cpu_ops WHERE name LIKE 'autograd::engine%'").fetchone()[0]
        backward_ops = {r[0] for r in db.con.execute(
            "SELECT DISTINCT name FROM cpu_ops WHERE tid = ? AND name LIKE 'aten::%'", [backward_tid]).fetchall()}
    assert hta and set(hta) <= set(mine)
    if min_len == 2:
        assert {k[0] for k in hta} == {"aten::linear", "aten::mse_loss"}
        assert_same({k: v for k, v in mine.items() if k in hta}, hta)
        extra = set(mine) - set(hta)
        assert extra and {k[0] for k in extra} <= backward_ops
        return
    for key, (count, gpu_us, cpu_us) in hta.items():
        assert mine[key][0] >= count and mine[key][1] >= gpu_us - TOL_US and mine[key][2] >= cpu_us - TOL_US, key
    add = next(k for k in hta if k[0] == "aten::add_")
    assert mine[add][0] > hta[add][0]


# ------------------------------------------------------------------ plain Python

def test_plain_python_pass_small() -> None:
    path = trace_file(SMALL)
    events = complete_events(path)
    with tr.open(path) as db:
        assert_same(ours(db, **EVERY), plain_sequences(events))
        assert_same(ours(db, **EVERY, steps_only=False), plain_sequences(events, steps_only=False))
        default = ours(db)
    expected = {k: v for k, v in plain_sequences(events).items() if 2 <= len(k) - 1 <= 8 and v[0] >= 2}
    assert_same(default, expected)


@pytest.mark.parametrize("module", ["nn.Module: BertSelfOutput", "nn.Module: LayerNorm", "nn.Module: BertLayer"])
def test_module_instances_group_by_class(module: str) -> None:
    """BERT (with_stack: nn.Module events named <Class>_<n>, one per instance): the calls of
    every instance of a class make one sequence under the class name; the plain pass keyed by
    instance, then merged by class."""
    path = trace_file("tracelens_h100_bert_small")
    merged: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for key, (count, gpu_us, cpu_us) in plain_sequences(complete_events(path), module).items():
        row = merged[(re.sub(r"_[0-9]+$", "", key[0]), *key[1:])]
        row[0], row[1], row[2] = row[0] + count, row[1] + gpu_us, row[2] + cpu_us
    assert max(v[0] for v in merged.values()) > 1  # instances of one class, once each per step
    with tr.open(path) as db:
        assert_same(ours(db, operator=module, **EVERY), dict(merged))
        default = ours(db, operator=module)
    assert_same(default, {k: v for k, v in merged.items() if 2 <= len(k) - 1 <= 8 and v[0] >= 2})
    assert default or module != "nn.Module: BertSelfOutput"  # its 4 instances: 4 calls of one sequence


@pytest.mark.slow
@pytest.mark.parametrize("name", ["param_linear_kineto_2080ti", "hta_a100_ddp_nccl", "kineto_rn50_nw4_2021jun"])
def test_plain_python_pass_larger_traces(name: str) -> None:
    """A 2080 Ti linear model, an A100 DDP ResNet (NCCL launched inside AccumulateGrad) and a 2021
    trace (capitalised categories, ProfilerStep as a cpu_op, memsets inside convolutions)."""
    path = trace_file(name)
    with tr.open(path) as db:
        assert_same(ours(db, **EVERY), plain_sequences(complete_events(path)))


@pytest.mark.slow
def test_plain_python_pass_every_rank_of_an_archive() -> None:
    path = next((TRACES / "param_dlrm_kineto_v100x8").iterdir())
    with tr.open(path) as db:
        for rank, events in tar_ranks(path).items():
            assert_same(ours(db, rank=rank, **EVERY), plain_sequences(events))


# ------------------------------------------------------------------ behaviour

def test_rows_columns_order_and_fusible() -> None:
    with tr.open(trace_file(SMALL)) as db:
        res = sequences(db)
    frame = res.frame
    assert list(frame.columns) == COLUMNS
    assert list(frame["total_us"]) == sorted(frame["total_us"], reverse=True)
    assert (frame["mean_us"] * frame["count"] - frame["total_us"]).abs().max() < TOL_US
    assert frame["length"].between(2, 8).all() and (frame["count"] >= 2).all()
    by_op = {r.operator: r for r in frame.itertuples() if r.operator != "aten::linear"}
    mse = by_op["aten::mse_loss"]  # an elementwise kernel then a mean reduction: fusible
    assert mse.fusible and mse.fusible_kernels == 2
    assert "elementwise_kernel" in mse.kernels[0] and "reduce_kernel" in mse.kernels[1]
    linear = frame[frame["operator"] == "aten::linear"]  # a cuBLAS GEMV then the bias add: not
    assert len(linear) == 2 and not linear["fusible"].any() and (linear["fusible_kernels"] == 1).all()
    assert not by_op["autograd::engine::evaluate_function: MmBackward0"].fusible
    assert any(n.startswith("fusible:") for n in res.notes)


def test_calls_one_row_per_operator_call() -> None:
    with tr.open(trace_file(SMALL)) as db:
        calls = sequence_calls(db)
        total = db.con.execute("SELECT count(*) FROM gpu_op_launches_hta WHERE hta_kept").fetchone()[0]
    assert calls["length"].sum() == total  # every GPU op in the selection, once
    assert calls["op_event_id"].is_unique
    assert (calls["length"] == calls["kernels"].map(len)).all()


def test_nothing_to_group_says_why() -> None:
    """BERT-small on an H100: each top-level operator launched one kernel."""
    with tr.open(trace_file("tracelens_h100_bert_small")) as db:
        res = sequences(db)
        every = sequences(db, SequenceOptions(min_length=1))
        unknown = sequences(db, SequenceOptions(operator="no_such_operator"))
    assert unknown.frame.empty and unknown.notes[0].startswith("no CPU operator whose name contains 'no_such")
    assert res.frame.empty and list(res.frame.columns) == COLUMNS
    assert any("fewer than 2 GPU operations" in n for n in res.notes)
    assert not every.frame.empty and (every.frame["length"] == 1).all()


def test_bad_options_are_usage_errors() -> None:
    with tr.open(trace_file(SMALL)) as db:
        for opts in (SequenceOptions(rank=9), SequenceOptions(operator=" "), SequenceOptions(min_length=0),
                     SequenceOptions(min_length=4, max_length=3), SequenceOptions(min_count=0)):
            with pytest.raises(UsageError):
                sequences(db, opts)


def test_nesting_rules_on_a_built_trace(tmp_path: Path) -> None:
    """HTA's call stack on a hand-made trace: of two ops starting together the longer is the parent,
    a call starting when an op ends is outside it, ProfilerStep# is no operator."""
    def x(name: str, cat: str, ts: float, dur: float, **args: object) -> dict:
        return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": args}

    def launch(corr: int, ts: float, kernel: str, gpu_ts: float) -> list[dict]:
        gpu = x(kernel, "kernel", gpu_ts, 2, correlation=corr, stream=7, device=0)
        return [x("cudaLaunchKernel", "cuda_runtime", ts, 1, correlation=corr), {**gpu, "pid": 0, "tid": 7}]

    events = [x("ProfilerStep#1", "user_annotation", 0, 1000)]
    for i, t0 in enumerate((10, 100)):
        events += [x("outer", "cpu_op", t0, 50), x("inner", "cpu_op", t0, 20)]
        events += launch(10 * i + 1, t0 + 1, "k_a", 500 + t0) + launch(10 * i + 2, t0 + 30, "k_b", 510 + t0)
        events += launch(10 * i + 3, t0 + 50, "k_c", 520 + t0)  # starts as outer ends: outside
    path = tmp_path / "built.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with tr.open(path) as db:
        every = sequences(db, SequenceOptions(min_length=1))
        inner = sequences(db, SequenceOptions(operator="inner", min_length=1))
    assert [(r.operator, r.count, list(r.kernels)) for r in every.frame.itertuples()] == [
        ("outer", 2, ["k_a", "k_b"])]
    assert any(n.startswith("2 GPU operations") for n in every.notes)
    assert [(r.operator, r.count, list(r.kernels)) for r in inner.frame.itertuples()] == [("inner", 2, ["k_a"])]


def test_cli_sequences() -> None:
    path = trace_file(SMALL)
    ok = invoke(["sequences", path, "-f", "json", "--limit", "2"])
    assert ok.exit_code == 0, ok.output
    rows = json.loads(ok.stdout)
    assert len(rows) == 2 and list(rows[0]) == COLUMNS and isinstance(rows[0]["kernels"], list)
    csv_out = invoke(["sequences", path, "-f", "csv", "--operator", "aten::mse_loss"])
    assert csv_out.exit_code == 0, csv_out.output
    line = csv_out.stdout.splitlines()[1]
    assert line.startswith("0,aten::mse_loss,2,5,") and " | void at::native::reduce_kernel<" in line
    table = invoke(["sequences", path])
    assert table.exit_code == 0 and "Kernel sequences" in table.stdout
    markdown = invoke(["sequences", path, "-f", "markdown"]).stdout.splitlines()
    assert markdown[0].startswith("| rank | operator | length | count |")
    assert sum("| aten::mse_loss | 2 | 5 | 30 | 6 |" in line for line in markdown) == 1
    for args in (["--min-length", "3", "--max-length", "2"], ["--rank", "7"], ["--operator", ""]):
        bad = invoke(["sequences", path, *args])
        assert bad.exit_code == 2 and bad.stderr.startswith("Error: "), (args, bad.output)
    assert invoke(["sequences", "--help"]).exit_code == 0
