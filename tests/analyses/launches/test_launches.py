"""Kernel launch statistics (``trace-report launches``) against HTA's get_cuda_kernel_launch_stats,
run through the ``hta launch`` bridge, and against a plain-Python pass over the trace JSON.

Tolerance. With ``hta_rounding`` our per-launch numbers must equal HTA's to 1e-6 µs: HTA rounds
fractional (ns-resolution) timestamps to whole µs (start up, end down) and both sides then hold the
same integers in doubles, so any difference is a defect; 1e-6 µs only absorbs the last bits of a
mean or an interpolated percentile. Without it (the trace's own times) a launch may differ from
HTA's by < 2 µs per value: the start moves up and the end down by < 1 µs each.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from conftest import TRACES, invoke, trace_file

import trace_report as tr
from trace_report.analyses.launches import (
    PER_LAUNCH_COLUMNS,
    PER_NAME_COLUMNS,
    LaunchOptions,
    launch_rows,
    launches,
)
from trace_report.errors import UsageError

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

HTA_CALLS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
             "runFunction - job_prep_and_submit_for_execution"}
OTHER_CALLS = {"cuLaunchKernel", "cuLaunchKernelEx", "hipLaunchKernel", "hipExtLaunchKernel",
               "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync",
               "hipMemcpyWithStream"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
CPU = {"cpu_op", "user_annotation", "Operator"}  # ProfilerStep#N; not its gpu_user_annotation twin
GPU_OPS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
TOL_US = 1e-6
SMALL = ["hta_step_based_trace_gp100", "tracelens_h100_bert_small"]  # integer µs, no steps; ns, cuLaunchKernel
BIG = ["hta_a100_ddp_nccl", "hta_ns_resolution", "kineto_rn50_nw4_2021jun"]  # 3 and 5 steps; 2021 schema


def hta_per_launch(path: Path) -> pd.DataFrame:
    """HTA's rows (rank 0), through the bridge: correlation, cpu_us, gpu_us, launch_delay_us."""
    pytest.importorskip("hta")
    from trace_report.analyses.hta import hta_launch_stats

    return hta_launch_stats([path], per_launch=True).set_index("correlation").sort_index()


def trace_events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "X"]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default), written out."""
    xs = sorted(values)
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    return xs[lo] if lo + 1 >= len(xs) else xs[lo] + (h - lo) * (xs[lo + 1] - xs[lo])


def plain_launches(path: Path, calls: set[str], *, steps_only: bool = True) -> list[dict]:
    """HTA's rule read straight from the JSON, on the trace's own times: the GPU ops sharing the
    correlation of a runtime call named in ``calls``, paired with that call; in a trace with 2+
    ProfilerSteps (and ``steps_only``) only launches whose call starts before the last step starts."""
    events = trace_events(path)
    steps = {e["name"]: e["ts"] for e in events if e["name"].startswith("ProfilerStep#") and e.get("cat") in CPU}
    cutoff = max(steps.values()) if len(steps) >= 2 and steps_only else math.inf
    by_corr: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        if e.get("cat") in RUNTIME and "correlation" in (e.get("args") or {}):
            by_corr[e["args"]["correlation"]].append(e)
    out = []
    for g in (e for e in events if e.get("cat") in GPU_OPS):
        calls_of = by_corr.get((g.get("args") or {}).get("correlation"), [])
        if not any(c["name"] in calls for c in calls_of):
            continue
        for c in calls_of:
            if c["ts"] < cutoff:
                out.append({"name": g["name"], "correlation": g["args"]["correlation"], "launch_us": c["dur"],
                            "gpu_dur_us": g["dur"], "delay_us": max(g["ts"] - c["ts"] - c["dur"], 0)})
    return out


def raw_names(db: tr.TraceDB) -> dict[str, str]:
    """Our (demangled) names -> the trace's own, which HTA and the JSON use."""
    return dict(db.con.execute("SELECT name, raw_name FROM kernel_names").fetchall())


# ------------------------------------------------------------------ HTA, per launch and per name

def check_equals_hta(name: str) -> None:
    path = trace_file(name)
    hta = hta_per_launch(path)
    with tr.open(path) as db:
        ours = launch_rows(db, LaunchOptions(hta_rounding=True)).set_index("correlation").sort_index()
        own_times = launch_rows(db, LaunchOptions()).set_index("correlation").sort_index()
        stats = launches(db, LaunchOptions(hta_rounding=True)).frame
        names = raw_names(db)
    assert len(hta) > 0 and list(ours.index) == list(hta.index)
    for theirs, mine in (("cpu_us", "launch_us"), ("gpu_us", "gpu_dur_us"), ("launch_delay_us", "delay_us")):
        assert (ours[mine] - hta[theirs]).abs().max() <= TOL_US, mine
        assert (own_times[mine] - hta[theirs]).abs().max() < 2.0, mine
    # per name: HTA's rows grouped by the GPU operation each correlation launched (from the JSON)
    op_name = {(e.get("args") or {}).get("correlation"): e["name"]
               for e in trace_events(path) if e.get("cat") in GPU_OPS}
    hta = hta.assign(name=[op_name[c] for c in hta.index])
    stats = stats.assign(name=stats["name"].map(lambda n: names.get(n, n))).set_index("name")
    assert sorted(stats.index) == sorted(set(hta["name"]))
    for kernel, d in hta.groupby("name"):
        row = stats.loc[kernel]
        assert row["launches"] == len(d)
        for theirs, mine in (("cpu_us", "launch"), ("gpu_us", "gpu_dur"), ("launch_delay_us", "delay")):
            values = list(d[theirs])
            assert row[f"{mine}_mean_us"] == pytest.approx(sum(values) / len(values), abs=TOL_US)
            assert row[f"{mine}_p50_us"] == pytest.approx(percentile(values, 0.5), abs=TOL_US)
            assert row[f"{mine}_p95_us"] == pytest.approx(percentile(values, 0.95), abs=TOL_US)
            assert row[f"{mine}_max_us"] == max(values)
        # HTA's outlier rule (cuda_kernel_analysis.visualize_cuda_launch_kernel_info), defaults 50 / 100 µs
        assert row["runtime_outliers"] == (d["cpu_us"] > 50).sum()
        assert row["delay_outliers"] == (d["launch_delay_us"] > 100).sum()
        assert row["short_kernels"] == ((d["cpu_us"] <= 50) & (d["gpu_us"] < d["cpu_us"])).sum()


@pytest.mark.parametrize("name", SMALL)
def test_equals_hta(name: str) -> None:
    check_equals_hta(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", BIG)
def test_equals_hta_on_large_traces(name: str) -> None:
    check_equals_hta(name)


@pytest.mark.slow
def test_outlier_totals_equal_the_bridge_summary() -> None:
    """The per-name outlier counts add up to the ``hta launch`` summary of the same trace."""
    pytest.importorskip("hta")
    from trace_report.analyses.hta import hta_launch_stats

    path = trace_file("hta_a100_ddp_nccl")
    summary = hta_launch_stats([path]).iloc[0]
    with tr.open(path) as db:
        stats = launches(db, LaunchOptions(hta_rounding=True)).frame
    assert stats["launches"].sum() == summary["launches"]
    assert stats["runtime_outliers"].sum() == summary["runtime_outliers"]
    assert stats["delay_outliers"].sum() == summary["launch_delay_outliers"] > 0


@pytest.mark.slow
def test_every_rank_of_an_archive_equals_hta() -> None:
    """The 8-rank DLRM archive (integer µs, one ProfilerStep per rank): every rank, launch for launch."""
    pytest.importorskip("hta")
    from trace_report.analyses.hta import hta_launch_stats

    path = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
    hta = hta_launch_stats([path], per_launch=True).set_index(["rank", "correlation"]).sort_index()
    with tr.open(path) as db:
        ours = launch_rows(db).set_index(["rank", "correlation"]).sort_index()
        rank5 = launches(db, LaunchOptions(rank=5)).frame
    assert sorted(set(hta.index.get_level_values("rank"))) == list(range(8))
    assert list(ours.index) == list(hta.index)
    for theirs, mine in (("cpu_us", "launch_us"), ("gpu_us", "gpu_dur_us"), ("launch_delay_us", "delay_us")):
        assert (ours[mine] - hta[theirs]).abs().max() <= TOL_US, mine
    assert set(rank5["rank"]) == {5} and rank5["launches"].sum() == len(hta.loc[5])


# ------------------------------------------------------------------ plain Python over the JSON

def check_plain_python(name: str, all_launches: bool) -> None:
    path = trace_file(name)
    calls = HTA_CALLS | OTHER_CALLS if all_launches else HTA_CALLS
    expected: dict[str, list[dict]] = defaultdict(list)
    for row in plain_launches(path, calls):
        expected[row["name"]].append(row)
    with tr.open(path) as db:
        result = launches(db, LaunchOptions(all_launches=all_launches))
        names = raw_names(db)
    stats = result.frame.assign(name=result.frame["name"].map(lambda n: names.get(n, n))).set_index("name")
    assert list(result.frame.columns) == PER_NAME_COLUMNS
    assert sorted(stats.index) == sorted(expected)
    for kernel, rows in expected.items():
        row = stats.loc[kernel]
        assert row["launches"] == len(rows)
        for col in ("launch_us", "gpu_dur_us", "delay_us"):
            values = [r[col] for r in rows]
            stem = col.removesuffix("_us")
            assert row[f"{stem}_mean_us"] == pytest.approx(sum(values) / len(values), abs=TOL_US)
            assert row[f"{stem}_p95_us"] == pytest.approx(percentile(values, 0.95), abs=TOL_US)
            assert row[f"{stem}_max_us"] == pytest.approx(max(values), abs=TOL_US)
        assert row["delay_outliers"] == sum(r["delay_us"] > 100 for r in rows)


def test_plain_python_pass_bert_small() -> None:
    """ns-resolution H100 trace on its own times; HTA's calls only (cuLaunchKernel's GEMMs left out)."""
    check_plain_python("tracelens_h100_bert_small", all_launches=False)


def test_all_launches_adds_what_hta_leaves_out() -> None:
    """--all-launches counts the cuLaunchKernel launches (cutlass GEMMs, triton) too, and the note
    says how many HTA's rule leaves out."""
    check_plain_python("tracelens_h100_bert_small", all_launches=True)
    with tr.open(trace_file("tracelens_h100_bert_small")) as db:
        hta_only = launches(db).notes
        every = launches(db, LaunchOptions(all_launches=True))
    left_out = sum(1 for _ in plain_launches(trace_file("tracelens_h100_bert_small"), OTHER_CALLS))
    assert left_out > 0 and every.notes == []
    assert hta_only == [f"{left_out} of {every.frame['launches'].sum()} launches are by calls HTA does not count "
                        "(cuLaunchKernel, cuLaunchKernelEx, hip*; HTA counts cudaLaunchKernel, cudaLaunchKernelExC, "
                        "cudaMemcpyAsync, cudaMemsetAsync): left out, --all-launches counts them"]


def test_amd_trace_only_with_all_launches() -> None:
    """HTA counts no hip* call: the MI250 trace has no launches by its rule, all of them with ours."""
    path = trace_file("hta_amd_mi250")
    expected = plain_launches(path, OTHER_CALLS)
    with tr.open(path) as db:
        hta_rule = launches(db)
        every = launches(db, LaunchOptions(all_launches=True, steps_only=False, per_launch=True))
    assert hta_rule.frame.empty and any("no GPU operations launched" in n for n in hta_rule.notes)
    assert len(expected) > 0 and len(every.frame) == len(expected)
    assert sorted(every.frame["correlation"]) == sorted(r["correlation"] for r in expected)
    assert every.frame["launch_name"].str.startswith("hip").all()


@pytest.mark.slow
def test_plain_python_pass_with_step_selection() -> None:
    """The A100 DDP trace has 3 ProfilerSteps: HTA keeps launches before the last one starts."""
    check_plain_python("hta_a100_ddp_nccl", all_launches=False)
    with tr.open(trace_file("hta_a100_ddp_nccl")) as db:
        kept = launches(db)
        every = launches(db, LaunchOptions(steps_only=False))
    n_kept, n_all = kept.frame["launches"].sum(), every.frame["launches"].sum()
    assert n_kept < n_all == len(plain_launches(trace_file("hta_a100_ddp_nccl"), HTA_CALLS, steps_only=False))
    assert kept.notes[0].startswith(f"HTA's selection: {n_kept} of {n_all} launches")


# ------------------------------------------------------------------ per launch, options, errors

def test_per_launch_rows_and_flags() -> None:
    path = trace_file("hta_step_based_trace_gp100")  # integer µs, no ProfilerStep: every launch
    expected = {r["correlation"]: r for r in plain_launches(path, HTA_CALLS)}
    with tr.open(path) as db:
        rows = launches(db, LaunchOptions(per_launch=True, runtime_cutoff_us=10, launch_delay_cutoff_us=1)).frame
    assert list(rows.columns) == PER_LAUNCH_COLUMNS
    assert sorted(rows["correlation"]) == sorted(expected) and rows["launch_ts_us"].is_monotonic_increasing
    for _, row in rows.iterrows():
        e = expected[row["correlation"]]
        assert [row[c] for c in ("launch_us", "gpu_dur_us", "delay_us")] == [e["launch_us"], e["gpu_dur_us"],
                                                                           e["delay_us"]]
        assert row["runtime_outlier"] == (e["launch_us"] > 10)
        assert row["delay_outlier"] == (e["delay_us"] > 1)
        assert row["short_kernel"] == (e["launch_us"] <= 10 and e["gpu_dur_us"] < e["launch_us"])
    assert rows["runtime_outlier"].any() and rows["delay_outlier"].any() and rows["short_kernel"].any()


def test_bad_options_are_usage_errors() -> None:
    with tr.open(trace_file("kineto_gpu_metrics_input")) as db:
        with pytest.raises(UsageError, match="no trace of rank 3"):
            launches(db, LaunchOptions(rank=3))
        with pytest.raises(UsageError, match="cutoff must be 0"):
            launches(db, LaunchOptions(runtime_cutoff_us=-1))


def test_cli_launches() -> None:
    path = trace_file("kineto_gpu_metrics_input")
    with tr.open(path) as db:
        expected = launches(db).frame
    ok = invoke(["launches", path, "-f", "json"])
    assert ok.exit_code == 0, ok.output
    rows = json.loads(ok.stdout)  # nothing but our rows on stdout
    assert [r["name"] for r in rows] == list(expected["name"])
    assert [r["delay_mean_us"] for r in rows] == pytest.approx(list(expected["delay_mean_us"]), abs=TOL_US)
    per_launch = invoke(["launches", path, "--per-launch", "-f", "json", "--limit", "3"])
    assert per_launch.exit_code == 0 and len(json.loads(per_launch.stdout)) == 3
    assert set(json.loads(per_launch.stdout)[0]) == set(PER_LAUNCH_COLUMNS)
    bad_rank = invoke(["launches", path, "--rank", "7"])
    assert bad_rank.exit_code == 2 and bad_rank.stderr.splitlines()[-1] == "Error: no trace of rank 7 (ranks: 0)"
    missing = invoke(["launches", TRACES / "no_such_trace.json"])
    assert missing.exit_code != 0 and "Traceback" not in missing.output
    help_text = invoke(["launches", "--help"])
    assert help_text.exit_code == 0 and "trace-report launches" in help_text.stdout


QUEUE_CALLS = HTA_CALLS | {"cuLaunchKernel", "cuLaunchKernelEx", "hipLaunchKernel", "hipExtModuleLaunchKernel",
                           "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream"}
"""HTA's queue-length launch calls (hta/common/trace_symbol_table.py, get_runtime_launch_events_mask)."""


def test_launch_calls_are_defined_once() -> None:
    """View launch_calls gives HTA's two sets of launch calls (stats, queue) and every launch call;
    no other SQL or Python file of the package spells a launch call's name in a list of its own."""
    import duckdb

    from trace_report.store.views import create_views

    con = duckdb.connect()
    create_views(con, only=["launch_calls"], record=False)
    rows = con.execute("SELECT name, hta_stats, hta_queue FROM launch_calls").fetchall()
    assert {n for n, s, _ in rows if s} == HTA_CALLS
    assert {n for n, _, q in rows if q} == QUEUE_CALLS
    assert {n for n, _, _ in rows} == HTA_CALLS | OTHER_CALLS
    package = Path(tr.__file__).parent
    spelled = [p.relative_to(package).as_posix() for p in sorted(package.rglob("*"))
               if p.suffix in (".sql", ".py") and "'cudaLaunchKernelExC'" in p.read_text()
               or p.suffix == ".py" and '"cudaLaunchKernelExC"' in p.read_text()]
    assert spelled == ["analyses/hta/__init__.py", "store/sql/views_launches.sql"]  # the bridge: HTA's own list
