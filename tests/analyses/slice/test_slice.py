"""``trace-report slice``: a selection of a trace as a Chrome trace (trace_report/analyses/slice/__init__.py).

Checked against independent values: a real multi-step trace (hta_ns_resolution, ProfilerStep#101-105)
sliced to steps 103-104 and re-ingested gives those steps the breakdown the whole trace gives them,
and the kernels launched in them equal a plain pass over the original JSON; the output is a Chrome
trace with the original metadata and process names, whole flows, and counter tracks whose values
are counted from the JSON by hand. A small synthetic trace pins down the keep rule event by event.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TRACES, invoke

import trace_report as tr
import trace_report.cli.slice  # noqa: F401 - registers the command on the shared app
from trace_report.analyses.slice import SliceOptions, parse_steps, parse_window, slice_trace
from trace_report.analyses.slice.source import read_source
from trace_report.errors import InputError, UsageError
from trace_report.present.slice import write_chrome_trace

NS_TRACE = TRACES / "hta_ns_resolution" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
KEPT = (103, 104)
LAUNCHES = {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"}
KERNELS_PER_STEP = (
    "SELECT k.step, e.name, count(*) AS n, sum(e.dur_us) AS dur_us FROM kernel_steps k "
    "JOIN kernels e USING (trace_id, event_id) WHERE k.step BETWEEN $a AND $b AND NOT k.before_first_step "
    "GROUP BY ALL ORDER BY ALL")
HF_SECRET = "hf_" + "Zq3xW9pLm2Rt7Yb4Kd8Vn1Hs6Jf5Gc0Ae9"


def load_json(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def write_slice(db: tr.TraceDB, out: Path, **options: Any) -> Any:
    result = slice_trace(db, SliceOptions(**options))
    write_chrome_trace(out, result.metadata, result.events)
    return result


# --------------------------------------------------------------------------- a real trace

@pytest.fixture(scope="module")
def ns_slice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path, Any]:
    if not NS_TRACE.is_file():
        pytest.skip("../shared/data is not present")
    full = tr.open(NS_TRACE)
    out = tmp_path_factory.mktemp("slice") / "steps.json.gz"
    result = write_slice(full, out, steps=KEPT)
    return full, tr.open(out), out, result


@pytest.fixture(scope="module")
def ns_json(ns_slice: tuple[Any, Any, Path, Any]) -> dict[str, Any]:
    """The original trace, read with the json module (the independent side of the checks)."""
    return load_json(NS_TRACE)


def test_kept_steps_breakdown_equals_whole_trace(ns_slice: tuple[Any, Any, Path, Any]) -> None:
    full, part, _, result = ns_slice
    assert result.plan.steps == KEPT and not result.notes
    whole = full.breakdown(by_step=True)
    sliced = part.breakdown(by_step=True)
    whole = whole[whole["step"].isin(KEPT)].reset_index(drop=True)
    assert set(sliced["step"].dropna()) == set(KEPT)  # steps 102 and 105 are not in the slice
    sliced = sliced[sliced["step"].isin(KEPT)].reset_index(drop=True)
    assert len(whole) == 12 and whole[["step", "region", "kernels"]].equals(sliced[["step", "region", "kernels"]])
    for column in ("wall_us", "gpu_us", "idle_us", "cpu_us"):
        assert sliced[column].tolist() == pytest.approx(whole[column].tolist(), abs=1e-6), column
    util_full = full.gpu_utilization(by_step=True)
    util_part = part.gpu_utilization(by_step=True)
    for step in KEPT:
        assert (util_part.loc[util_part["step"] == step, "busy_us"].item()
                == pytest.approx(util_full.loc[util_full["step"] == step, "busy_us"].item(), abs=1e-6))


def plain_kernels_per_step(doc: dict[str, Any]) -> dict[tuple[int, str], tuple[int, float]]:
    """Kernels per (step, name) from the JSON alone: a kernel belongs to the ProfilerStep#N whose
    [ts, ts + dur) holds the cudaLaunchKernel with its correlation."""
    events = doc["traceEvents"]
    steps = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and e["name"] in LAUNCHES}
    out: dict[tuple[int, str], list[float]] = defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        ts = launch_ts.get(e["args"].get("correlation"))
        for step, (lo, hi) in steps.items():
            if ts is not None and lo <= ts < hi and step in KEPT:
                out[(step, e["name"])].append(e["dur"])
    return {k: (len(v), sum(v)) for k, v in out.items()}


def test_kept_steps_kernels_equal_whole_trace_and_plain_json(ns_slice: tuple[Any, Any, Path, Any],
                                                             ns_json: dict[str, Any]) -> None:
    full, part, _, _ = ns_slice
    params = {"a": KEPT[0], "b": KEPT[1]}
    sliced = {(s, n): (c, d) for s, n, c, d in part.con.execute(KERNELS_PER_STEP, params).fetchall()}
    whole = {(s, n): (c, d) for s, n, c, d in full.con.execute(KERNELS_PER_STEP, params).fetchall()}
    plain = plain_kernels_per_step(ns_json)
    assert sum(c for c, _ in plain.values()) == 2 * 870  # 299 + 5 + 557 + 9 kernels per step (breakdown)
    assert sliced.keys() == whole.keys() == plain.keys()
    for key, (count, dur) in plain.items():
        assert sliced[key][0] == whole[key][0] == count, key
        assert sliced[key][1] == pytest.approx(dur, abs=1e-6) and whole[key][1] == pytest.approx(dur, abs=1e-6)


def test_slice_is_a_kineto_trace_with_metadata_names_and_whole_flows(ns_slice: tuple[Any, Any, Path, Any],
                                                                     ns_json: dict[str, Any]) -> None:
    _, _, out, result = ns_slice
    original, doc = ns_json, load_json(out)
    for key, value in original.items():
        if key != "traceEvents":
            assert doc[key] == value, key
    assert doc["traceReportSlice"]["steps"] == list(KEPT)
    events = doc["traceEvents"]
    by_ph = Counter(e["ph"] for e in events)
    assert by_ph["M"] == sum(1 for e in original["traceEvents"] if e.get("ph") == "M") == 36
    assert result.counts["rows"] == by_ph["X"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {e["args"]["name"] for e in original["traceEvents"] if e.get("name") == "process_name"}
    complete = [e for e in events if e["ph"] == "X"]
    flows: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    for e in events:
        if e["ph"] in "stf":
            flows[(e["cat"], e["name"], e["id"])][e["ph"]] += 1
    bound = {(e["pid"], e["tid"], e["ts"]) for e in events if e["ph"] in "stf"}
    held = _held(complete, bound)  # every flow event lies in a kept complete event of its thread
    assert held == bound
    assert flows and all(c["s"] >= 1 and c["f"] >= 1 for c in flows.values())
    assert {k[0] for k in flows} == {"ac2g", "fwdbwd"}


def _held(complete: list[dict[str, Any]], points: set[tuple[Any, Any, float]]) -> set[tuple[Any, Any, float]]:
    """The (pid, tid, ts) of ``points`` inside one of the complete events (a sweep per thread)."""
    spans: dict[tuple[Any, Any], list[tuple[float, float]]] = defaultdict(list)
    for x in complete:
        spans[(x["pid"], x["tid"])].append((x["ts"], x["ts"] + x["dur"]))
    out = set()
    for (pid, tid), intervals in spans.items():
        intervals.sort()
        mine = sorted(ts for p, t, ts in points if (p, t) == (pid, tid))
        i, reach = 0, float("-inf")
        for ts in mine:
            while i < len(intervals) and intervals[i][0] <= ts:
                reach = max(reach, intervals[i][1])
                i += 1
            if reach >= ts:
                out.add((pid, tid, ts))
    return out


def test_queue_counter_starts_at_the_level_counted_from_the_json(ns_slice: tuple[Any, Any, Path, Any],
                                                                 ns_json: dict[str, Any]) -> None:
    _, _, out, result = ns_slice
    original = ns_json["traceEvents"]
    t0 = result.plan.t0
    launched = {e["args"]["correlation"]: e["ts"] for e in original
                if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and e["name"] in LAUNCHES}
    level: Counter[int] = Counter()
    for e in original:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            start = launched.get(e["args"].get("correlation"))
            if start is not None:
                level[e["args"]["stream"]] += (start < t0) - (e["ts"] < t0)
    counters = [e for e in load_json(out)["traceEvents"] if e["ph"] == "C" and e["name"].startswith("Queue")]
    first = {}
    for e in counters:
        first.setdefault(e["name"], e)
    assert {name for name in first} == {f"Queue length (stream {s})" for s in level}
    for stream, expected in level.items():
        event = first[f"Queue length (stream {stream})"]
        assert event["ts"] == t0 and event["args"]["launches"] == expected
    assert level[7] > 100  # the GPU runs a step behind: the queue is deep when step 103 starts


def test_memory_counters_are_the_memory_events_view() -> None:
    """A 2021 trace's [memory] events carry only "Bytes": allocated bytes are the running sum since
    the trace began (view memory_events); the counter tracks hold the view's values, starting at the
    level in force when step 7 starts, though the slice computes them over its range alone."""
    path = TRACES / "kineto_rn50_nw4_2021jun" / "worker0.1623212756351.pt.trace.json.gz"
    if not path.is_file():
        pytest.skip("../shared/data is not present")
    db = tr.open(path)
    result = slice_trace(db, SliceOptions(steps=(7, 7), source=False))
    counters = [json.loads(e) for e in result.events if b'"Memory (' in e]
    assert any("no 'Total Allocated'" in n for n in result.notes)
    t0, hi = result.plan.t0, result.plan.hi
    for device in ("cpu", "cuda:0"):
        mine = [(e["ts"], e["args"]["allocated_bytes"]) for e in counters if e["name"] == f"Memory ({device})"]
        view = db.con.execute(
            "SELECT ts_us, allocated_bytes FROM memory_events WHERE device = $d AND ts_us <= $hi "
            "ORDER BY ts_us, event_id", {"d": device, "hi": hi}).fetchall()
        before = [v for v in view if v[0] < t0]
        assert mine[0] == (t0, before[-1][1])
        assert mine[1:] == [v for v in view if v[0] >= t0] and len(mine) > 100 and max(v for _, v in mine) > 1e6


@pytest.mark.slow
def test_fast_scan_equals_whole_decode(ns_slice: tuple[Any, Any, Path, Any]) -> None:
    full, _, _, result = ns_slice
    from trace_report.analyses.slice import _flow_index

    plan = result.plan
    index = _flow_index(full, plan)
    fast = read_source(str(NS_TRACE), plan.sha256, plan.file_bytes, index, plan.t0, plan.hi)
    whole = read_source(str(NS_TRACE), plan.sha256, plan.file_bytes, index, plan.t0, plan.hi, fast=False)
    assert fast.ok and whole.ok and fast.whole_pieces == 0 and whole.whole_pieces > 0
    assert fast.metadata_events == whole.metadata_events
    assert list(fast.flow_events()) == list(whole.flow_events()) and fast.n_flow_events == result.counts["flows"]


# --------------------------------------------------------------------------- a synthetic trace

def synthetic(path: Path, *, secret: bool = True) -> Path:
    """Three ProfilerSteps of 100 µs on pid 10; one launch per step at +10 µs (correlation
    10*step+1) of a kernel on pid 0 / stream 7: step 1's runs in step 1, step 2's at 250 (in step 3's
    time), step 3's at 280-330 (past step 3's end). Flows for each launch; [memory] events at 150 and
    250; an instant at 205; an X event whose args hold a "ph" key."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "ts": 0,
         "args": {"name": f"python --token {HF_SECRET}" if secret else "python"}},
        {"args": {"name": "GPU 0"}, "ph": "M", "name": "process_name", "pid": 0, "tid": 0, "ts": 0},
        {"name": "thread_name", "args": {"name": "main", "parts": [{"a": 1}, {"b": 2}, {"c": 3}]}, "ph": "M",
         "pid": 10, "tid": 10, "ts": 0},  # a cut between the parts leaves its "ph" in the next piece
    ]
    kernel_at = {1: (50, 20), 2: (250, 10), 3: (280, 50)}
    for step in (1, 2, 3):
        start, corr = 100 * (step - 1), 10 * step + 1
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 10, "tid": 10,
                   "ts": start, "dur": 100})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
                   "ts": start + 10, "dur": 5, "args": {"correlation": corr}})
        kts, kdur = kernel_at[step]
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{step}", "pid": 0, "tid": 7, "ts": kts, "dur": kdur,
                   "args": {"correlation": corr, "stream": 7, "device": 0}})
        ev.append({"ph": "s", "id": corr, "pid": 10, "tid": 10, "ts": start + 10, "cat": "ac2g", "name": "ac2g"})
        ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": kts, "cat": "ac2g", "name": "ac2g", "bp": "e"})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::foo", "pid": 10, "tid": 10, "ts": 220, "dur": 5,
               "args": {"ph": "s", "id": 31, "pid": 10, "tid": 10, "ts": 221, "cat": "ac2g", "name": "ac2g"}})
    ev.append({"ph": "i", "s": "g", "name": "Iteration Start", "pid": 10, "tid": 10, "ts": 205})
    for ts, total in ((150, 4096), (250, 8192)):
        ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 10,
                   "ts": ts, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 4096, "Total Allocated": total,
                                      "Total Reserved": 1 << 20}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU"}],
           "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ev, "displayTimeUnit": "ms"}
    path.write_text(json.dumps(doc, indent=1))
    return path


def test_keep_rule_event_by_event(tmp_path: Path) -> None:
    src = synthetic(tmp_path / "trace.json")
    write_slice(tr.open(src), tmp_path / "s.json", steps=(3, 3))
    doc = load_json(tmp_path / "s.json")
    events = doc["traceEvents"]
    kept = {(e["ph"], e.get("name"), e.get("ts")) for e in events if e["ph"] in "Xi"}
    assert kept == {
        ("X", "ProfilerStep#3", 200), ("X", "cudaLaunchKernel", 210), ("X", "k3", 280),  # in the step
        ("X", "k2", 250), ("X", "cudaLaunchKernel", 110),  # runs in the step, and its launch (step 2's)
        ("X", "aten::foo", 220), ("i", "Iteration Start", 205),
        ("i", "[memory]", 250), ("i", "[memory]", 150),  # the last one before the step sets its level
    }
    flows = Counter((e["ph"], e["id"]) for e in events if e["ph"] in "sf")
    assert flows == {("s", 21): 1, ("f", 21): 1, ("s", 31): 1, ("f", 31): 1}
    queue = [(e["ts"], e["args"]["launches"]) for e in events if e["ph"] == "C" and e["name"].startswith("Queue")]
    assert queue == [(200, 1), (210, 2), (250, 1), (280, 0)]  # step 2's kernel still queued at 200
    memory = [(e["ts"], e["args"]) for e in events if e["ph"] == "C" and e["name"] == "Memory (cuda:0)"]
    assert memory == [(200, {"allocated_bytes": 4096, "reserved_bytes": 1 << 20}),
                      (250, {"allocated_bytes": 8192, "reserved_bytes": 1 << 20})]
    assert doc["deviceProperties"] == [{"id": 0, "name": "Test GPU"}] and len(doc["traceEvents"]) == len(events)


def test_secrets_in_reread_events_are_redacted(tmp_path: Path) -> None:
    src = synthetic(tmp_path / "trace.json")
    result = write_slice(tr.open(src), tmp_path / "s.json", steps=(2, 3))
    text = (tmp_path / "s.json").read_text()
    assert HF_SECRET in src.read_text() and HF_SECRET not in text and "<redacted:hf_token>" in text
    assert any("redacted" in n for n in result.notes)


def test_pieces_cut_anywhere_give_the_same_events(tmp_path: Path) -> None:
    """Pieces of every size cut events with nested objects (args) apart, some before their "ph":
    such pieces are joined with the next, as the ingest joins them, or the file is read again
    decoding every piece whole; an X event whose args hold a "ph" key is not an event."""
    src = synthetic(tmp_path / "trace.json", secret=False)
    db = tr.open(src)
    result = slice_trace(db, SliceOptions(steps=(3, 3)))
    from trace_report.analyses.slice import _flow_index

    index = _flow_index(db, result.plan)
    reference = read_source(str(src), None, None, index, 200, 330, fast=False, block=1 << 20)
    assert reference.ok and len(reference.metadata_events) == 3 and len(reference.other_events) == 1
    assert sorted(json.loads(e)["id"] for e in reference.flow_events()) == [21, 21, 31, 31]
    for block in range(24, 1200, 29):
        for fast in (True, False):
            got = read_source(str(src), None, None, index, 200, 330, fast=fast, block=block)
            assert got.ok, (block, fast)
            assert got.metadata_events == reference.metadata_events, (block, fast)
            assert got.other_events == reference.other_events, (block, fast)
            assert list(got.flow_events()) == list(reference.flow_events()), (block, fast)


def test_without_the_file_flows_are_made_from_correlations(tmp_path: Path) -> None:
    src = synthetic(tmp_path / "trace.json", secret=False)
    db = tr.open(src)
    src.write_text(src.read_text().replace('"k1"', '"kX"'))  # same size, other content
    result = write_slice(db, tmp_path / "s.json", steps=(3, 3))
    assert any("SHA-256 differs" in n for n in result.notes)
    events = load_json(tmp_path / "s.json")["traceEvents"]
    assert not [e for e in events if e["ph"] == "M"]
    assert Counter((e["ph"], e["id"], e["cat"]) for e in events if e["ph"] in "sf") == {
        ("s", 21, "ac2g"): 1, ("f", 21, "ac2g"): 1, ("s", 31, "ac2g"): 1, ("f", 31, "ac2g"): 1}
    src.unlink()
    result = write_slice(db, tmp_path / "s.json", steps=(3, 3))
    assert any("no longer there" in n for n in result.notes)


def test_window_and_option_errors(tmp_path: Path) -> None:
    db = tr.open(synthetic(tmp_path / "trace.json", secret=False))
    assert parse_steps("3-4") == (3, 4) and parse_steps("7") == (7, 7)
    assert parse_window("10:20.5") == (10.0, 20.5) and parse_window(":20") == (None, 20.0)
    for bad in ("3-", "a", "4-3"):
        with pytest.raises(UsageError):
            parse_steps(bad)
    for bad in ("", ":", "20:10", "1;2"):
        with pytest.raises(UsageError):
            parse_window(bad)
    with pytest.raises(UsageError, match="choose what to keep"):
        slice_trace(db, SliceOptions())
    with pytest.raises(InputError, match=r"no ProfilerStep#7-8 in the trace \(its steps: 1-3\)"):
        slice_trace(db, SliceOptions(steps=(7, 8)))
    with pytest.raises(InputError, match="holds nothing of the trace"):
        slice_trace(db, SliceOptions(window=(1000.0, None)))
    result = write_slice(db, tmp_path / "w.json", window=(205.0, 215.0))
    names = {e.get("name") for e in load_json(tmp_path / "w.json")["traceEvents"] if e["ph"] == "X"}
    assert names == {"ProfilerStep#3", "cudaLaunchKernel", "k3"} and result.plan.steps == ()


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "s.json.gz"
    out.write_bytes(b"old")

    def events() -> Any:
        yield b'{"ph": "X"}'
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_chrome_trace(out, {"schemaVersion": 1}, events())
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["s.json.gz"]
    assert write_chrome_trace(out, {}, iter([b'{"ph":"i","ts":1}'])) == 1
    assert json.loads(gzip.decompress(out.read_bytes())) == {"traceEvents": [{"ph": "i", "ts": 1}]}


def test_cli(tmp_path: Path) -> None:
    src = synthetic(tmp_path / "rank-0.json", secret=False)
    out = tmp_path / "out" / "step.json.gz"
    out.parent.mkdir()
    done = invoke(["slice", src, "--steps", "2-3", "-o", out])
    assert done.exit_code == 0, done.output
    assert f"wrote {out}" in done.stderr and "steps 2-3" in done.stderr
    assert {e["name"] for e in load_json(out)["traceEvents"] if e.get("name", "").startswith("Profiler")} == {
        "ProfilerStep#2", "ProfilerStep#3"}
    bad = [(["slice", src, "-o", out], 2, "choose what to keep"),
           (["slice", src, "--steps", "9", "-o", out], 1, "no ProfilerStep#9"),
           (["slice", src, "--window", "x", "-o", out], 2, "--window 'x'"),
           (["slice", src, "--steps", "2", "--rank", "4", "-o", out], 2, "no trace of rank 4"),
           (["slice", src, "--steps", "2", "-o", src], 2, "is the input")]
    for args, code, message in bad:
        res = invoke(args)
        assert res.exit_code == code and res.stderr.startswith("Error: ") and message in res.stderr, res.output
        assert "Traceback" not in res.output
    two = tmp_path / "two"
    two.mkdir()
    synthetic(two / "rank-0.json", secret=False)
    doc = load_json(two / "rank-0.json")
    doc["distributedInfo"] = {"rank": 1, "world_size": 2}
    for e in doc["traceEvents"]:
        e["ts"] = e["ts"] + 1  # other content: not skipped as a copy
    (two / "rank-1.json").write_text(json.dumps(doc))
    res = invoke(["slice", two, "--steps", "2", "-o", out])
    assert res.exit_code == 2 and "choose it with --rank" in res.stderr
    assert invoke(["slice", two, "--steps", "2", "--rank", "1", "-o", out]).exit_code == 0
    assert load_json(out)["traceReportSlice"]["rank"] == 1


# --------------------------------------------------------------------------- memory on a big trace

BIG_COPIES = int(os.environ.get("TRACE_REPORT_SLICE_COPIES", "20"))
SLICE_EXTRA_MB = 96
"""What slicing may hold beyond a command that only opens the database: the pieces of the file
read again (8 MB each, a few at a time) and the slice's own rows; measured 35-50 MB at 130-510 MB
traces (docs/analysis.md, slice)."""


def make_big_trace(source: Path, out: Path, copies: int) -> int:
    """``copies`` copies of ``source`` one after the other in time, with correlation and flow ids
    offset and ProfilerStep numbers continued (benchmarks/make_big_trace.py's idea), written as
    plain JSON a copy at a time. Returns the number of ProfilerSteps."""
    doc = load_json(source)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e) - min(ts) + 1000.0
    steps = [int(e["name"].split("#")[1]) for e in events if e.get("ph") == "X"
             and e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")]
    first, n_steps, id_step = min(steps), len(steps), 1 << 24
    with open(out, "w") as fh:
        fh.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        for k in range(copies):
            lines = []
            for e in events:
                if k and e.get("ph") == "M":
                    continue
                e = dict(e, ts=e["ts"] + k * span) if "ts" in e else dict(e)
                if isinstance(e.get("id"), int):
                    e["id"] += k * id_step
                if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                    e["args"] = dict(e["args"], correlation=e["args"]["correlation"] + k * id_step)
                if e.get("name", "").startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(e['name'].split('#')[1]) - first + k * n_steps}"
                lines.append(json.dumps(e))
            fh.write((",\n" if k else "") + ",\n".join(lines))
        fh.write("\n]}\n")
    return copies * n_steps


PEAK_RSS = """
import resource, sys
import trace_report.cli.slice
from trace_report.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
try:  # this program's own high-water mark: getrusage's ru_maxrss keeps the parent's peak across exec
    with open("/proc/self/status") as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
except OSError:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(kb, file=sys.stderr)
sys.exit(code)
"""


def peak_rss_mb(args: list[str]) -> tuple[float, str]:
    """Run ``trace-report ARGS`` in a child process: its peak RSS (MB) and its stderr."""
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], capture_output=True, text=True, cwd=REPO,
                          check=False)
    assert done.returncode == 0, done.stderr
    *lines, peak = done.stderr.strip().splitlines()
    return int(peak) / 1024, "\n".join(lines)


@pytest.mark.slow
def test_big_trace_sliced_to_one_step_within_the_ingest_memory(tmp_path: Path) -> None:
    """A trace of BIG_COPIES copies of hta_ns_resolution (~13 MB each: 0.25 GB at 20) is ingested
    into a database, then sliced to one step from it, the file read again: the slice's peak RSS
    stays below the ingest's, and within SLICE_EXTRA_MB of a command that only opens the database
    (``sql``: the imports and DuckDB), whatever the trace's size."""
    if not NS_TRACE.is_file():
        pytest.skip("../shared/data is not present")
    big = tmp_path / "big.json"
    n_steps = make_big_trace(NS_TRACE, big, BIG_COPIES)
    database = str(tmp_path / "big.duckdb")
    ingest_mb, _ = peak_rss_mb(["ingest", str(big), "-o", database])
    base_mb, _ = peak_rss_mb(["sql", database, "SELECT count(*) FROM traces"])
    step = n_steps // 2
    slice_mb, stderr = peak_rss_mb(["slice", database, "--steps", str(step), "-o", str(tmp_path / "step.json.gz")])
    size_mb = big.stat().st_size / 2**20
    assert f"steps {step}" in stderr and " 36 metadata" in stderr, stderr  # the file was read again
    assert slice_mb < ingest_mb and slice_mb - base_mb < SLICE_EXTRA_MB, (slice_mb, base_mb, ingest_mb, size_mb)
    one = tr.open(tmp_path / "step.json.gz")
    assert one.con.execute("SELECT list(step) FROM steps").fetchone()[0] == [step]
