"""Nsight inputs through `trace-report ingest`: ncu reports, nsys SQLite exports, kernsum CSVs."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import run_cli, shared_or_skip, trace_file

import trace_report as tr


def nsys_kernels(path: Path) -> tuple[int, float]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        n, total_ns = con.execute("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    finally:
        con.close()
    return n, total_ns / 1000.0


def test_mixed_ingest_into_one_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = shared_or_skip()
    rep = shared / "data/ncu/cutlass_fork_ncu_a100_fullset/report.ncu-rep"
    sqlite_file = shared / "data/nsys/nvfuser_nsys_h100_matmul/report1.sqlite"
    trace = trace_file("hta_amd_mi250")
    db = tmp_path / "mixed.duckdb"
    code, _, err = run_cli(["ingest", str(rep), str(sqlite_file), str(trace), "-o", str(db)], capsys)
    assert code == 0 and "2 trace(s) ingested, 1 Nsight Compute report(s)" in err
    with tr.open(db) as handle:
        per_trace = dict(handle.con.execute(
            "SELECT t.path, count(*) FROM kernels k JOIN traces t USING (trace_id) GROUP BY 1").fetchall())
        nsys_total = handle.con.execute(
            "SELECT sum(dur_us) FROM kernels k JOIN traces t USING (trace_id) WHERE t.path LIKE '%.sqlite'"
        ).fetchone()[0]
        launches = handle.con.execute("SELECT count(*) FROM ncu_kernels").fetchone()[0]
        roofline_rows = handle.con.execute("SELECT count(*) FROM roofline").fetchone()[0]
    n, total = nsys_kernels(sqlite_file)
    assert per_trace[str(sqlite_file)] == n
    assert nsys_total == pytest.approx(total)
    assert launches == 3 and roofline_rows >= 3
    code, again, err = run_cli(["ingest", str(sqlite_file), "-o", str(db)], capsys)
    assert code == 0 and "already ingested" in err


def test_capture_folder_with_ncu_report_needs_no_extra_step(tmp_path: Path) -> None:
    shared = shared_or_skip()
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "run-1", "config": {"batch_size": 8}}))
    (run / "metrics.csv").write_text("epoch,loss\n0,1.0\n")  # not an ncu CSV: must be ignored
    (run / "host_1.1.pt.trace.json.gz").symlink_to(trace_file("hta_amd_mi250"))
    (run / "profile.ncu-rep").symlink_to(shared / "data/ncu/indexspaces_ncu_a40_frb/profile.ncu-rep")
    with tr.open(run) as handle:
        assert handle.con.execute("SELECT run_id, rank_source FROM traces").fetchall() == [("run-1", "run.json")]
        assert handle.con.execute("SELECT count(DISTINCT report_id) FROM ncu_kernels").fetchone()[0] == 1
        assert handle.summary.ncu_reports and handle.summary.ncu_reports[0][1] > 0


def test_kernsum_csv_top_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_or_skip() / "data/nsys/mudock_nsys_kernsum_adt_cuda/nsys_adt_CUDA_Native_gpukernsum.csv"
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    code, out, _ = run_cli(["top-kernels", str(path), "-f", "json"], capsys)
    got = json.loads(out)
    assert code == 0 and len(got) == len(rows) == 6
    assert sum(r["count"] for r in got) == sum(int(r["Instances"]) for r in rows) == 3003
    assert sum(r["total_us"] for r in got) == pytest.approx(sum(int(r["Total Time (ns)"]) for r in rows) / 1000)
