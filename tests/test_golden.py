"""The restructured code reproduces the golden outputs recorded before it (tests/golden/).

Every analysis command's JSON output on every input in ``../shared/data`` is compared with
``tests/golden/outputs/*.json``: strings and integers exactly, floats to 1e-9 relative
(DuckDB's parallel sums may differ in the last bits). The default run checks every command on
a representative set of inputs; the whole set is marked ``slow``.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED

from tests.golden.cases import cases, differences, golden_file, run_case

FAST_INPUTS = (
    "traces/hta_a100_ddp_nccl/", "traces/tracelens_mi300_resnet18_ddp_train/", "traces/hta_cpu_only/",
    "traces/param_dlrm_kineto_v100x8/", "ncu/indexspaces_ncu_a40_frb/", "nsys/nvfuser_nsys_h100_matmul/",
    "nsys/mudock_nsys_kernsum_adt_cuda/", "compare::trace-diff",
)
ALL = cases(SHARED) if (SHARED / "data" / "MANIFEST.tsv").is_file() else []


def _params(fast: bool) -> list[object]:
    chosen = [(k, a) for k, a in ALL if any(s in k for s in FAST_INPUTS) == fast]
    return [pytest.param(k, a, id=k.replace("$SHARED/data/", "")) for k, a in chosen]


def _check(key: str, argv: list[str]) -> None:
    recorded = json.loads(golden_file(key).read_text())
    assert key in recorded, f"no golden output for {key}: record it with python -m tests.golden.record"
    actual = run_case(argv, SHARED)
    diffs = differences(recorded[key]["exit"], actual["exit"], "exit") + \
        differences(recorded[key]["rows"], actual["rows"], "rows")
    assert not diffs, "\n".join(diffs[:20])


def test_golden_cases_exist(shared: object) -> None:
    assert len(ALL) > 200  # every trace x every command, ncu, nsys, compare
    assert all(golden_file(k).is_file() for k, _ in ALL)


@pytest.mark.parametrize(("key", "argv"), _params(True))
def test_golden_fast(key: str, argv: list[str], shared: object) -> None:
    _check(key, argv)


@pytest.mark.slow
@pytest.mark.parametrize(("key", "argv"), _params(False))
def test_golden_all(key: str, argv: list[str], shared: object) -> None:
    _check(key, argv)
