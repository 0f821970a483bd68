"""overlap, queue and collectives on real traces, against HTA (same trace, same numbers within the
stated tolerances) and against plain-Python passes over the JSON where HTA has no analysis."""

from __future__ import annotations

import json
import logging
from collections import defaultdict

import pytest

import trace_report as tr
from tests.conftest import TRACES, shared_or_skip, tar_ranks
from trace_report.analyses.collectives import collectives
from trace_report.analyses.overlap import OverlapOptions, overlap
from trace_report.analyses.queue import QueueOptions, queue_length

A100 = "hta_a100_ddp_nccl"
DLRM = "param_dlrm_kineto_v100x8"


@pytest.fixture(scope="module")
def hta_a100():
    """HTA's TraceAnalysis of the A100 DDP trace (HTA reads the shared folder itself)."""
    shared_or_skip()
    hta = pytest.importorskip("hta.trace_analysis")
    logging.disable(logging.WARNING)
    try:
        yield hta.TraceAnalysis(trace_dir=str(TRACES / A100))
    finally:
        logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def dlrm():
    shared_or_skip()
    with tr.open(TRACES / DLRM) as db:
        yield db


def test_overlap_equals_hta(a100, hta_a100):
    """HTA's get_comm_comp_overlap (2 decimals): exact with HTA's rounding, within 0.5 points on the
    trace's own (fractional) times; HTA's published 14.31% on this trace."""
    hta_pct = float(hta_a100.get_comm_comp_overlap(visualize=False).set_index("rank").loc[0, "comp_comm_overlap_pctg"])
    assert hta_pct == pytest.approx(14.31, abs=0.005)
    rounded = overlap(a100, OverlapOptions(hta_rounding=True)).frame.set_index("rank").loc[0]
    assert round(rounded["comp_comm_overlap_pct"], 2) == pytest.approx(hta_pct, abs=0.001)
    exact = overlap(a100).frame.set_index("rank").loc[0]
    assert abs(exact["comp_comm_overlap_pct"] - hta_pct) < 0.5
    assert exact["overlap_us"] <= min(exact["comm_us"], exact["comp_us"])
    everything = overlap(a100, OverlapOptions(steps_only=False)).frame.set_index("rank").loc[0]
    assert everything["comm_us"] > exact["comm_us"]  # the last step's allreduces count too


def test_queue_equals_hta(a100, hta_a100):
    """HTA's queue-length summary and blocked time: max equal, mean within 0.01 launches (HTA's sort
    is unstable on equal time stamps), blocked time within 1 µs (HTA's rounding, threshold 8)."""
    series = hta_a100.get_queue_length_time_series([0])
    summary = hta_a100.get_queue_length_summary_from_time_series(series)["queue_length"].loc[0]
    ours = queue_length(a100, QueueOptions(hta_rounding=True, max_queue_length=8)).frame.set_index("stream")
    assert sorted(ours.index) == sorted(summary.index)
    for stream, row in summary.iterrows():
        assert ours.loc[stream, "max_queue_length"] == row["max"]
        assert ours.loc[stream, "mean_queue_length"] == pytest.approx(row["mean"], abs=0.01)
    blocked = hta_a100.get_time_spent_blocked_on_full_queue(series, max_queue_length=8).set_index("stream")
    for stream, row in blocked.iterrows():
        assert ours.loc[stream, "blocked_us"] == pytest.approx(row["duration_at_max_queue_length"], abs=1.0)
    assert queue_length(a100).frame["blocked_us"].eq(0).all()  # never 1024 launches deep


def _nelems(args: dict) -> int:
    return max(int(args["In msg nelems"]), int(args["Out msg nelems"]))


def test_collectives_a100_against_json(a100, a100_events):
    """Counts, bytes and kernel time per collective and size from the kernels' own args."""
    sizes = {"Float": 4, "Long": 8}
    want: dict[tuple[str, int], list[float]] = defaultdict(list)
    for e in a100_events:
        if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel"):
            a = e["args"]
            want[(a["Collective name"], _nelems(a) * sizes[a["dtype"]])].append(float(e["dur"]))
    frame = collectives(a100).frame
    got = {(r.collective, int(r.bytes)): r for r in frame.itertuples()}
    assert set(got) == set(want)
    for key, durs in want.items():
        row = got[key]
        assert row.count == len(durs)
        assert row.time_us == pytest.approx(sum(durs), rel=1e-9)
        algbw = key[1] * len(durs) / sum(durs) / 1e3
        assert row.algbw_gbps == pytest.approx(algbw, rel=1e-9)
        assert row.busbw_gbps == pytest.approx(algbw * (2 * (2 - 1) / 2 if key[0] == "allreduce" else 1), rel=1e-9)
    assert frame["wait_us"].isna().all()  # one rank: no peers to wait for


def test_collectives_dlrm_sizes_and_skew(dlrm, shared):
    """8 ranks: message sizes from the nccl:<collective> annotations around each launch; wait_us =
    last peer's kernel start - own start for the i-th collective of each rank (plain pass)."""
    ranks = tar_ranks(shared / "data" / "traces" / DLRM / "dlrm_kineto.tar.gz")
    starts = {r: sorted(float(e["ts"]) for e in evs if e.get("cat") == "kernel" and "nccl" in e["name"])
              for r, evs in ranks.items()}
    assert {len(v) for v in starts.values()} == {8}
    wait = sum(max(starts[r][i] for r in starts) - starts[q][i] for q in starts for i in range(8))
    frame = collectives(dlrm).frame
    assert frame["count"].sum() == 64
    assert frame["wait_us"].sum() == pytest.approx(wait, abs=1e-6)
    annotated = defaultdict(int)
    for evs in ranks.values():
        for e in evs:
            if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:"):
                kind = e["name"][5:].replace("_", "")
                annotated[(kind, e["args"]["Input Dims"][0][0])] += 1
    got = frame.groupby(["collective", "bytes"])["count"].sum()
    elem = {"float": 4, "int": 4, "long int": 8}
    per_size = {(r.collective, int(r.bytes) // elem[r.dtype]): r.count for r in frame.itertuples()}
    assert per_size == dict(annotated)
    assert set(frame["group_size"]) == {8}
    n = 8
    for r in frame.itertuples():
        factor = 2 * (n - 1) / n if r.collective == "allreduce" else (n - 1) / n
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * factor)
    assert got.sum() == 64


def test_dlrm_overlap_and_queue_per_rank(dlrm):
    """One ProfilerStep per rank: every GPU op with a launch is kept (HTA would keep none)."""
    ov = overlap(dlrm).frame
    assert list(ov["rank"]) == list(range(8))
    assert (ov["comm_us"] > 0).all() and (ov["overlap_us"] <= ov["comm_us"]).all()
    q = queue_length(dlrm).frame
    assert set(q["rank"]) == set(range(8)) and (q["max_queue_length"] >= 1).all()


def test_commands_end_to_end(shared):
    """Each new command prints JSON rows with its documented keys; an unknown rank is exit 2."""
    from tests.conftest import invoke

    cases = {
        "overlap": (A100, {"rank", "comp_us", "comm_us", "overlap_us", "comp_comm_overlap_pct"}),
        "queue": (A100, {"rank", "stream", "mean_queue_length", "max_queue_length", "blocked_us"}),
        "collectives": (A100, {"collective", "bytes", "count", "time_us", "algbw_gbps", "busbw_gbps", "wait_us"}),
    }
    for command, (folder, keys) in cases.items():
        result = invoke([command, TRACES / folder, "-f", "json"])
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)
        assert rows and keys <= set(rows[0])
    bad = invoke(["overlap", TRACES / A100, "--rank", "7"])
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: no trace of rank 7")
    assert "Traceback" not in bad.output
