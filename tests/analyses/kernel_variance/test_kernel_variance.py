"""``trace-report kernel-variance``, made from its declaration alone: the rows against a plain
pass over the JSON (count, mean, sample standard deviation, CV, p50/p95 by linear interpolation,
max, share of GPU time, TraceLens' rule CV > 1 with >= 10 calls), the notebook method on an input
of two unrelated runs, and the command's help, docs/cli.md entry and report table."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import cpp_demangle
import pytest
from conftest import GPU_OP_CATS, KERNEL_CATS, REPO, TRACES, complete_events, invoke, shared_or_skip

import trace_report as tr


def _quantile(xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default percentile)."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def expected(events: list[dict[str, Any]], min_calls: int = 10, cv_threshold: float = 1.0) -> dict[str, dict]:
    """Per kernel name, by a plain pass over the complete events."""
    durs: dict[str, list[float]] = defaultdict(list)
    gpu_us = 0.0
    for e in events:
        if e.get("cat") in GPU_OP_CATS:
            gpu_us += float(e["dur"])
        if e.get("cat") in KERNEL_CATS:  # mangled names demangled, as the ingest stores them
            name = cpp_demangle.demangle(e["name"]) if e["name"].startswith("_Z") else e["name"]
            durs[name].append(float(e["dur"]))
    out = {}
    for name, xs in durs.items():
        mean = sum(xs) / len(xs)
        std = statistics.stdev(xs) if len(xs) > 1 else None
        cv = std / mean if std is not None and mean > 0 else None
        out[name] = {"calls": len(xs), "total_us": sum(xs), "mean_us": mean, "std_us": std, "cv": cv,
                     "p50_us": _quantile(xs, 0.5), "p95_us": _quantile(xs, 0.95), "max_us": max(xs),
                     "pct_of_gpu_time": 100 * sum(xs) / gpu_us,
                     "variable": cv is not None and cv > cv_threshold and len(xs) >= min_calls}
    return out


def _check(rows: list[dict], want: dict[str, dict]) -> None:
    assert {r["name"] for r in rows} == set(want)
    for row in rows:
        exp = want[row["name"]]
        for key, value in exp.items():
            if value is None or isinstance(value, bool | int):
                assert row[key] == value, (row["name"], key)
            else:
                assert row[key] == pytest.approx(value, rel=1e-9, abs=1e-9), (row["name"], key)
    totals = [r["total_us"] for r in rows]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize(("folder", "some_variable"), [("hta_a100_ddp_nccl", True), ("hta_amd_mi250", False)])
def test_rows_are_a_plain_pass_over_the_json(folder: str, some_variable: bool) -> None:
    shared_or_skip()
    path = next(p for p in sorted((TRACES / folder).iterdir()) if p.name.endswith((".json", ".json.gz")))
    done = invoke(["kernel-variance", str(path), "-f", "json"])
    assert done.exit_code == 0, done.stderr
    rows = json.loads(done.stdout)
    want = expected(complete_events(path))
    _check(rows, want)
    assert any(r["variable"] for r in rows) is some_variable and not all(r["variable"] for r in rows)
    share = sum(w["pct_of_gpu_time"] for w in want.values() if w["variable"])
    n = sum(w["variable"] for w in want.values())
    assert f"{n} of {len(want)} kernel names are variable" in done.stderr
    assert f"{share:.1f}% of GPU time" in done.stderr


def test_the_rule_s_thresholds_are_options() -> None:
    shared_or_skip()
    path = TRACES / "hta_a100_ddp_nccl" / "nccl_data.json.gz"
    done = invoke(["kernel-variance", str(path), "--min-calls", "100", "--cv-threshold", "0.5", "-f", "json"])
    assert done.exit_code == 0, done.stderr
    want = expected(complete_events(path), min_calls=100, cv_threshold=0.5)
    assert {r["name"]: r["variable"] for r in json.loads(done.stdout)} == {k: w["variable"] for k, w in want.items()}


def test_bad_options_are_usage_errors() -> None:
    shared_or_skip()
    path = str(TRACES / "hta_a100_ddp_nccl" / "nccl_data.json.gz")
    for args in (["--min-calls", "0"], ["--cv-threshold", "-1"], ["--rank", "7"]):
        done = invoke(["kernel-variance", path, *args])
        assert done.exit_code == 2 and "Error:" in done.stderr and "Traceback" not in done.stderr, args


def test_notebook_method_keeps_unrelated_runs_apart() -> None:
    shared_or_skip()
    folder = TRACES / "hta_trace_diff"
    with tr.open(folder) as db:
        frame = db.kernel_variance()
        merged = db.kernel_variance(merge_runs=True)
        one = db.kernel_variance(run="test", limit=3)
    assert list(frame.columns)[0] == "run" and set(frame["run"]) == {"control", "test"}
    for label in ("control", "test"):
        rows = json.loads(frame[frame["run"] == label].drop(columns=["run"]).to_json(orient="records"))
        _check(rows, expected(complete_events(folder / f"{label}.json.gz")))
    assert "run" not in merged.columns
    assert len(one) == 3 and "run" not in one.columns
    assert any("2 runs, analysed apart" in n for n in frame.attrs["notes"])


def test_command_help_docs_and_report_come_from_the_declaration(tmp_path: Path) -> None:
    from trace_report.analyses.kernel_variance import COMMAND

    done = invoke(["kernel-variance", "--help"])
    assert done.exit_code == 0
    for flag in ("--min-calls", "--cv-threshold", "--rank", "--by-rank", "--merge-runs", "--run", "--format"):
        assert flag in done.stdout
    assert "trace-report kernel-variance traces/run-42 --limit 10" in done.stdout
    assert "kernel-variance" in invoke(["--help"]).stdout
    assert "## trace-report kernel-variance" in (REPO / "docs" / "cli.md").read_text()
    shared_or_skip()
    out = tmp_path / "r.html"
    done = invoke(["report", str(TRACES / "hta_a100_ddp_nccl"), "-o", str(out)])
    assert done.exit_code == 0, done.stderr
    assert COMMAND.report is not None and COMMAND.report.title in out.read_text()
