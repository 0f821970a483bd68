"""Real positives of two of PyTorch's patterns (torch/profiler/_pattern_matcher.py): this project's
CPU capture traces/cpu-2026-11-29/conv-bias-single-tensor (``trace-report capture --device cpu
--conv-bias --no-optimizer-foreach --record-shapes``, traces/README.md) against the H100 baseline
capture, with the expected counts from plain passes over the JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import complete_events

import trace_report
from trace_report.analyses.advise import advise

TRACES = Path(__file__).resolve().parents[3] / "traces"
CPU = TRACES / "cpu-2026-11-29" / "conv-bias-single-tensor"
H100 = TRACES / "h100-2026-11-25" / "baseline"


def _trace(folder: Path) -> Path:
    return next(folder.glob("*.pt.trace.json.gz"))


def _biased_conv_before_bn(events: list[dict]) -> int:
    """aten::conv2d calls with a third input type (the bias) whose innermost enclosing
    'nn.Module: Conv2d' event is followed, on its thread, by an 'nn.Module: BatchNorm2d' one
    (Conv2dBiasFollowedByBatchNorm2dPattern: the next module event after the Conv2d's)."""
    modules = sorted((e for e in events if str(e["name"]).startswith("nn.Module: ")),
                     key=lambda e: (e["tid"], float(e["ts"])))
    n = 0
    for c in events:
        types = (c.get("args") or {}).get("Input type") or []
        if c["name"] != "aten::conv2d" or len(types) < 3 or not types[2]:
            continue
        t0, t1 = float(c["ts"]), float(c["ts"]) + float(c["dur"])
        around = [m for m in modules if m["tid"] == c["tid"] and str(m["name"]).startswith("nn.Module: Conv2d")
                  and float(m["ts"]) <= t0 and float(m["ts"]) + float(m["dur"]) >= t1]
        if not around:
            continue
        conv = max(around, key=lambda m: float(m["ts"]))
        end = float(conv["ts"]) + float(conv["dur"])
        after = [m for m in modules if m["tid"] == c["tid"] and float(m["ts"]) >= end]
        if after and str(min(after, key=lambda m: float(m["ts"]))["name"]).startswith("nn.Module: BatchNorm2d"):
            n += 1
    return n


@pytest.mark.skipif(not CPU.is_dir() or not H100.is_dir(), reason="the project's captures are not present")
def test_patterns_fire_on_the_capture_made_for_them_only() -> None:
    events = complete_events(_trace(CPU))
    single = sum(1 for e in events if str(e["name"]).endswith("_single_tensor_sgd"))
    biased = _biased_conv_before_bn(events)
    assert single >= 1 and biased >= 20  # every conv of ResNet-18 is followed by its BatchNorm2d
    with trace_report.open(_trace(CPU)) as db:
        found = advise(db, all_findings=True).frame.set_index("finding")
    assert found.loc["optimizer_single_tensor", "value"] == single
    assert found.loc["conv_bias_before_batchnorm", "value"] == biased
    with trace_report.open(_trace(H100)) as db:
        baseline = set(advise(db, all_findings=True).frame["finding"])
    assert not baseline & {"optimizer_single_tensor", "conv_bias_before_batchnorm"}
