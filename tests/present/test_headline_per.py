"""The headline's list of findings says per what the saving is, as advise's verdict does."""

from __future__ import annotations

from conftest import trace_file

import trace_report
from trace_report.analyses.advise import advise
from trace_report.present.report.sections.headline import verdict_html


def test_iterations_without_profiler_steps_say_per_iteration() -> None:
    """MI300X ResNet-18 has no ProfilerStep (iterations inferred from Optimizer.step): its
    findings' savings are per iteration, in the verdict line and in the list below it."""
    with trace_report.open(trace_file("tracelens_mi300_resnet18_ddp_train")) as db:
        result = advise(db)
    assert set(result.frame["per"]) == {"iteration"}
    page = verdict_html(result)
    assert "ms per iteration (" in page and "% of iteration time)" in page
    assert "per step" not in page and "of step time" not in page
