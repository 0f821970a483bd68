"""Hostile numbers: ranges and windows checked on their bounds before anything is allocated,
ProfilerStep numbers that are no step number, time stamps beyond a double, events without a time.
Each is one ``Error:`` line or one counted warning, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, complete_events, invoke, shared_or_skip, trace_file

import trace_report as tr

KERNEL = '{"ph":"X","cat":"kernel","name":"k%d","pid":0,"tid":7,"ts":%s,"dur":%s,"args":{"correlation":%d,"stream":7}}'


def stepped_trace(path: Path, extra_step: str | None = None) -> Path:
    """Three ProfilerSteps, each an operator, its launch and its kernel; ``extra_step``: one more
    step event of that name after them."""
    events = []
    for s in range(3):
        t = 1000.0 * s
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 0, "tid": 1, "ts": t,
             "dur": 900.0, "args": {}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": 1, "ts": t + 10, "dur": 100.0,
             "args": {"External id": s}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 1, "ts": t + 20,
             "dur": 10.0, "args": {"correlation": s + 1}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 40, "dur": 200.0,
             "args": {"correlation": s + 1, "stream": 7}},
        ]
    if extra_step is not None:
        events.append({"ph": "X", "cat": "user_annotation", "name": extra_step, "pid": 0, "tid": 1, "ts": 3500.0,
                       "dur": 50.0, "args": {}})
    path.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    return path


def one_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in stderr, stderr
    return lines[0]


# ------------------------------------------------------------------ slice ranges and windows


def test_huge_step_range_is_worked_from_its_bounds(tmp_path: Path) -> None:
    """A billion-step range: in a child process limited to 2 GB of address space (a set of the
    range would need ~60 GB), the slice is written with a note naming the missing range."""
    trace, out = stepped_trace(tmp_path / "t.json"), tmp_path / "s.json"
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
            "from trace_report.cli.app import main; main(sys.argv[1:])")
    run = subprocess.run([sys.executable, "-c", code, "slice", str(trace), "--steps", "1-999999999", "-o", str(out)],
                         capture_output=True, text=True, cwd=REPO, timeout=300,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert "the trace has no ProfilerStep#4-999999999: the slice holds steps 1-3" in run.stderr
    names = [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert sorted(n for n in names if n.startswith("ProfilerStep#")) == ["ProfilerStep#1", "ProfilerStep#2",
                                                                          "ProfilerStep#3"]


def test_gaps_inside_a_range(tmp_path: Path) -> None:
    from trace_report.analyses.slice import _gaps

    assert _gaps((1, 9), (3, 4)) == "1-2, 5-9"
    assert _gaps((3, 4), (3, 4)) == ""
    assert _gaps((0, 2**31 - 1), (0, 5)) == f"1-4, 6-{2**31 - 1}"


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--steps", "0-99999999999999999999", "ProfilerStep numbers are 0 to 2147483647"),
    ("--steps", "9" * 5000, "ProfilerStep numbers are 0 to 2147483647"),
    ("--window", "1e400:", "a bound is too large"),
    ("--window", ":-1e999", "a bound is too large"),
])
def test_impossible_bounds_are_one_usage_error(tmp_path: Path, option: str, value: str, words: str) -> None:
    result = invoke(["slice", stepped_trace(tmp_path / "t.json"), option, value, "-o", tmp_path / "s.json"])
    assert result.exit_code == 2
    line = one_error(result.stderr)
    assert words in line and len(line) < 200


# ------------------------------------------------------------------ ProfilerStep numbers


@pytest.mark.parametrize("name", ["ProfilerStep#-5", "ProfilerStep#abc", "ProfilerStep#99999999999999999999",
                                  "ProfilerStep#2147483648"])
@pytest.mark.parametrize("command", ["breakdown", "critical-path", "modules", "report", "slice"])
def test_step_numbers_that_are_none_are_skipped(tmp_path: Path, name: str, command: str) -> None:
    trace = stepped_trace(tmp_path / "t.json", name)
    extra = {"report": ["-o", tmp_path / "r.html"], "slice": ["--steps", "1-3", "-o", tmp_path / "s.json"]}
    result = invoke([command, trace, *extra.get(command, [])])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.stderr
    warnings = [ln for ln in result.stderr.splitlines() if "without a step number" in ln]
    assert len(warnings) == 1 and name[:40] in warnings[0]


def test_steps_view_keeps_the_good_steps(tmp_path: Path) -> None:
    with tr.open(stepped_trace(tmp_path / "t.json", "ProfilerStep#-5")) as db:
        assert [r[0] for r in db.sql("select step from steps order by step").fetchall()] == [1, 2, 3]


def test_real_step_numbers_are_all_read() -> None:
    """Every ProfilerStep#N of a real trace is a step (a plain-Python count of the JSON)."""
    shared_or_skip()
    path = trace_file("hta_ns_resolution")
    names = [e["name"] for e in complete_events(path)
             if e.get("cat", "").lower() in ("user_annotation", "cpu_op") and e["name"].startswith("ProfilerStep#")]
    with tr.open(path) as db:
        assert db.scalar("select count(*) from steps") == len(names) > 0


# ------------------------------------------------------------------ time stamps and durations


def _trace(path: Path, bad: str, n: int = 4) -> Path:
    events = [KERNEL % (i, 10 * i, 2, i) for i in range(n)] + [bad]
    path.write_text('{"distributedInfo":{"rank":0},"traceEvents":[' + ",".join(events) + "]}")
    return path


@pytest.mark.parametrize(("bad", "words"), [
    (KERNEL % (9, "1" + "0" * 400, 2, 9), "excluded 1 event(s)"),
    (KERNEL % (9, 50, "1" + "0" * 400, 9), "excluded 1 event(s)"),
    (KERNEL % (9, 50, "null", 9), "dropped 1 complete event(s) with no number in 'ts' or 'dur'"),
    (KERNEL.replace(',"dur":%s', "") % (9, 50, 9), "dropped 1 complete event(s) with no number in 'ts' or 'dur'"),
    (KERNEL % (9, '"soon"', 2, 9), "dropped 1 complete event(s) with no number in 'ts' or 'dur'"),
])
@pytest.mark.parametrize("stored", [False, True])
def test_one_bad_event_is_dropped_not_the_trace(tmp_path: Path, bad: str, words: str, stored: bool) -> None:
    trace = _trace(tmp_path / "t.json", bad)
    target = trace
    if stored:
        target = tmp_path / "t.duckdb"
        result = invoke(["ingest", trace, "-o", target])
        assert result.exit_code == 0 and words in result.stderr, result.output
    result = invoke(["sql", target, "select name from events order by name", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["name", "k0", "k1", "k2", "k3"]
    assert stored or words in result.stderr


# ------------------------------------------------------------------ nn.Module nesting depth


def test_deep_module_nesting_in_linear_memory(tmp_path: Path) -> None:
    """A chain of 20,000 nested nn.Module calls: ``modules`` in a child process under 1.5 GB of
    peak RSS (a path string per call held 200M names; 5,000 deep took 1.3 GB), each depth once,
    paths shown whole to 64 names and cut around ``...(N more)...`` below."""
    n = 20_000
    events = [{"ph": "X", "cat": "python_function", "name": f"nn.Module: Layer_{i}", "pid": 0, "tid": 1,
               "ts": float(i), "dur": float(2 * n - 2 * i), "args": {}} for i in range(n)]
    trace, out = tmp_path / "deep.json", tmp_path / "m.json"
    trace.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over an exec from the forked parent (a pytest
    # worker of gigabytes), while the peak of the new address space starts at zero
    code = ("import sys; from trace_report.cli.app import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
            "    print(hwm.split()[1], e.code, file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code, "modules", str(trace), "-f", "json", "-o", str(out)],
                         capture_output=True, text=True, cwd=REPO, timeout=600,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    peak_kb, code_out = run.stderr.split()[-2:]
    assert code_out in ("0", "None"), run.stderr
    assert int(peak_kb) < 1.5 * 2**20, peak_kb
    rows = json.loads(out.read_text())
    assert [r["depth"] for r in rows] == list(range(1, n + 1))
    names = [f"Layer_{i}" for i in range(n)]
    assert rows[63]["path"] == ".".join(names[:64])
    assert rows[64]["path"] == ".".join(names[:32]) + "...(1 more)..." + ".".join(names[33:65])
    assert rows[-1]["path"] == ".".join(names[:32]) + f"...({n - 64} more)..." + ".".join(names[n - 32:])
    assert rows[-1]["cpu_us"] == 2.0 and rows[0]["calls"] == 1


def test_module_path_ids_keep_equal_texts_apart() -> None:
    """Two chains 70 deep, one after the other, differing in one name that deep paths hide: the
    deepest calls have the same path text and are two paths (ids), as are all below the change."""
    from trace_report.analyses.modules.tree import _paths

    depth = 70
    first = [f"M_{i}" for i in range(depth)]
    second = [*first[:35], "other", *first[36:]]
    ts = np.r_[np.arange(depth), 1000 + np.arange(depth)].astype(np.float64)
    end = np.r_[900 - np.arange(depth), 1900 - np.arange(depth)].astype(np.float64)
    text, path_id, deep = _paths(np.zeros(2 * depth, np.int64), ts, end, first + second)
    assert deep.tolist() == list(range(1, depth + 1)) * 2
    assert text[depth - 1] == text[-1] and "...(6 more)..." in text[-1]
    assert path_id[depth - 1] != path_id[-1]
    assert len(set(path_id.tolist())) == depth + (depth - 35)


@pytest.mark.parametrize(("bad", "words"), [
    (KERNEL % (9, "NaN", 2, 9), "excluded 1 event(s)"),
    (KERNEL % (9, 50, "-Infinity", 9), "excluded 1 event(s)"),
])
def test_nan_literal_drops_the_event_not_the_trace(tmp_path: Path, bad: str, words: str) -> None:
    result = invoke(["sql", _trace(tmp_path / "t.json", bad), "select name from events order by name", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["name", "k0", "k1", "k2", "k3"] and words in result.stderr


def test_lone_surrogate_is_replaced_and_counted(tmp_path: Path) -> None:
    bad = KERNEL.replace('"k%d"', '"bad\\ud800x%d"') % (9, 50, 2, 9)
    result = invoke(["sql", _trace(tmp_path / "t.json", bad), "select name from events order by name", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert [r["name"] for r in json.loads(result.stdout)] == ["bad\ufffdx9", "k0", "k1", "k2", "k3"]
    assert "replaced 1 invalid UTF-8 sequence(s)" in result.stderr


def test_nan_in_the_middle_of_a_big_trace(tmp_path: Path) -> None:
    """Over 300k events (many pieces, read in parallel): one NaN and one lone surrogate in the
    middle cost their event alone (the count from a plain pass over the events written)."""
    n = 300_000
    events = [KERNEL % (i, 10 * i, 2, i) for i in range(n)]
    events[n // 2] = KERNEL % (n // 2, "NaN", 2, n // 2)
    events[n // 3] = KERNEL.replace('"k%d"', '"s\\udc00%d"') % (n // 3, 10 * (n // 3), 2, n // 3)
    path = tmp_path / "big.json"
    path.write_text('{"distributedInfo":{"rank":0},"traceEvents":[' + ",\n".join(events) + "]}")
    result = invoke(["sql", path, "select count(*) AS n, count(*) FILTER (WHERE name LIKE 's%') AS s "
                                  "from events", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["n,s", f"{n - 1},1"]
