"""collectives: algbw/busbw over the transfer time (the kernel time after the last peer's kernel
started), the wait apart, and the basis of each row said in ``bw_basis``.

Checked against an independent plain-Python pass over the 8-rank DLRM job's JSON (each rank's NCCL
kernels paired in sequence order; the message size from the ``nccl:<collective>`` annotation around
the launch call) and on constructed traces whose transfer times and nccl-tests factors are known by
hand (NVIDIA/nccl-tests doc/PERFORMANCE.md, src/alltoall.cu: 2(n-1)/n, (n-1)/n, 1).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import trace_report as tr
from tests.conftest import TRACES, shared_or_skip, tar_ranks
from trace_report.analyses.collectives import CollectivesOptions, collectives

DLRM = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
ELEM_BYTES = {"float": 4, "int": 4, "long int": 8}
NCCL_FACTOR_8 = {"allreduce": 1.75, "alltoall": 0.875}  # 2(n-1)/n and (n-1)/n for n = 8, by hand


def _launch_context(events: list[dict[str, Any]]) -> dict[int, tuple[str, int, str]]:
    """correlation -> (collective, bytes, dtype) from the innermost ``nccl:`` annotation around the
    launch call on the launching thread."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    annotations = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:")]
    out = {}
    for corr, launch in launches.items():
        around = [a for a in annotations if (a["pid"], a["tid"]) == (launch["pid"], launch["tid"])
                  and a["ts"] <= launch["ts"] <= a["ts"] + a["dur"]]
        if around:
            a = max(around, key=lambda x: x["ts"])
            dtype = a["args"]["Input type"][0].lower()
            nelems = math.prod(a["args"]["Input Dims"][0])
            out[corr] = (a["name"][5:].replace("_", ""), nelems * ELEM_BYTES[dtype], dtype)
    return out


def _dlrm_kernels(ranks: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every rank's NCCL kernels with wait_us (last peer's start - own start) and transfer_us (own
    end - last peer's start), the i-th kernel of each rank paired with its peers' i-th."""
    per_rank = {r: sorted((e for e in evs if e.get("cat") == "kernel" and "nccl" in e["name"]),
                          key=lambda e: e["ts"]) for r, evs in ranks.items()}
    assert len({len(ks) for ks in per_rank.values()}) == 1
    out = []
    for r, ks in per_rank.items():
        context = _launch_context(ranks[r])
        for i, k in enumerate(ks):
            last = max(per_rank[q][i]["ts"] for q in per_rank)
            kind, size, dtype = context[k["args"]["correlation"]]
            out.append({"rank": r, "collective": kind, "bytes": size, "dtype": dtype, "dur": float(k["dur"]),
                        "wait": float(last - k["ts"]), "transfer": float(k["ts"] + k["dur"] - last)})
    return out


@pytest.fixture(scope="module")
def dlrm_json() -> list[dict[str, Any]]:
    shared_or_skip()
    return _dlrm_kernels(tar_ranks(DLRM))


@pytest.fixture(scope="module")
def dlrm_db():
    shared_or_skip()
    with tr.open(DLRM) as db:
        yield db


def _expected(kernels: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[tuple, dict[str, float]]:
    groups: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for k in kernels:
        g = groups[tuple(k[c] for c in keys)]
        g["count"] += 1
        for c in ("dur", "wait", "transfer", "bytes"):
            g[c] += k[c]
    return groups


@pytest.mark.slow
@pytest.mark.parametrize("by_rank", [False, True])
def test_dlrm_bandwidth_over_transfer_time(dlrm_db, dlrm_json, by_rank):
    """Every row: wait and transfer sums, algbw = bytes / transfer time, busbw = algbw x 2(n-1)/n or
    (n-1)/n (n = 8), per rank and over ranks, equal to the plain pass."""
    assert all(k["transfer"] > 0 for k in dlrm_json)  # one host's clock: no peer starts after an end
    keys = (("rank",) if by_rank else ()) + ("collective", "dtype", "bytes")
    want = _expected(dlrm_json, keys)
    frame = collectives(dlrm_db, CollectivesOptions(by_rank=by_rank)).frame
    got = {tuple(getattr(r, c) for c in keys): r for r in frame.itertuples()}
    assert set(got) == set(want)
    for key, w in want.items():
        row = got[key]
        assert row.bw_basis == "transfer"
        assert row.count == w["count"]
        assert row.time_us == pytest.approx(w["dur"], abs=1e-6)
        assert row.wait_us == pytest.approx(w["wait"], abs=1e-6)
        assert row.transfer_us == pytest.approx(w["transfer"], abs=1e-6)
        assert row.wait_us + row.transfer_us == pytest.approx(row.time_us, abs=1e-6)
        algbw = w["bytes"] / w["transfer"] / 1e3
        assert row.algbw_gbps == pytest.approx(algbw, rel=1e-9)
        assert row.busbw_gbps == pytest.approx(algbw * NCCL_FACTOR_8[key[-3]], rel=1e-9)


@pytest.mark.slow
def test_dlrm_alltoall_is_no_longer_the_wait(dlrm_db):
    """The issue's example: the 24 KiB alltoall read 0.013 GB/s over the whole kernel (29.5 ms of
    which 29.3 ms waiting for the last rank); over its 158 µs of transfer it is 2.49 GB/s."""
    frame = collectives(dlrm_db).frame.set_index(["collective", "bytes"])
    row = frame.loc[("alltoall", 24576)]
    assert row["time_us"] == 29496 and row["wait_us"] == 29338 and row["transfer_us"] == 158
    assert row["algbw_gbps"] == pytest.approx(16 * 24576 / 158 / 1e3)
    assert row["algbw_gbps"] > 100 * 16 * 24576 / 29496 / 1e3


def test_one_rank_keeps_kernel_time_and_says_so(a100):
    """hta_a100_ddp_nccl holds rank 0 of 2 only: no peers, so no wait; bandwidth over the whole
    kernel, labelled, and a note says why."""
    result = collectives(a100)
    frame = result.frame
    assert set(frame["bw_basis"]) == {"kernel (wait unknown)"}
    assert frame["wait_us"].isna().all() and frame["transfer_us"].isna().all()
    for r in frame.itertuples():
        assert r.algbw_gbps == pytest.approx(r.bytes * r.count / r.time_us / 1e3, rel=1e-9)
    assert any("kernel (wait unknown)" in n and "whole kernel" in n for n in result.notes)


# ---------------------------------------------------------------- constructed ranks

KERNELS = {  # collective -> kernel name (NCCL 2.19 spelling)
    "allreduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "allgather": "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "reducescatter": "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "alltoall": "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
    "broadcast": "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "reduce": "ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
}
ARG_NAMES = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter",
             "alltoall": "all_to_all", "broadcast": "broadcast", "reduce": "reduce"}
FACTOR_4 = {"allreduce": 1.5, "allgather": 0.75, "reducescatter": 0.75, "alltoall": 0.75,
            "broadcast": 1.0, "reduce": 1.0}  # nccl-tests' factors for n = 4, by hand
NELEMS = 1_000_000  # float32: 4 MB


def _kernel(kind: str, ts: float, dur: float, corr: int, n: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": KERNELS[kind], "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, "Collective name": ARG_NAMES[kind],
                     "In msg nelems": NELEMS, "Out msg nelems": NELEMS, "dtype": "Float", "Group size": n}}


def write_ranks(folder: Path, kernels: dict[int, list[tuple[str, float, float]]], n: int) -> None:
    """One trace per rank: its (collective, ts_us, dur_us) kernels, with distributedInfo."""
    folder.mkdir()
    for rank, ks in kernels.items():
        events = [_kernel(kind, ts, dur, i + 1, n) for i, (kind, ts, dur) in enumerate(ks)]
        doc = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": n},
               "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], "traceEvents": events}
        (folder / f"rank{rank}.json").write_text(json.dumps(doc))


def test_nccl_factors_on_constructed_ranks(tmp_path):
    """4 ranks; rank r's kernel of each collective starts 10r µs late and all end together at 100 µs:
    wait 10(3 - r), transfer 70 µs on every rank; algbw = 4 MB / 70 µs, busbw by nccl-tests' factor."""
    starts = {kind: 1000.0 * i for i, kind in enumerate(KERNELS)}
    write_ranks(tmp_path / "job", {r: [(k, t + 10 * r, 100 - 10 * r) for k, t in starts.items()] for r in range(4)}, 4)
    with tr.open(tmp_path / "job") as db:
        frame = collectives(db).frame.set_index("collective")
    assert set(frame.index) == set(KERNELS)
    algbw = 4 * NELEMS * 4 / (4 * 70.0) / 1e3  # four kernels' bytes over four 70 µs transfers
    for kind, row in frame.iterrows():
        assert row["bw_basis"] == "transfer" and row["count"] == 4 and row["bytes"] == 4 * NELEMS
        assert row["wait_us"] == pytest.approx(30 + 20 + 10 + 0)
        assert row["transfer_us"] == pytest.approx(4 * 70.0)
        assert row["algbw_gbps"] == pytest.approx(algbw)
        assert row["busbw_gbps"] == pytest.approx(algbw * FACTOR_4[kind])


def test_peer_after_end_and_single_rank(tmp_path):
    """A kernel that ended before its last peer's started (clocks disagree) keeps bandwidth over its
    kernel time in a row of its own; one rank alone has no wait and says so."""
    write_ranks(tmp_path / "job", {0: [("broadcast", 0.0, 20.0)], 1: [("broadcast", 50.0, 30.0)]}, 2)
    with tr.open(tmp_path / "job") as db:
        result = collectives(db, CollectivesOptions(by_rank=True))
    rows = {r.rank: r for r in result.frame.itertuples()}
    assert rows[0].bw_basis == "kernel (peer started after end)" and rows[0].wait_us == 50
    assert math.isnan(rows[0].transfer_us)
    assert rows[0].algbw_gbps == pytest.approx(4 * NELEMS / 20.0 / 1e3)
    assert rows[1].bw_basis == "transfer" and rows[1].wait_us == 0 and rows[1].transfer_us == 30
    assert rows[1].algbw_gbps == pytest.approx(4 * NELEMS / 30.0 / 1e3)
    assert any("1 kernel(s) ended before their last peer's kernel started" in n for n in result.notes)

    write_ranks(tmp_path / "alone", {0: [("allreduce", 0.0, 40.0)]}, 2)
    with tr.open(tmp_path / "alone") as db:
        row = collectives(db).frame.iloc[0]
    assert row["bw_basis"] == "kernel (wait unknown)" and math.isnan(row["transfer_us"])
    assert row["algbw_gbps"] == pytest.approx(4 * NELEMS / 40.0 / 1e3)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 1.0)  # 2(2-1)/2
