"""The report keeps ranks and runs apart: the 8-rank DLRM archive is one
ProfilerStep on each of 8 ranks, not 8 steps, and its regions chart has one bar per rank and
step, never the ranks stacked into one step."""

from __future__ import annotations

import statistics

import pytest
from conftest import TRACES, tar_ranks

import trace_report as tr
from trace_report.present.report import ReportOptions, headline_section, trace_charts_section

DLRM = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"


@pytest.fixture(scope="module")
def dlrm_sections():
    if not DLRM.is_file():
        pytest.skip("../shared/data is not present")
    with tr.open(DLRM) as db:
        yield headline_section(db, db.con, ReportOptions()), trace_charts_section(db, db.con, ReportOptions())


def test_multi_rank_headline_counts_steps_per_rank(dlrm_sections):
    head, _ = dlrm_sections
    ranks = tar_ranks(DLRM)
    steps = [e for events in ranks.values() for e in events if e["name"].startswith("ProfilerStep#")]
    assert len(ranks) == 8 and len(steps) == 8
    assert "1 per rank (8 ranks)" in head.body and ">8</b>ProfilerSteps" not in head.body
    median_ms = statistics.median(e["dur"] for e in steps) / 1e3
    assert 10 < median_ms < 25  # the real step (~16 ms), not the ranks stacked (~120 ms)
    assert f"{median_ms:,.2f} ms" in head.body


def test_multi_rank_regions_chart_has_one_bar_per_rank_and_step(dlrm_sections):
    _, sec = dlrm_sections
    chart = dict(sec.charts)["regions"].to_dict()
    rows = next(iter(chart["datasets"].values()))
    wall = [r for r in rows if r["measure"] == "wall time (µs)" and r["region"] != "before_first_step"]
    per_bar: dict[str, float] = {}
    for r in wall:
        per_bar[r["step"]] = per_bar.get(r["step"], 0.0) + r["us"]
    expected = {}
    for rank, events in tar_ranks(DLRM).items():
        (step,) = [e for e in events if e["name"].startswith("ProfilerStep#")]
        expected[f"rank {rank} · {step['name'].split('#')[1]}"] = step["dur"]
    assert set(per_bar) == set(expected) and len(expected) == 8
    for bar, dur in expected.items():
        assert per_bar[bar] == pytest.approx(dur, rel=1e-6)
    early = {r["step"] for r in rows if r["region"] == "before_first_step"}
    assert all(b.endswith("· before first step") for b in early)  # their own bar, never in the step
