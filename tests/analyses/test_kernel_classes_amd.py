"""Layout conversions on AMD: MIOpen's batched_transpose kernels in the MI300X ResNet-18 training
trace (../shared/data/traces/tracelens_mi300_resnet18_ddp_train) count as layout conversions,
checked against a plain pass over the trace JSON."""

from __future__ import annotations

import re

import pytest
from conftest import KERNEL_CATS, TRACES, folder_events, shared_or_skip

import trace_report as tr
from trace_report.analyses.kernel_classes import classify, flags

FOLDER = "tracelens_mi300_resnet18_ddp_train"
TRANSPOSE = re.compile(r"^batched_transpose_\d+x\d+_\w+$")  # MIOpen's kernel naming


@pytest.fixture(scope="module")
def kernels() -> list[dict]:
    shared_or_skip()
    return [e for e in folder_events(FOLDER) if e.get("cat") in KERNEL_CATS]


def test_every_batched_transpose_kernel_of_the_mi300_trace_is_a_layout_conversion(kernels):
    names = sorted({k["name"] for k in kernels if TRANSPOSE.match(k["name"])})
    assert "batched_transpose_32x32_half" in names  # the real name the rule cites
    with tr.open(TRACES / FOLDER) as db:
        rows = classify(db, names, 9.4).to_dict(orient="records")
    for row in rows:
        assert "layout_conversion" in row["classes"], row["name"]
        assert "miopen_batched_transpose" in row["rules"]
        assert not {"tensor_core", "fp16_tensor_core"} & set(row["classes"]), row["name"]


def test_layout_conversion_time_matches_the_json(kernels):
    transposes = [k for k in kernels if TRANSPOSE.match(k["name"])]
    with tr.open(TRACES / FOLDER) as db:
        summary = flags(db).summary.set_index("class")
    assert summary.loc["layout_conversion", "count"] == len(transposes) > 0
    assert summary.loc["layout_conversion", "total_us"] == pytest.approx(
        sum(float(k["dur"]) for k in transposes))


def test_igemm_convolutions_are_not_layout_conversions(kernels):
    name = next(k["name"] for k in kernels if "igemm_fwd_gtcx3_nhwc" in k["name"])
    with tr.open(TRACES / FOLDER) as db:
        (row,) = classify(db, [name], 9.4).to_dict(orient="records")
    assert "layout_conversion" not in row["classes"]  # 'nhwc' in a conv name is not a transpose
