"""One definition of GPU busy time: ``breakdown``'s per-step busy time (the
regions' ``wall_us - idle_us`` added up) is the ``gpu_utilization`` view's ``busy_us``, exactly,
on one-rank, eight-rank and 2021-format traces. Both read view ``gpu_busy_intervals``."""

from __future__ import annotations

import pytest
from conftest import TRACES, shared_or_skip

import trace_report as tr
from trace_report.analyses.breakdown import BEFORE_FIRST_STEP, BreakdownOptions, breakdown
from trace_report.analyses.common.utilization import gpu_utilization


@pytest.mark.parametrize("folder, steps", [("hta_a100_ddp_nccl", 3), ("param_dlrm_kineto_v100x8", 8),
                                           ("kineto_rn50_nw4_2021jun", 6)])
def test_breakdown_busy_per_step_is_the_utilization_views(folder, steps):
    shared_or_skip()
    with tr.open(TRACES / folder) as db:
        regions = breakdown(db, BreakdownOptions(by_step=True, by_rank=True)).frame
        view = gpu_utilization(db, by_step=True)
        n_steps = db.scalar("SELECT count(*) FROM events WHERE name LIKE 'ProfilerStep#%'")
    regions = regions[regions["region"] != BEFORE_FIRST_STEP]
    per_step = regions.groupby(["rank", "step"]).agg(wall_us=("wall_us", "sum"), idle_us=("idle_us", "sum"))
    per_step["busy_us"] = per_step["wall_us"] - per_step["idle_us"]
    view = view.set_index(["rank", "step"]).sort_index()
    assert len(per_step) == len(view) == n_steps == steps  # steps per rank, never ranks as steps
    assert (view["busy_us"] > 0).all()
    assert [(int(r), int(s)) for r, s in per_step.index] == [(int(r), int(s)) for r, s in view.index]
    assert per_step["wall_us"].tolist() == view["wall_us"].tolist()
    assert per_step["busy_us"].tolist() == view["busy_us"].tolist()  # exactly, not approximately
    util = 100.0 * per_step["busy_us"] / per_step["wall_us"]
    assert util.tolist() == view["gpu_util_pct"].tolist()
