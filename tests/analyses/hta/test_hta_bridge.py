"""HTA (traceinsight) through trace-report: temporal, idle and launch analyses on real traces, our
numbers against HTA's, and clear errors where HTA cannot help."""

from __future__ import annotations

import gzip
import json
import math
import shutil

import pytest
from advise_traces import union
from conftest import TRACES, invoke

import trace_report as tr
from trace_report.analyses.common.utilization import gpu_timeline
from trace_report.analyses.hta import HtaOptions, hta_idle, hta_launch_stats, hta_temporal
from trace_report.errors import InputError

pytest.importorskip("hta")

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

GPU_OPS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
A100 = TRACES / "hta_a100_ddp_nccl" / "nccl_data.json.gz"
DLRM = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"


def a100_gpu_ops() -> list[dict]:
    with gzip.open(A100, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_OPS]


@pytest.fixture(scope="module")
def a100_temporal():
    return hta_temporal([A100], HtaOptions(include_last_step=True))


def test_idle_time_agrees_with_hta(a100_temporal):
    """Our GPU idle time vs HTA's temporal breakdown on the A100 DDP trace.

    HTA rounds float (ns-resolution) timestamps to integer µs, start up and end down
    (hta.common.trace_parser.round_down_time_stamps), so every merged busy interval and the span
    can shrink by < 2 µs: |ours - HTA| <= 2 µs x (merged busy intervals + 1).
    """
    with tr.open(A100) as db:
        ours = gpu_timeline(db).iloc[0]
    hta = a100_temporal.iloc[0]
    ops = a100_gpu_ops()
    n_merged = len(union([(e["ts"], e["ts"] + e["dur"]) for e in ops]))
    assert abs(ours["idle_us"] - hta["idle_us"]) <= 2.0 * (n_merged + 1)
    assert abs(ours["span_us"] - hta["span_us"]) <= 2.0
    # and the rounding explains the whole difference: HTA's numbers, reproduced in plain Python
    rounded = [(math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"])) for e in ops]
    busy = sum(b - a for a, b in union([(a, b) for a, b in rounded if b > a]))
    span = max(b for _, b in rounded) - min(a for a, _ in rounded)
    assert hta["span_us"] == span and hta["idle_us"] == span - busy


def test_integer_us_ranks_agree_exactly():
    """The 8-rank DLRM archive has integer-µs timestamps: no rounding, identical idle time per rank."""
    hta = hta_temporal([DLRM], HtaOptions(include_last_step=True)).set_index("rank")
    with tr.open(DLRM) as db:
        ours = gpu_timeline(db).set_index("rank")
    assert sorted(hta.index) == list(range(8))
    for rank in hta.index:
        assert ours.loc[rank, "idle_us"] == pytest.approx(hta.loc[rank, "idle_us"], abs=1e-6)
        assert ours.loc[rank, "span_us"] == pytest.approx(hta.loc[rank, "span_us"], abs=1e-6)
    one = hta_temporal([DLRM], HtaOptions(ranks=(5,), include_last_step=True))
    assert list(one["rank"]) == [5] and one["idle_us"].iloc[0] == hta.loc[5, "idle_us"]


def test_capitalised_2021_trace_agrees_exactly():
    """HTA reads the 2021 ResNet-50 trace (Operator/Runtime/Kernel categories, no rank: 0)."""
    path = TRACES / "kineto_rn50_nw4_2021jun"
    hta = hta_temporal([path], HtaOptions(include_last_step=True)).iloc[0]
    with tr.open(path) as db:
        ours = gpu_timeline(db).iloc[0]
    assert hta["rank"] == 0
    assert ours["idle_us"] == pytest.approx(hta["idle_us"], abs=1e-6)
    assert ours["span_us"] == pytest.approx(hta["span_us"], abs=1e-6)


def test_idle_breakdown_per_stream(a100_temporal):
    idle = hta_idle([A100], HtaOptions(include_last_step=True))
    streams = {int((e.get("args") or {}).get("stream", -1)) for e in a100_gpu_ops()}
    assert set(idle["stream"]) <= streams and set(idle["idle_category"]) <= {"host_wait", "kernel_wait", "other"}
    per_stream = idle.groupby("stream")["idle_us"].sum()
    assert (per_stream <= a100_temporal["span_us"].iloc[0]).all()


def test_launch_stats_count_every_launched_gpu_op():
    with gzip.open(A100, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    launched = {(e.get("args") or {}).get("correlation") for e in events if e.get("cat") in RUNTIME}
    ops = [e for e in events if e.get("cat") in GPU_OPS and e["args"].get("correlation") in launched]
    summary = hta_launch_stats([A100], HtaOptions(include_last_step=True))
    per_launch = hta_launch_stats([A100], HtaOptions(include_last_step=True), per_launch=True)
    assert summary["launches"].iloc[0] == len(per_launch) == len(ops)
    shorter = int((per_launch["gpu_us"] < per_launch["cpu_us"]).sum())
    assert summary["gpu_shorter_than_launch"].iloc[0] == shorter


def test_cpu_only_and_missing_rank_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no GPU kernels"):
        hta_temporal([TRACES / "hta_cpu_only"])
    with pytest.raises(InputError, match="no trace of rank 0"):
        hta_temporal([TRACES / "hta_cpu_only"], HtaOptions(ranks=(0,)))
    # two traces that both say rank 0 (no distributedInfo, worker0 file names)
    for i, folder in enumerate(("kineto_rn50_nw4_2021feb", "kineto_rn50_nw4_2021jun")):
        (src,) = (TRACES / folder).glob("*.json.gz")
        shutil.copy(src, tmp_path / f"run{i}.worker0.pt.trace.json.gz")
    with pytest.raises(InputError, match="both rank 0"):
        hta_temporal([tmp_path])




def test_cli_hta(a100_temporal):
    ok = invoke(["hta", "temporal", str(A100), "--include-last-step", "-f", "json"])
    assert ok.exit_code == 0, ok.output
    (row,) = json.loads(ok.stdout)  # nothing but our rows on stdout
    assert row["idle_us"] == a100_temporal["idle_us"].iloc[0]
    bad = invoke(["hta", "idle", str(TRACES / "hta_cpu_only")])
    assert bad.exit_code == 1 and bad.stderr.startswith("Error:")
