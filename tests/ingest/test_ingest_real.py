"""Ingest every real trace in ../shared and compare with MANIFEST.tsv and a plain-JSON pass."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from conftest import TRACES, events_of, kernel_stats, load_json, manifest_rows, shared_or_skip, tar_ranks, trace_file

import trace_report as tr

TRACE_ROWS = [r for r in manifest_rows() if r["dir"].startswith("traces/") and r["events"]]


@pytest.mark.parametrize("row", TRACE_ROWS, ids=[r["dir"].split("/")[-1] for r in TRACE_ROWS])
def test_counts_match_manifest(row: dict[str, str]) -> None:
    shared_or_skip()
    name = row["dir"].split("/")[-1]
    path = trace_file(name)  # MANIFEST facts are for the first file (control.json.gz for trace_diff)
    with tr.open(path) as db:
        n_events, n_kernels = db.con.execute("SELECT n_events, n_kernels FROM traces").fetchone()
        count, total = db.con.execute("SELECT count(*), coalesce(sum(dur_us), 0) FROM kernels").fetchone()
        steps = db.con.execute("SELECT count(DISTINCT step) FROM steps").fetchone()[0]
    assert n_events == int(row["events"])
    assert count == n_kernels == int(row["kernels"])
    assert total == pytest.approx(float(row["kernel_total_us"] or 0), rel=1e-4, abs=1e-6)
    # MANIFEST counts ProfilerStep#N user annotations; 2020/2021 traces record them as Operators.
    xs = [e for e in events_of(load_json(path)) if e.get("ph") == "X"]
    independent = {e["name"] for e in xs if str(e.get("name", "")).startswith("ProfilerStep#")
                   and e.get("cat") in ("user_annotation", "cpu_op", "Operator")}
    assert steps == len(independent)
    if row["profiler_steps"] and int(row["profiler_steps"]):
        assert steps == int(row["profiler_steps"])


def test_every_complete_event_is_stored(shared: Path) -> None:
    path = trace_file("hta_trace_diff")
    doc = load_json(path)
    xs = [e for e in events_of(doc) if e.get("ph") == "X"]
    with tr.open(path) as db:
        rows = db.con.execute("SELECT count(*), sum(dur_us), count(DISTINCT event_id) FROM events").fetchone()
        cats = dict(db.con.execute("SELECT cat, count(*) FROM events GROUP BY 1").fetchall())
    assert rows[0] == rows[2] == len(xs)
    assert rows[1] == pytest.approx(sum(e["dur"] for e in xs))
    expected = defaultdict(int)
    for e in xs:
        expected[e["cat"]] += 1
    assert cats == dict(expected)


def test_capitalised_categories_are_normalised(shared: Path) -> None:
    path = trace_file("kineto_rn50_nw4_2021jun")
    doc = load_json(path)
    xs = [e for e in events_of(doc) if e.get("ph") == "X"]
    memory = [e for e in events_of(doc) if e.get("ph") == "i" and e.get("name") == "[memory]"]
    legacy = {"Kernel": "kernel", "Operator": "cpu_op", "Runtime": "cuda_runtime",
              "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}
    expected = defaultdict(int)
    for e in xs:
        expected[legacy.get(e["cat"], e["cat"])] += 1
    expected["cpu_instant_event"] += len(memory)  # allocator events are kept, with dur 0
    with tr.open(path) as db:
        cats = dict(db.con.execute("SELECT cat, count(*) FROM events GROUP BY 1").fetchall())
        streams = db.con.execute("SELECT DISTINCT stream FROM kernels").fetchall()
        linked = db.con.execute(
            "SELECT count(*) FILTER (WHERE launch_event_id IS NOT NULL), count(*) FROM kernels").fetchone()
        ext = db.con.execute("SELECT count(*) FROM events WHERE cat = 'kernel' AND external_id IS NULL").fetchone()[0]
    assert cats == dict(expected)
    assert streams == [(7,)]  # the 2021 'tid': 'stream 7' form
    launches = {e["args"]["correlation"] for e in xs if e["cat"] == "Runtime" and "correlation" in e.get("args", {})}
    kernels_linked = sum(1 for e in xs if e["cat"] == "Kernel" and e["args"].get("correlation") in launches)
    assert linked[0] == kernels_linked and linked[1] == 8868
    assert ext == 0  # 'external id' (lower case) is read too


def test_ns_resolution_timestamps_keep_fractions(shared: Path) -> None:
    path = trace_file("hta_ns_resolution")
    doc = load_json(path)
    first = next(e for e in events_of(doc) if e.get("ph") == "X" and e.get("cat") == "kernel")
    with tr.open(path) as db:
        ts, dur = db.con.execute(
            "SELECT ts_us, dur_us FROM kernels ORDER BY event_id LIMIT 1").fetchone()
    assert (ts, dur) == (first["ts"], first["dur"])


def test_rocm_trace_links_hip_launches(shared: Path) -> None:
    path = trace_file("tracelens_mi300_bert_small")
    with tr.open(path) as db:
        names = {n for (n,) in db.con.execute("SELECT DISTINCT launch_name FROM kernels").fetchall()}
        unlinked = db.con.execute("SELECT count(*) FROM kernels WHERE launch_event_id IS NULL").fetchone()[0]
        device = db.con.execute("SELECT device_name FROM traces").fetchone()[0]
    assert names and all(n.startswith("hip") for n in names)
    assert unlinked == 0
    assert device == "AMD Instinct MI300X VF"


def test_rank_directory_from_tar_archive(shared: Path) -> None:
    archive = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
    expected = {rank: kernel_stats(events) for rank, events in tar_ranks(archive).items()}
    with tr.open(archive) as db:
        got = {r: (n, t) for r, n, t in db.con.execute(
            "SELECT t.rank, count(*), sum(k.dur_us) FROM kernels k JOIN traces t USING (trace_id) GROUP BY 1"
        ).fetchall()}
        world = db.con.execute("SELECT DISTINCT world_size FROM traces").fetchall()
    assert sorted(got) == list(range(8)) == sorted(expected)
    for rank, (n, total) in expected.items():
        assert got[rank][0] == n
        assert got[rank][1] == pytest.approx(total)
    assert world == [(8,)]


def test_mangled_names_are_demangled_and_kept(shared: Path) -> None:
    path = trace_file("hta_a100_ddp_nccl")
    with tr.open(path) as db:
        mangled = db.con.execute("SELECT count(*) FROM events WHERE starts_with(name, '_Z')").fetchone()[0]
        pairs = db.con.execute("SELECT name, raw_name FROM kernel_names").fetchall()
    assert mangled == 0
    assert pairs and all(raw.startswith("_Z") and not name.startswith("_Z") for name, raw in pairs)
    assert any("cutlass_cudnn_train::Kernel<" in name for name, _ in pairs)


def test_device_and_rank_facts(shared: Path) -> None:
    with tr.open(trace_file("hta_a100_ddp_nccl")) as db:
        row = db.con.execute("SELECT rank, rank_source, world_size, device_name, compute_capability, schema_version "
                     "FROM traces").fetchone()
    assert row == (0, "distributedInfo", 2, "NVIDIA A100-PG509-200", "8.0", "1")
    with tr.open(trace_file("kineto_gpu_metrics_input")) as db:  # 2021 'computeProperties'
        row = db.con.execute("SELECT device_name, compute_capability, rank_source FROM traces").fetchone()
    assert row == ("Tesla V100-DGXS-32GB", "7.0", "default")


def test_memory_events_reach_the_memory_advice(shared: Path) -> None:
    """[memory] instant events are kept, so advise's memory check runs on a real trace."""
    from trace_report.analyses.advise import Thresholds, advise

    path = trace_file("tracelens_h100_timesformer")
    doc = load_json(path)
    mem = [e["args"] for e in events_of(doc) if e.get("ph") == "i" and e.get("name") == "[memory]"
           and e["args"].get("Device Id", -1) >= 0]
    peak = max(a["Total Allocated"] for a in mem)
    capacity = next(p["totalGlobalMem"] for p in doc["deviceProperties"] if p["id"] == mem[0]["Device Id"])
    with tr.open(path) as db:
        quiet = advise(db)
        loud = advise(db, thresholds=Thresholds(memory_pct=0.0))
    assert "memory_near_capacity" not in set(quiet.frame["finding"])
    row = loud.frame[loud.frame["finding"] == "memory_near_capacity"].iloc[0]
    assert row["value"] == pytest.approx(100 * peak / capacity, rel=1e-3)
