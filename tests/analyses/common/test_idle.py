"""GPU idle time per stream by cause (views gpu_idle_gaps / gpu_idle_breakdown, analyses/common/idle.py):
equal to HTA's get_idle_time_breakdown on the shared traces, and to a plain pass over the JSON."""

from __future__ import annotations

import json
import math
import tarfile
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import GPU_OP_CATS, RUNTIME_CATS, TRACES, events_of, load_json, trace_file

import trace_report as tr
from trace_report.analyses.common.idle import CONSECUTIVE_KERNEL_DELAY_US, IDLE_CATEGORIES, IDLE_COLUMNS, idle_breakdown
from trace_report.errors import UsageError

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

slow = pytest.mark.slow
# Every shared trace with GPU operations that HTA loads (a folder's first file, or a file in it);
# the ones under a second each run by default, the others (HTA takes 1-5 s to load them) are slow.
# Left out: hta_cpu_only, hta_cupti_counters and zoology_a100_no_kernels (no GPU operations: HTA
# refuses them), tracelens_mi300_torch_compile_triton (HTA's parser fails on it: TypeError in
# transform_correlation_to_index).
HTA_TRACES = [
    "hta_amd_mi250",
    "hta_step_based_trace_gp100",  # no ProfilerStep: HTA keeps every operation
    "hta_triton_example",  # one kernel: no gap
    "kineto_gpu_metrics_input",
    "tracelens_h100_bert_small",
    "tracelens_h100_falconsai_vit",
    "tracelens_mi300_bert_small",
    pytest.param("hta_a100_ddp_nccl", marks=slow),
    pytest.param("hta_ns_resolution", marks=slow),  # ns-resolution float timestamps
    pytest.param("hta_trace_diff", marks=slow),  # control.json.gz
    pytest.param("hta_trace_diff/test.json.gz", marks=slow),
    pytest.param("kineto_rn50_autograd_api_nw0", marks=slow),
    pytest.param("kineto_rn50_nw4_2021feb", marks=slow),
    pytest.param("kineto_rn50_nw4_2021jun", marks=slow),  # 2021 capitalised categories
    pytest.param("param_dlrm_kineto_v100x8/dlrm_kineto.tar.gz", marks=slow),  # 8 ranks, one step each
    pytest.param("param_linear_kineto_2080ti", marks=slow),
    pytest.param("tracelens_b200_vllm_eager", marks=slow),
    pytest.param("tracelens_h100_timesformer", marks=slow),
    pytest.param("tracelens_mi300_resnet18_ddp_train", marks=slow),
]
KEYS = ["rank", "stream", "idle_category"]


def shared_path(name: str) -> Path:
    return TRACES / name if "/" in name else trace_file(name)


def first_event_ts(path: Path) -> dict[int | None, float | None]:
    """``ts`` of ``traceEvents[0]`` per rank (key None for a single file): HTA's row 0."""
    def ts(doc: Any) -> float | None:
        value = events_of(doc)[0].get("ts")
        return None if value is None else float(value)

    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            docs = [json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")]
        return {doc["distributedInfo"]["rank"]: ts(doc) for doc in docs}
    return {None: ts(load_json(path))}


def as_hta_classifies(db: tr.TraceDB, path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our gaps in HTA's selection and rounding summed per rank, stream and category: as our rule
    classifies them, and with HTA's one departure from its own rule. A GPU operation with a
    correlation but no launch call (a kernel launched before the trace began) joins HTA's row 0,
    the trace's first event, as its "runtime" (``index_correlation`` falls back to 0), so its gap
    is ``host_wait`` when that event starts after the previous operation ends. Our views never
    call such a gap ``host_wait``."""
    gaps = db.con.execute("""
        SELECT t.rank, g.*, e.correlation
        FROM gpu_idle_gaps_of(true, true) g JOIN traces t USING (trace_id)
        JOIN gpu_ops e ON e.trace_id = g.trace_id AND e.event_id = g.event_id""").df()
    ours = gaps.groupby(KEYS, as_index=False)["idle_us"].sum()
    orphan = gaps["launch_ts_us"].isna() & gaps["correlation"].notna()
    if orphan.any():
        first = first_event_ts(path)
        row0 = gaps["rank"].map(lambda r: first.get(r, first.get(None)))
        row0 = row0.map(lambda v: math.nan if v is None else math.ceil(v))
        gaps.loc[orphan & (row0 > gaps["prev_end_us"]), "idle_category"] = "host_wait"
    return ours, gaps.groupby(KEYS, as_index=False)["idle_us"].sum()


@pytest.mark.parametrize("name", HTA_TRACES)
def test_idle_breakdown_equals_hta(name: str) -> None:
    """``idle_breakdown(steps_only=True, hta_rounding=True)`` = HTA's ``get_idle_time_breakdown``.

    Tolerance: exact (1e-6 µs) per rank, stream and category. With HTA's selection (steps_only) and
    its whole-µs rounding (ts up, end down, launch start up) every gap is a difference of whole µs,
    computed from the same events and the same 30 µs threshold. Ties of start times would be the
    only other source of a difference (ordered by file position here; HTA's sort is not stable):
    none of these traces has one within a stream.
    ``idle_ratio``: HTA rounds it to two decimals, so within 0.005. HTA lists ``other`` with 0 µs
    for every stream (its first operation is an ``other`` "gap" of NaN µs); we have no row there.

    The one place where HTA does not follow its rule: gaps before operations with a correlation and
    no launch call (only in DLRM ranks 1 and 3, stream 7: 63 gaps each, 93 and 83 µs that HTA calls
    ``host_wait`` and we ``kernel_wait``), see :func:`as_hta_classifies`; the per-stream totals are
    equal there too.
    """
    pytest.importorskip("hta")
    from trace_report.analyses.hta import hta_idle

    path = shared_path(name)
    hta = hta_idle([path])
    with tr.open(path) as db:
        ours = idle_breakdown(db, steps_only=True, hta_rounding=True)
        gap_sums, as_hta = as_hta_classifies(db, path)
    assert set(ours["idle_category"]) <= set(IDLE_CATEGORIES)  # empty with one operation per stream
    # the breakdown is the sums of the gaps
    ordered = ours.sort_values(KEYS).reset_index(drop=True)
    assert ordered[KEYS].values.tolist() == gap_sums[KEYS].values.tolist()
    assert ordered["idle_us"].to_numpy() == pytest.approx(gap_sums["idle_us"].to_numpy(), abs=1e-6)
    merged = hta.merge(as_hta, on=KEYS, how="outer", suffixes=("_hta", "_ours"), indicator=True)
    assert not (merged["_merge"] == "right_only").any(), merged[merged["_merge"] == "right_only"]
    missing = merged[merged["_merge"] == "left_only"]
    assert (missing["idle_category"].eq("other") & missing["idle_us_hta"].eq(0)).all(), missing
    both = merged[merged["_merge"] == "both"]
    assert both["idle_us_ours"].to_numpy() == pytest.approx(both["idle_us_hta"].to_numpy(), abs=1e-6)
    # per stream the totals need no adjustment at all
    totals = [f.groupby(["rank", "stream"])["idle_us"].sum() for f in (ours, hta)]
    assert totals[0].to_numpy() == pytest.approx(totals[1].loc[totals[0].index].to_numpy(), abs=1e-6)
    # where the sums are HTA's, so are the ratios (HTA's rounded to 0.01)
    same = ours.merge(hta, on=KEYS, suffixes=("", "_hta"))
    same = same[(same["idle_us"] - same["idle_us_hta"]).abs().le(1e-6) & same["idle_ratio"].notna()]
    assert same["idle_ratio"].to_numpy() == pytest.approx(same["idle_ratio_hta"].to_numpy(), abs=0.005 + 1e-9)


def plain_gaps(path: Path) -> dict[tuple[int, str], tuple[int, float]]:
    """(stream, category) -> (gaps, idle µs) over every GPU operation, by a plain pass over the JSON:
    the launch is the first runtime call in file order with the operation's correlation."""
    events = [e for e in events_of(load_json(path)) if e.get("ph") == "X"]
    launch: dict[int, float] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in RUNTIME_CATS and corr is not None and corr not in launch:
            launch[corr] = float(e["ts"])
    per_stream: dict[int, list[tuple[float, int, float, float | None]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("cat") not in GPU_OP_CATS:
            continue
        args = e.get("args") or {}
        stream = args.get("stream")
        if stream is None and str(e.get("tid", "")).startswith("stream "):
            stream = int(str(e["tid"]).split()[1])
        if stream is None:
            continue
        ts, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        per_stream[int(stream)].append((ts, i, end, launch.get(args.get("correlation"))))
    out: dict[tuple[int, str], tuple[int, float]] = {}
    for stream, ops in per_stream.items():
        ops.sort()
        for (_, _, prev_end, _), (ts, _, _, launched) in pairwise(ops):
            idle = ts - prev_end
            if launched is not None and launched > prev_end:
                category = "host_wait"
            elif idle < CONSECUTIVE_KERNEL_DELAY_US:
                category = "kernel_wait"
            else:
                category = "other"
            n, total = out.get((stream, category), (0, 0.0))
            out[(stream, category)] = (n + 1, total + idle)
    return out


@pytest.mark.parametrize("name", ["hta_amd_mi250", "hta_a100_ddp_nccl", "hta_ns_resolution",
                                  "param_dlrm_kineto_v100x8"])
def test_gaps_equal_a_plain_pass_over_the_json(name: str, tmp_path: Path) -> None:
    """Every GPU operation, no selection, no rounding: gaps per stream and category (count and µs,
    the trace's own float µs, so to 1e-9 relative) as a plain pass computes them. Rank 1 of the
    DLRM archive has GPU operations without a launch call (never host_wait)."""
    if name == "param_dlrm_kineto_v100x8":
        with tarfile.open(TRACES / name / "dlrm_kineto.tar.gz") as tar:
            member = next(m for m in tar.getmembers() if m.isfile() and Path(m.name).name.startswith("worker1_"))
            path = tmp_path / "rank-1.json"
            path.write_bytes(tar.extractfile(member).read())
    else:
        path = trace_file(name)
    expected = plain_gaps(path)
    with tr.open(path) as db:
        rows = db.con.execute("""SELECT stream, idle_category, count(*) AS n, sum(idle_us) AS idle_us,
                                        sum((ts_us - prev_end_us = idle_us)::INT) AS consistent
                                 FROM gpu_idle_gaps GROUP BY ALL""").fetchall()
        breakdown = idle_breakdown(db)
        assert db.scalar("SELECT count(*) FROM gpu_idle_gaps") == db.scalar(
            "SELECT count(*) - count(DISTINCT stream) FROM gpu_ops WHERE stream IS NOT NULL")
    got = {(int(s), c): (n, total) for s, c, n, total, _ in rows}
    assert all(n == ok for _, _, n, _, ok in rows)
    assert set(got) == set(expected) and expected
    for key, (n, total) in expected.items():
        assert got[key][0] == n, key
        assert got[key][1] == pytest.approx(total, rel=1e-9, abs=1e-6), key
    sums = breakdown.set_index(["stream", "idle_category"])["idle_us"]
    assert {k: sums[k] for k in got} == pytest.approx({k: v[1] for k, v in got.items()})
    ratio = breakdown.groupby("stream")["idle_ratio"].sum()
    assert ratio.to_numpy() == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["hta_cpu_only", "zoology_a100_no_kernels", "hta_cupti_counters"])
def test_no_gpu_operations_no_rows(name: str) -> None:
    """CPU-only (and GPU-activity-missing) traces: the views exist and are empty, no error."""
    with tr.open(trace_file(name)) as db:
        assert db.scalar("SELECT count(*) FROM gpu_idle_gaps") == 0
        assert db.scalar("SELECT count(*) FROM gpu_idle_breakdown") == 0
        for steps_only in (False, True):
            frame = idle_breakdown(db, steps_only=steps_only, hta_rounding=steps_only)
            assert frame.empty and list(frame.columns) == IDLE_COLUMNS


def test_rank_filter_and_unknown_rank() -> None:
    with tr.open(trace_file("hta_amd_mi250")) as db:
        everything = idle_breakdown(db)
        assert idle_breakdown(db, 0).equals(everything)
        with pytest.raises(UsageError, match="no trace of rank 3"):
            idle_breakdown(db, 3)
    assert list(everything.columns) == IDLE_COLUMNS
    # 15 gaps on stream 0, every launch after the previous operation ended: all host_wait
    assert everything[["stream", "idle_category"]].values.tolist() == [[0, "host_wait"]]
    assert everything["idle_ratio"].tolist() == [1.0]


@pytest.mark.parametrize("name", ["hta_a100_ddp_nccl", "param_dlrm_kineto_v100x8"])
def test_steps_only_is_steps_only_gpu_ops(name: str) -> None:
    """The selection of ``gpu_idle_gaps_of(true, ...)`` is view ``steps_only_gpu_ops`` (one rule for
    every analysis), plus, in traces with fewer than two ProfilerSteps (DLRM: one per rank), the GPU
    operations without a launch call, which HTA keeps there."""
    with tr.open(TRACES / name) as db:
        db.con.execute("""
            CREATE TEMP TABLE hta_selection AS
            SELECT trace_id, event_id, stream FROM steps_only_gpu_ops
            UNION ALL
            SELECT g.trace_id, g.event_id, g.stream FROM gpu_ops g
            LEFT JOIN kernel_launches l ON l.trace_id = g.trace_id AND l.correlation = g.correlation
            WHERE l.launch_ts_us IS NULL AND g.trace_id NOT IN (SELECT trace_id FROM last_step_starts)""")
        launchless = db.scalar("SELECT count(*) FROM hta_selection") - db.scalar(
            "SELECT count(*) FROM steps_only_gpu_ops")
        outside = db.scalar("""SELECT count(*) FROM gpu_idle_gaps_of(true, false)
                               WHERE (trace_id, event_id) NOT IN (SELECT (trace_id, event_id) FROM hta_selection)""")
        # every selected operation but the first of each stream has a gap
        expected = db.scalar("""SELECT count(*) - count(DISTINCT (trace_id, stream)) FROM hta_selection
                                WHERE stream IS NOT NULL""")
        assert outside == 0
        assert db.scalar("SELECT count(*) FROM gpu_idle_gaps_of(true, false)") == expected
        assert (launchless > 0) == (name == "param_dlrm_kineto_v100x8")
