"""``compare``: kernel- and region-level differences, checked against HTA's TraceDiff and a
plain-Python pass over the JSON on the shared control/test pair (A100 against V100)."""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import logging
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import SHARED, invoke

import trace_report as tr
from trace_report.analyses.breakdown import BreakdownOptions, breakdown
from trace_report.analyses.compare import KERNEL_COLUMNS, REGION_COLUMNS, CompareOptions, compare
from trace_report.errors import InputError

PAIR = SHARED / "data" / "traces" / "hta_trace_diff"
CONTROL, TEST = PAIR / "control.json.gz", PAIR / "test.json.gz"
pytestmark = pytest.mark.skipif(not PAIR.is_dir(), reason="../shared/data is not present")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


@pytest.fixture(scope="module")
def pair():
    with tr.open(CONTROL) as a, tr.open(TEST) as b:
        yield a, b


@pytest.fixture(scope="module")
def kernels(pair):
    return compare(*pair)


def plain_totals(path: Path) -> dict[str, tuple[int, float]]:
    import gzip

    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            out[e["name"]][0] += 1
            out[e["name"]][1] += float(e["dur"])
    return {k: (int(n), us) for k, (n, us) in out.items()}


def test_kernel_diff_matches_the_json(kernels):
    frame = kernels.frame.set_index("name")
    assert list(kernels.frame.columns) == KERNEL_COLUMNS
    a, b = plain_totals(CONTROL), plain_totals(TEST)
    assert set(frame.index) == set(a) | set(b)
    for name, row in frame.iterrows():
        assert (row["a_count"], row["b_count"]) == (a.get(name, (0, 0))[0], b.get(name, (0, 0))[0])
        assert row["a_total_us"] == pytest.approx(a.get(name, (0, 0.0))[1])
        assert row["diff_us"] == pytest.approx(b.get(name, (0, 0.0))[1] - a.get(name, (0, 0.0))[1])
    assert frame["a_pct"].sum() == pytest.approx(100) and frame["b_pct"].sum() == pytest.approx(100)


def test_sorted_by_impact_with_statuses(kernels):
    f = kernels.frame
    assert list(f["diff_us"].abs()) == sorted(f["diff_us"].abs(), reverse=True)
    assert f.iloc[0]["name"] == "Memcpy DtoD (Device -> Device)"
    assert (f.loc[f["status"] == "new", "a_count"] == 0).all() and (f.loc[f["status"] == "new", "b_count"] > 0).all()
    assert (f.loc[f["status"] == "vanished", "b_count"] == 0).all()
    assert (f.loc[f["status"] == "more", "diff_us"] > 0).all() and (f.loc[f["status"] == "less", "diff_us"] < 0).all()
    assert {"new", "vanished", "more", "less"} <= set(f["status"])
    assert f.loc[f["name"] == "volta_sgemm_128x32_nt", "status"].item() == "new"  # V100-only cuBLAS kernel


def _hta_diff():
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff

    logging.getLogger("hta").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for side, path in (("c", CONTROL), ("t", TEST)):
            folder = Path(tmp) / side
            folder.mkdir()
            (folder / path.name).symlink_to(path)
            dirs.append(str(folder))
        with contextlib.redirect_stdout(io.StringIO()):
            control, test = LabeledTrace("control", trace_dir=dirs[0]), LabeledTrace("test", trace_dir=dirs[1])
            return TraceDiff.compare_traces(control, test, control_iteration=control.iterations(),
                                            test_iteration=test.iterations(), device_type=DeviceType.GPU)


@pytest.mark.slow  # HTA's TraceDiff reads both traces (slow); the default run checks compare against the JSON
def test_agrees_with_hta_trace_diff(pair):
    """HTA counts GPU operations (stream >= 0) of every iteration, an operation belonging to the
    iteration of the runtime call that launched it: our ``steps_only`` rule. Exact agreement."""
    pytest.importorskip("hta")
    hta = _hta_diff()
    ours = compare(*pair, CompareOptions(steps_only=True)).frame.set_index("name")
    assert set(ours.index) == set(hta.index)
    joined = ours.join(hta)
    assert (joined["a_count"] == joined["control_counts"]).all()
    assert (joined["b_count"] == joined["test_counts"]).all()
    assert (joined["a_total_us"] - joined["control_total_duration"]).abs().max() < 1e-6
    assert (joined["diff_us"] - joined["diff_duration"]).abs().max() < 1e-6
    sign = {"+": 1, "-": -1, "=": 0}
    assert (joined["diff_count"].map(lambda d: (d > 0) - (d < 0)) == joined["counts_change_categories"].map(sign)).all()
    top_hta = hta["diff_duration"].abs().sort_values(ascending=False).index[:10]
    assert list(ours.index[:10]) == list(top_hta)


def test_region_diff(pair):
    result = compare(*pair, CompareOptions(by="region", per_step=False))
    f = result.frame
    assert list(f.columns) == REGION_COLUMNS and len(f) == 6
    a = breakdown(pair[0]).frame.set_index("region")
    row = f.set_index("region").loc["backward"]
    assert row["a_wall_us"] == pytest.approx(a.loc["backward", "wall_us"])
    assert row["diff_us"] == pytest.approx(row["b_wall_us"] - row["a_wall_us"])
    assert list(f["diff_us"].abs()) == sorted(f["diff_us"].abs(), reverse=True)
    assert any(n.startswith("B: ") for n in result.notes)
    per = compare(*pair, CompareOptions(by="region")).frame.set_index("region")  # per step by default
    assert per.loc["backward", "a_wall_us"] == pytest.approx(row["a_wall_us"] / result.a_steps)
    assert result.a_steps == result.b_steps == 6
    per_rank = breakdown(pair[1], BreakdownOptions(rank=1)).frame
    assert per_rank["wall_us"].sum() == pytest.approx(f["b_wall_us"].sum())


def test_per_step_and_errors(pair, kernels):
    per = compare(*pair, CompareOptions(per_step=True))
    first = per.frame.set_index("name").loc["Memcpy DtoD (Device -> Device)"]
    assert first["b_count"] == pytest.approx(4645 / 6)
    assert "per step: A has 6 step(s), B has 6" in per.notes
    with pytest.raises(InputError, match="no trace of rank 5"):
        compare(*pair, CompareOptions(rank=5))
    with pytest.raises(InputError, match="unknown comparison level"):
        compare(*pair, CompareOptions(by="stream"))


def test_cpu_only_runs_compare_operators(tmp_path_factory):
    from conftest import captured_runs

    root = captured_runs(tmp_path_factory)
    with tr.open(root / "opt" / "sgd") as a, tr.open(root / "opt" / "adam") as b:
        result = compare(a, b)
    assert "CPU operators compared by self time" in result.notes[0]
    f = result.frame.set_index("name")
    for op in ("aten::sqrt", "aten::addcdiv_", "aten::lerp_"):  # Adam's update, one per parameter (62)
        assert (f.loc[op, "status"], f.loc[op, "a_count"], f.loc[op, "b_count"]) == ("new", 0, 62)
    assert f.loc["aten::convolution", "a_count"] == f.loc["aten::convolution", "b_count"] > 0
    assert (f["kind"] == "cpu_op").all()





def test_compare_command(tmp_path):
    res = invoke(["compare", str(CONTROL), str(TEST), "-f", "json", "-n", "3",
                                    "--chart", str(tmp_path / "diff.png")])
    assert res.exit_code == 0, res.output
    body = res.stdout[res.stdout.index("["):]
    rows = json.loads(body)
    assert [r["name"] for r in rows][0] == "Memcpy DtoD (Device -> Device)" and list(rows[0]) == KERNEL_COLUMNS
    assert (tmp_path / "diff.png").read_bytes()[:4] == b"\x89PNG"
    res = invoke(["compare", str(CONTROL), str(TEST), "--by", "region", "-o",
                                    str(tmp_path / "regions.csv")])
    assert res.exit_code == 0 and (tmp_path / "regions.csv").read_text().startswith("region,status,")
    res = invoke(["compare", str(CONTROL), str(tmp_path / "absent.json")])
    assert res.stderr.startswith("Error:") and "no such file" in res.stderr


def _same_rows(frame, rows: list[dict]) -> None:
    """The frame's records equal the CLI's JSON rows: same columns and order, numbers to 1e-9
    (JSON null for NaN)."""
    assert list(frame.columns) == list(rows[0]) and len(frame) == len(rows) > 0
    for mine, theirs in zip(frame.to_dict("records"), rows, strict=True):
        for key, value in theirs.items():
            got = mine[key]
            if value is None:
                assert got is None or got != got, key  # NaN
            elif isinstance(value, float):
                assert got == pytest.approx(value, rel=1e-9, abs=1e-9), key
            else:
                assert got == value, key


def _cli_json(*args: str):
    res = invoke(["compare", str(CONTROL), str(TEST), "-f", "json", *args])
    return res.exit_code, json.loads(res.stdout)


@pytest.mark.parametrize("kwargs, args", [
    ({}, []),
    ({"match": "short", "per_step": True}, ["--match", "short", "--per-step"]),
    ({"by": "region"}, ["--by", "region"]),
])
def test_notebook_method_gives_the_commands_rows(pair, kwargs, args):
    """``tr.open(A).compare(B, ...)``, declared with the command, gives the rows of ``trace-report
    compare A B -f json`` with the same options (B a TraceDB, or a path the method opens)."""
    a, b = pair
    code, rows = _cli_json(*args)
    assert code == 0
    _same_rows(a.compare(b, **kwargs), rows)
    if not kwargs:
        _same_rows(a.compare(TEST), rows)


def test_notebook_method_judges_the_rules_as_the_gate(pair):
    """``fail_if``: the verdicts in ``attrs``, broken where the command exits 3 (the V100 side's
    GEMMs take more time per step than the A100 side's: a computed per-step sum, checked here
    against the rows)."""
    a, b = pair
    rules = ("kernel:*gemm*>+10%", "step_time>+100000%")
    frame = a.compare(b, fail_if=rules)
    gemm = frame[[fnmatch.fnmatchcase(n.lower(), "*gemm*") for n in frame["name"]]]
    steps = frame.attrs["headline"]["a"]["steps"], frame.attrs["headline"]["b"]["steps"]
    a_us, b_us = gemm["a_total_us"].sum() / steps[0], gemm["b_total_us"].sum() / steps[1]
    gemm_verdict, step_verdict = frame.attrs["verdicts"]
    assert gemm_verdict["a_us"] == pytest.approx(a_us) and gemm_verdict["b_us"] == pytest.approx(b_us)
    assert gemm_verdict["broken"] == (100 * (b_us - a_us) / a_us > 10) and not step_verdict["broken"]
    assert frame.attrs["gate"] == ("failed" if gemm_verdict["broken"] else "passed")
    code, rows = _cli_json(*[x for r in rules for x in ("--fail-if", r)])
    assert code == (3 if gemm_verdict["broken"] else 0)
    _same_rows(frame, rows)
