"""Step breakdown by region (trace_report.analyses.breakdown, `trace-report breakdown`) on real traces.

Expected values come from plain-Python passes over the trace JSON (and MANIFEST.tsv), never from
our own output.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pandas as pd
import pytest
from advise_traces import union
from conftest import (
    GPU_OP_CATS,
    KERNEL_CATS,
    RUNTIME_CATS,
    TRACES,
    complete_events,
    events_of,
    folder_events,
    invoke,
    load_json,
    manifest_by_dir,
    tar_ranks,
    trace_file,
)

import trace_report as tr
from trace_report.analyses.breakdown import REGIONS, BreakdownOptions, breakdown, kernel_regions
from trace_report.errors import InputError

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

KERNEL, RUNTIME, GPU_OPS = KERNEL_CATS, RUNTIME_CATS, GPU_OP_CATS


# ------------------------------------------------------------------ plain-Python trace reading




def corr(e: dict) -> int | None:
    return (e.get("args") or {}).get("correlation")


def steps_of(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                   and e.get("cat") in ("user_annotation", "cpu_op", "Operator")), key=lambda e: e["ts"])


def step_number(e: dict) -> int:
    return int(e["name"].split("#")[1])


def kernels_by_step(events: list[dict]) -> dict[int | None, tuple[int, float]]:
    """(count, summed dur) of kernels per step: by launch time (runtime call, same correlation,
    same pid as the step), else by kernel start; None = outside every step."""
    launches = {}
    for e in events:
        if e.get("cat") in RUNTIME and corr(e) is not None:
            launches.setdefault(corr(e), e)
    steps = steps_of(events)
    out: dict[int | None, list[float]] = defaultdict(lambda: [0, 0.0])
    for k in (e for e in events if e.get("cat") in KERNEL):
        launch = launches.get(corr(k))
        t = launch["ts"] if launch else k["ts"]
        owner = None
        for s in steps:
            if s["ts"] <= t < s["ts"] + s["dur"] and (launch is None or str(launch["pid"]) == str(s["pid"])):
                owner = step_number(s)
        out[owner][0] += 1
        out[owner][1] += k["dur"]
    return {k: (int(v[0]), v[1]) for k, v in out.items()}


def union_length(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of intervals clipped to [lo, hi)."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def a100_by_step(a100):
    return breakdown(a100, BreakdownOptions(by_step=True))


@pytest.fixture(scope="module")
def dlrm_path():
    return TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"


@pytest.fixture(scope="module")
def dlrm(dlrm_path):
    with tr.open(dlrm_path) as db:
        yield db


# ------------------------------------------------------------------ A100 DDP trace

def test_step_kernel_time_adds_up(a100_by_step, a100_events):
    """Within a step the regions' gpu_us add up to the step's kernel time, and kernels too."""
    expected = kernels_by_step(a100_events)
    frame = a100_by_step.frame
    assert set(frame["step"]) == {step_number(s) for s in steps_of(a100_events)}
    for step, g in frame.groupby("step"):
        assert list(g["region"]) == list(REGIONS)
        count, dur = expected[step]
        assert g["kernels"].sum() == count
        assert g["gpu_us"].sum() == pytest.approx(dur, rel=1e-9)
        assert g["gpu_pct"].sum() == pytest.approx(100.0)
    # every kernel of this trace is launched inside a step: the total is MANIFEST's
    facts = manifest_by_dir()["traces/hta_a100_ddp_nccl"]
    assert frame["gpu_us"].sum() == pytest.approx(float(facts["kernel_total_us"]))


def test_regions_partition_the_step(a100_by_step, a100_events):
    durations = {step_number(s): s["dur"] for s in steps_of(a100_events)}
    for step, g in a100_by_step.frame.groupby("step"):
        assert g["wall_us"].sum() == pytest.approx(durations[step], abs=0.01)
        assert g["wall_pct"].sum() == pytest.approx(100.0)


def test_idle_per_step_is_step_minus_gpu_busy(a100_by_step, a100_events):
    busy = [(e["ts"], e["ts"] + e["dur"]) for e in a100_events if e.get("cat") in GPU_OPS]
    for s in steps_of(a100_events):
        g = a100_by_step.frame[a100_by_step.frame["step"] == step_number(s)]
        expected = s["dur"] - union_length(busy, s["ts"], s["ts"] + s["dur"])
        assert g["idle_us"].sum() == pytest.approx(expected, abs=0.05)


def _plain_regions(events: list[dict]) -> dict[tuple[int, str], float]:
    """Kernel time per (step, region) by the rule of docs/analysis.md, written out for this trace: the region
    annotation enclosing the launch on its thread, innermost first, else on any thread by time."""
    def region_of(e: dict) -> str | None:
        name, cat = e["name"], e.get("cat")
        if name.startswith("autograd::engine::evaluate_function: "):
            return "backward"
        if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")) or name == "## optimizer ##":
            return "optimizer_step"
        if name == "## backward ##" or (cat == "cpu_op" and "::" not in name and "Backward" in name):
            return "backward"
        if name == "aten::cross_entropy_loss":
            return "loss"
        if name in ("## forward ##", "DistributedDataParallel.forward"):
            return "forward"
        return None

    marks = [(e["ts"], e["ts"] + e["dur"], str(e["tid"]), region_of(e)) for e in events
             if e.get("cat") in ("user_annotation", "cpu_op") and region_of(e)]
    launches = {corr(e): e for e in events if e.get("cat") in RUNTIME and corr(e) is not None}
    steps = steps_of(events)
    out: dict[tuple[int, str], float] = defaultdict(float)
    for k in (e for e in events if e.get("cat") in KERNEL):
        launch = launches[corr(k)]
        t, tid = launch["ts"], str(launch["tid"])
        step = next(step_number(s) for s in steps if s["ts"] <= t < s["ts"] + s["dur"])
        enclosing = [m for m in marks if m[0] <= t < m[1]]
        same = [m for m in enclosing if m[2] == tid]
        pick = max(same or enclosing, key=lambda m: m[0], default=None)
        out[(step, pick[3] if pick else "other")] += k["dur"]
    return out


def test_kernels_attributed_to_the_region_of_their_launch(a100_by_step, a100_events):
    expected = _plain_regions(a100_events)
    for row in a100_by_step.frame.itertuples(index=False):
        assert row.gpu_us == pytest.approx(expected.get((row.step, row.region), 0.0), abs=1e-6), (row.step, row.region)
    # backward kernels come from the autograd thread, outside the main thread's backward range
    assert a100_by_step.frame.query("region == 'backward'")["gpu_us"].sum() > 0


def test_kernel_regions_basis(a100):
    k = kernel_regions(a100)
    assert len(k) == int(manifest_by_dir()["traces/hta_a100_ddp_nccl"]["kernels"])
    assert set(k["basis"]) == {"launch_thread"}


def test_kernel_regions_of_one_window_are_the_rows_of_that_window(a100):
    """The timeline asks for one step's kernels: the same rows as the whole trace's, each window
    attributed from its own regions (the A100 DDP trace has a nested step and an overlapping one)."""
    whole = kernel_regions(a100)
    windows = whole[["trace_id", "window_id"]].dropna().drop_duplicates()
    assert len(windows) > 2
    for t, w in windows.itertuples(index=False):
        mine = whole[(whole["trace_id"] == t) & (whole["window_id"] == w)].reset_index(drop=True)
        got = kernel_regions(a100, window=(int(t), int(w))).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, mine)


# ------------------------------------------------------------------ old and odd traces

def test_capitalised_2021_trace_uses_tb_profiler_conventions():
    events = folder_events("kineto_rn50_nw4_2021jun")
    with tr.open(TRACES / "kineto_rn50_nw4_2021jun") as db:
        frame = breakdown(db, BreakdownOptions(by_step=True)).frame
    expected = kernels_by_step(events)
    launches = {corr(e): e for e in events if e.get("cat") in RUNTIME and corr(e) is not None}
    optim = [e for e in events if e["name"].startswith(("Optimizer.step#", "Optimizer.zero_grad#"))]
    for step, g in frame.groupby("step"):
        assert g["gpu_us"].sum() == pytest.approx(expected[step][1])
        # kernels launched inside Optimizer.step#/zero_grad# on the same thread are optimizer_step
        s = next(x for x in steps_of(events) if step_number(x) == step)
        opt_us = sum(k["dur"] for k in events if k.get("cat") in KERNEL and corr(k) in launches
                     and s["ts"] <= launches[corr(k)]["ts"] < s["ts"] + s["dur"]
                     and any(o["ts"] <= launches[corr(k)]["ts"] < o["ts"] + o["dur"]
                             and o["tid"] == launches[corr(k)]["tid"] for o in optim))
        assert g.loc[g["region"] == "optimizer_step", "gpu_us"].sum() == pytest.approx(opt_us)
    by_region = frame.groupby("region")["gpu_us"].sum()
    assert by_region["backward"] > by_region["forward"] > 0
    assert frame.loc[frame["region"] == "data_loading", "wall_us"].sum() > 0


def test_kernels_without_launch_are_still_counted():
    """A kernel whose launch is not in the trace (the GPU queue lagged the CPU when the trace
    began) is counted in its own before_first_step row, never in the first step."""
    events = folder_events("kineto_rn50_nw4_2021feb")
    runtime = {corr(e) for e in events if e.get("cat") in RUNTIME}
    kernels = [e for e in events if e.get("cat") in KERNEL]
    unmatched = [k for k in kernels if corr(k) not in runtime]
    assert unmatched  # the point of this trace
    with tr.open(TRACES / "kineto_rn50_nw4_2021feb") as db:
        result = breakdown(db, BreakdownOptions(by_step=True))
        k = kernel_regions(db)
    expected = kernels_by_step(events)
    inside = sum(dur for step, (_, dur) in expected.items() if step is not None)
    assert result.frame["gpu_us"].sum() == pytest.approx(inside)
    early = result.frame[result.frame["region"] == "before_first_step"]
    assert len(early) == 1 and early["step"].isna().all() and early["wall_us"].iloc[0] == 0
    assert early["kernels"].iloc[0] == len(unmatched)
    assert early["gpu_us"].iloc[0] == pytest.approx(sum(u["dur"] for u in unmatched))
    assert (k["basis"] == "before_first_step").sum() == len(unmatched)
    assert any(f"{len(unmatched)} kernel(s)" in n and "before the first step" in n for n in result.notes)


def test_kernels_queued_before_the_trace_are_not_in_the_first_step(shared):
    """hta_trace_diff/test.json.gz: 546 kernels (56.1 ms) ran in the first ProfilerStep's time but
    were launched before the trace began (no launch call recorded)."""
    path = TRACES / "hta_trace_diff" / "test.json.gz"
    events = complete_events(path)
    runtime = {corr(e) for e in events if e.get("cat") in RUNTIME}
    unmatched = [e for e in events if e.get("cat") in KERNEL and corr(e) not in runtime]
    with tr.open(path) as db:
        frame = breakdown(db, BreakdownOptions(by_step=True)).frame
    early = frame[frame["region"] == "before_first_step"]
    assert early["kernels"].iloc[0] == len(unmatched) == 546
    assert early["gpu_us"].iloc[0] == pytest.approx(sum(u["dur"] for u in unmatched))
    step1 = frame[frame["step"] == 1009]
    launched = {corr(e): e["ts"] for e in events if e.get("cat") in RUNTIME}
    s1 = next(s for s in steps_of(events) if step_number(s) == 1009)
    own = sum(e["dur"] for e in events if e.get("cat") in KERNEL and corr(e) in launched
              and s1["ts"] <= launched[corr(e)] < s1["ts"] + s1["dur"])
    assert step1["gpu_us"].sum() == pytest.approx(own)


def test_nested_steps_take_the_latest_starting_window(tmp_path):
    """A ProfilerStep nested in another (from a quarter to half of it): each kernel belongs to
    the latest-starting step that contains its launch, so those launched in the outer step's
    second half are the outer step's again, though the nested step started later. Such traces
    take view kernel_steps' range join (an ASOF join would find the nested step, ended, and
    give them no step); the real traces, whose steps never overlap, take the ASOF join."""
    doc = load_json(trace_file("hta_a100_ddp_nccl"))
    events = events_of(doc)
    a = steps_of(events)[1]
    inner = {**a, "name": "ProfilerStep#999", "ts": a["ts"] + a["dur"] / 4, "dur": a["dur"] / 4}
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({**doc, "traceEvents": [*events, inner]}))
    expected = kernels_by_step([e for e in [*events, inner] if e.get("ph") == "X"])
    assert expected[999][0] > 0
    with tr.open(path) as db:
        assert db.scalar("SELECT count(*) FROM overlapping_step_traces") == 1
        k = kernel_regions(db)
        # gpu_op_launch_times looks launches up the same way (kernels only: memcpy/memset aside)
        launched = db.con.execute("SELECT step, count(*), sum(gpu_us) FROM gpu_op_launch_times "
                                  "WHERE cat = 'kernel' AND step IS NOT NULL GROUP BY step").fetchall()
    got = k[k["step"].notna()].groupby("step").agg(n=("dur_us", "size"), us=("dur_us", "sum"))
    want = {s: v for s, v in expected.items() if s is not None}
    assert sorted(got.index.astype(int)) == sorted(want)
    for step, (n, us) in want.items():
        assert got.loc[step, "n"] == n and got.loc[step, "us"] == pytest.approx(us)
    assert {s: n for s, n, _ in launched} == {s: n for s, (n, _) in want.items()}


def _covered(spans: list[tuple[float, float]], within: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in union(spans) for c, d in within)


def test_overlapping_steps_count_each_instant_once_in_breakdown(tmp_path):
    """A ProfilerStep nested in step a (from a quarter to half of it) and one
    overlapping a's end (from three quarters of a to the middle of the next step). Summed over
    steps, breakdown's wall time is the union of the step spans and wall - idle the GPU busy time
    inside that union (a plain pass over the JSON), not the steps' durations added up; per step,
    wall and wall - idle are view gpu_utilization's (the same clipped windows); a note says so."""
    doc = load_json(trace_file("hta_a100_ddp_nccl"))
    events = events_of(doc)
    steps = steps_of(events)
    a, nxt = steps[1], steps[2]
    nested = {**a, "name": "ProfilerStep#998", "ts": a["ts"] + a["dur"] / 4, "dur": a["dur"] / 4}
    start = a["ts"] + 3 * a["dur"] / 4
    crossing = {**a, "name": "ProfilerStep#999", "ts": start, "dur": nxt["ts"] + nxt["dur"] / 2 - start}
    path = tmp_path / "overlapping.json"
    path.write_text(json.dumps({**doc, "traceEvents": [*events, nested, crossing]}))
    spans = union([(e["ts"], e["ts"] + e["dur"]) for e in [*steps, nested, crossing]])
    busy = _covered([(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") in GPU_OPS],
                    spans)
    recorded = sum(e["dur"] for e in [*steps, nested, crossing])
    wall = sum(b - a for a, b in spans)
    assert recorded - wall > 0.3 * a["dur"]  # the overlap the old sum counted twice
    with tr.open(path) as db:
        result = breakdown(db, BreakdownOptions())
        per_step = breakdown(db, BreakdownOptions(by_step=True)).frame
        util = db.con.execute("SELECT step, wall_us, busy_us FROM gpu_utilization").df()
    total = result.frame
    assert total["wall_us"].sum() == pytest.approx(wall, rel=1e-9)
    assert (total["wall_us"] - total["idle_us"]).sum() == pytest.approx(busy, rel=1e-9)
    assert any("2 step(s) start before an earlier one ends" in n and "1 lie inside" in n for n in result.notes), \
        result.notes  # the crossing step and the next one
    got = per_step[per_step["step"].notna()].groupby("step")[["wall_us", "idle_us"]].sum()
    assert got.loc[998, "wall_us"] == 0 and got.loc[998, "idle_us"] == 0
    for step, wall_us, busy_us in util.itertuples(index=False):
        assert got.loc[step, "wall_us"] == pytest.approx(wall_us, rel=1e-9), step
        assert got.loc[step, "wall_us"] - got.loc[step, "idle_us"] == pytest.approx(busy_us, rel=1e-9, abs=1e-6)


def test_a_zero_length_step_at_a_step_start_takes_no_kernel(tmp_path):
    """Edge case absent from the real traces, so a four-event trace: a zero-length
    ProfilerStep#1 written before, and starting with, ProfilerStep#2 [10, 20) us; a kernel
    launched at 12 us belongs to step 2 (the only step containing its launch). The ASOF join of
    view kernel_steps found step 1 (same start, lower id), ended, and gave the kernel no step."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 10, "dur": 0},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 1,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 14, "dur": 2,
         "args": {"correlation": 7, "stream": 7, "device": 0}},
    ]
    path = tmp_path / "empty_step.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with tr.open(path) as db:
        k = kernel_regions(db)
        launched = db.con.execute("SELECT step FROM gpu_op_launch_times").fetchall()
    assert k["step"].tolist() == [2] and k["dur_us"].tolist() == [2.0]
    assert launched == [(2,)]  # gpu_op_launch_times looks launches up the same way


def test_trace_without_profiler_step_is_one_window():
    """tracelens_b200_vllm_eager: no ProfilerStep and nothing that repeats as an iteration
    (Optimizer.step#, enumerate(DataLoader)#, a forward range): one window."""
    events = folder_events("tracelens_b200_vllm_eager")
    with tr.open(TRACES / "tracelens_b200_vllm_eager") as db:
        result = breakdown(db, BreakdownOptions(by_step=True))
    frame = result.frame
    assert frame["step"].isna().all() and len(frame) == len(REGIONS)
    total = sum(e["dur"] for e in events if e.get("cat") in KERNEL)
    assert total == pytest.approx(float(manifest_by_dir()["traces/tracelens_b200_vllm_eager"]["kernel_total_us"]))
    assert frame["gpu_us"].sum() == pytest.approx(total)
    assert any("no ProfilerStep" in n for n in result.notes)


def test_cpu_only_trace_gets_cpu_time_per_region():
    events = folder_events("hta_cpu_only")
    (step,) = steps_of(events)
    with tr.open(TRACES / "hta_cpu_only") as db:
        result = breakdown(db)
    frame = result.frame
    assert frame["gpu_us"].isna().all() and frame["idle_us"].isna().all()
    assert frame["wall_us"].sum() == pytest.approx(step["dur"], abs=0.01)
    assert any("CPU-only" in n for n in result.notes)


# ------------------------------------------------------------------ multi-rank

def test_multi_rank_archive_per_rank_and_aggregated(dlrm, dlrm_path):
    ranks = tar_ranks(dlrm_path)
    assert sorted(ranks) == list(range(8))
    per_rank = breakdown(dlrm, BreakdownOptions(by_rank=True)).frame
    for rank, events in ranks.items():
        expected = kernels_by_step(events)
        inside = sum(dur for step, (_, dur) in expected.items() if step is not None)
        g = per_rank[per_rank["rank"] == rank]
        assert g["gpu_us"].sum() == pytest.approx(inside)
        assert g["gpu_pct"].sum() == pytest.approx(100.0)
    total = breakdown(dlrm).frame
    assert "rank" not in total.columns
    assert total["gpu_us"].sum() == pytest.approx(per_rank["gpu_us"].sum())
    assert total.loc[total["region"] == "forward", "steps"].iloc[0] == 8  # one ProfilerStep on each of the 8 ranks
    one = breakdown(dlrm, BreakdownOptions(rank=3, by_step=True)).frame
    assert one["gpu_us"].sum() == pytest.approx(per_rank.loc[per_rank["rank"] == 3, "gpu_us"].sum())
    # the DLRM '## forward ##' / '## backward ##' / '## optimizer ##' labels are regions
    assert {"forward", "backward", "optimizer_step", "data_loading"} <= set(total.query("wall_us > 0")["region"])


def test_unknown_rank_is_an_input_error(dlrm):
    with pytest.raises(InputError, match="rank 42"):
        breakdown(dlrm, BreakdownOptions(rank=42))


# ------------------------------------------------------------------ CLI



def test_cli_breakdown_json(a100_events):
    result = invoke(["breakdown", str(TRACES / "hta_a100_ddp_nccl"), "--by-step", "-f", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {"step", "region", "wall_us", "gpu_us", "gpu_pct", "idle_us"} <= set(rows[0])
    expected = kernels_by_step(a100_events)
    for step in {r["step"] for r in rows}:
        got = sum(r["gpu_us"] for r in rows if r["step"] == step)
        assert math.isclose(got, expected[step][1], rel_tol=1e-9)


def test_cli_breakdown_by_rank_and_bad_rank(dlrm_path):
    ok = invoke(["breakdown", str(dlrm_path), "--by-rank", "-f", "json"])
    assert ok.exit_code == 0
    assert {r["rank"] for r in json.loads(ok.stdout)} == set(range(8))
    bad = invoke(["breakdown", str(dlrm_path), "--rank", "42"])
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: no trace of rank 42")  # a usage error


def test_breakdown_on_an_ingested_database(dlrm, dlrm_path, tmp_path):
    """Views are TEMP views: the same rows from a read-only .duckdb written by `trace-report ingest`."""
    from trace_report.cli.app import main

    db_path = tmp_path / "dlrm.duckdb"
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(dlrm_path), "-o", str(db_path), "--no-progress"])
    assert done.value.code == 0
    with tr.open(db_path) as db:
        from_db = breakdown(db, BreakdownOptions(by_rank=True, by_step=True)).frame
    in_memory = breakdown(dlrm, BreakdownOptions(by_rank=True, by_step=True)).frame
    assert from_db[["rank", "step", "region", "kernels"]].equals(in_memory[["rank", "step", "region", "kernels"]])
    assert from_db["gpu_us"].tolist() == pytest.approx(in_memory["gpu_us"].tolist())
    assert from_db["wall_us"].tolist() == pytest.approx(in_memory["wall_us"].tolist())


def test_kernels_without_a_launch_take_the_gpu_annotation_enclosing_them(tmp_path):
    """In a trace that records no launches (no correlation ids), a kernel goes to the
    ``gpu_user_annotation`` that encloses its start on its GPU process (basis
    ``gpu_annotation``). A real trace with its correlation ids removed and one step re-annotated
    on the GPU side (its own GPU annotations removed): ``## forward ##`` over the first half of
    the step, ``## backward ##`` over the second; expected counts from a plain pass over the
    events."""
    doc = load_json(trace_file("hta_a100_ddp_nccl"))
    events = [e if corr(e) is None else {**e, "args": {k: v for k, v in e["args"].items() if k != "correlation"}}
              for e in events_of(doc) if e.get("cat") != "gpu_user_annotation"]  # only ours below
    step = steps_of(events)[1]
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    mid = s0 + step["dur"] / 2
    pid = next(e["pid"] for e in events if e.get("cat") in KERNEL)
    marks = [{"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": pid, "tid": 999, "ts": a, "dur": b - a}
             for name, a, b in (("## forward ##", s0, mid), ("## backward ##", mid, s1))]
    path = tmp_path / "gpu_marks.json"
    path.write_text(json.dumps({**doc, "traceEvents": events + marks}))
    expected: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in KERNEL and e["pid"] == pid and s0 <= e["ts"] < s1:
            expected["forward" if e["ts"] < mid else "backward"] += 1
    assert expected["forward"] > 0 and expected["backward"] > 0
    with tr.open(path) as db:
        k = kernel_regions(db)
    placed = k[k["basis"] == "gpu_annotation"]
    assert {r: int(n) for r, n in placed.groupby("region").size().items()} == dict(expected)
    assert set(k["basis"]) <= {"gpu_annotation", "kernel_time", "no_launch", "outside_steps"}
