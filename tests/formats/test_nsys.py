"""Nsight Systems readers on the real exports: SQLite -> events rows (checked with plain sqlite3
queries and against the nsys stats output saved beside the export), kernel-summary CSVs."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from conftest import SHARED

from trace_report.analyses.top_kernels import TopKernelsOptions, top_kernels
from trace_report.errors import InputError
from trace_report.formats.nsys import EVENT_SCHEMA, read_kernsum_csv, read_nsys_sqlite
from trace_report.store.database import create_schema, create_views
from trace_report.store.tracedb import TraceDB

NSYS = SHARED / "data" / "nsys"
H100 = NSYS / "nvfuser_nsys_h100_matmul" / "report1.sqlite"
A100 = NSYS / "pipit_nsys_a100_cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite"
KERNSUM = [NSYS / "mudock_nsys_kernsum_adt_cuda" / "nsys_adt_CUDA_Native_gpukernsum.csv",
           NSYS / "mudock_nsys_kernsum_genetic_cuda" / "nsys_genetic_CUDA_Native_gpukernsum.csv"]


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


def q(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
        return con.execute(sql).fetchall()


def as_database(path: Path) -> duckdb.DuckDBPyConnection:
    """The export in the DuckDB schema as trace 1 (what ingest will do with these rows)."""
    facts, table = read_nsys_sqlite(path)
    n = table.num_rows
    rows = table.add_column(0, "trace_id", pa.array([1] * n, pa.int32())).add_column(
        1, "event_id", pa.array(range(n), pa.int64()))
    con = duckdb.connect()
    create_schema(con)
    con.register("nsys_rows", rows)
    if con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'events'").fetchall()[0][0]:
        con.execute("INSERT INTO events BY NAME SELECT * FROM nsys_rows")
    else:  # events became a view over Parquet files: stand in with a table
        con.execute("CREATE OR REPLACE TEMP TABLE events AS SELECT * FROM nsys_rows")
    con.execute("INSERT INTO traces (trace_id, path, rank, device_name, compute_capability) VALUES (1, ?, 0, ?, ?)",
                [str(path), facts["device_name"], facts["compute_capability"]])
    create_views(con)
    return con


@pytest.mark.parametrize("path", [H100, A100], ids=["h100", "a100"])
def test_rows_match_plain_sqlite(path: Path) -> None:
    facts, table = read_nsys_sqlite(need(path))
    assert table.schema == EVENT_SCHEMA
    frame = table.to_pandas()
    counts = frame.groupby("cat").size().to_dict()
    tables = {r[0] for r in q(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    expected = {
        "kernel": q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0],
        "cuda_runtime": q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 0")[0][0],
        "cuda_driver": q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1")[0][0],
        "gpu_memcpy": q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0],
    }
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        expected["gpu_memset"] = q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0][0]
    if "NVTX_EVENTS" in tables:
        expected["user_annotation"] = q(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                                              "AND end IS NOT NULL")[0][0]
    assert counts == {k: v for k, v in expected.items() if v}
    assert facts["n_kernels"] == expected["kernel"] and facts["n_events"] == len(frame)
    total_ns = q(path, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert frame.loc[frame["cat"] == "kernel", "dur_us"].sum() == pytest.approx(total_ns / 1000, rel=1e-12)
    first = q(path, "SELECT k.start, s.value, k.correlationId, k.streamId FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                    "JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start LIMIT 1")[0]
    row = frame[frame["cat"] == "kernel"].iloc[0]
    assert (row["ts_us"], row["name"], row["correlation"], row["stream"]) == (first[0] / 1000, *first[1:])
    assert json.loads(row["args"])["stream"] == first[3]
    assert (frame["dur_us"] >= 0).all() and frame["ts_us"].is_monotonic_increasing


def test_runtime_names_threads_and_nvtx() -> None:
    facts, table = read_nsys_sqlite(need(H100))
    frame = table.to_pandas()
    runtime = frame[frame["cat"] == "cuda_runtime"]
    assert runtime["name"].value_counts()["cudaLaunchKernel"] == 17  # nsys-log.txt cuda_api_sum
    raw = {json.loads(a)["api name"] for a in runtime["args"]}
    assert "cudaLaunchKernel_v7000" in raw
    launcher = q(H100, "SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    assert {str((g >> 24) & 0xFFFFFF) for (g,) in launcher} == set(runtime["pid"])
    assert set(runtime["pid"]) <= {str(p) for (p,) in q(H100, "SELECT pid FROM PROCESSES")}
    nvtx = frame[frame["cat"] == "user_annotation"]
    top = nvtx.loc[nvtx["dur_us"].idxmax()]
    assert top["name"] == "KernelExecutor::compileFusion"
    assert top["dur_us"] == pytest.approx(346690728 / 1000)  # nsys-log.txt nvtx_sum


def test_facts_and_no_environment() -> None:
    facts, _ = read_nsys_sqlite(need(A100))
    assert (facts["device_name"], facts["compute_capability"], facts["host"]) == (
        "NVIDIA A100-SXM4-80GB", "8.0", "nid008553")
    assert facts["schema_version"] == "nsys-sqlite 3.13.2"
    meta = json.loads(facts["metadata"])
    assert len(meta["gpus"]) == 4 and meta["nsys_version"].startswith("2024.5")
    assert "SLURM_" not in facts["metadata"] and "BASH_FUNC" not in facts["metadata"]
    h100, _ = read_nsys_sqlite(need(H100))
    assert (h100["device_name"], h100["compute_capability"]) == ("NVIDIA H100 80GB HBM3", "9.0")


def kern_sum_from_log() -> list[tuple[str, float, int]]:
    text = need(H100.parent / "nsys-log.txt").read_text()
    section = text.split("Executing 'cuda_gpu_kern_sum' stats report")[1].split("Executing")[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\s*([\d.]+)\s+(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+[\d.]+\s+(.+)$", line)
        if m:
            rows.append((m.group(4).rstrip("…"), int(m.group(2)) / 1000, int(m.group(3))))
    return rows


def mem_time_sum_from_log() -> dict[str, tuple[float, int]]:
    """``cuda_gpu_mem_time_sum``: (total µs, count) per top-kernels kind (``[CUDA memcpy ...]`` ->
    memcpy, ``[CUDA memset]`` -> memset)."""
    text = need(H100.parent / "nsys-log.txt").read_text()
    section = text.split("Executing 'cuda_gpu_mem_time_sum' stats report")[1].split("Executing")[0]
    out: dict[str, tuple[float, int]] = {}
    for line in section.splitlines():
        m = re.match(r"\s*[\d.]+\s+(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+[\d.]+\s+\[CUDA (memcpy|memset)", line)
        if m:
            t, c = out.get(m.group(3), (0.0, 0))
            out[m.group(3)] = (t + int(m.group(1)) / 1000, c + int(m.group(2)))
    return out


def test_top_kernels_agree_with_nsys_stats() -> None:
    con = as_database(need(H100))
    rows = top_kernels(TraceDB(con), TopKernelsOptions(limit=None)).frame
    ours = rows[rows["kind"] == "kernel"]  # cuda_gpu_kern_sum: kernels
    log = kern_sum_from_log()
    assert len(log) == 15 and sum(r[2] for r in log) == 19
    for prefix in {r[0] for r in log}:
        want = sorted((round(t, 3), c) for p, t, c in log if p == prefix)
        got = ours[ours["name"].str.startswith(prefix)]
        assert sorted(zip(got["total_us"].round(3), got["count"], strict=True)) == want, prefix
    assert ours["total_us"].sum() == pytest.approx(sum(r[1] for r in log))
    # the other rows are the memcpy and memset of cuda_gpu_mem_time_sum
    memory = mem_time_sum_from_log()
    assert set(memory) == {"memcpy", "memset"} and set(rows["kind"]) == {"kernel", *memory}
    for kind, (total, count) in memory.items():
        got = rows[rows["kind"] == kind]
        assert (got["total_us"].sum(), got["count"].sum()) == (pytest.approx(total), count), kind


def test_sql_on_cloverleaf_export() -> None:
    con = as_database(need(A100))
    launches = con.execute("SELECT launch_name, count(*) FROM kernels GROUP BY 1").fetchall()
    assert launches == [("cudaLaunchKernel", 1312)]
    total = con.execute("SELECT sum(dur_us) FROM kernels").fetchall()[0][0]
    assert total == pytest.approx(q(A100, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] / 1000)
    copies = con.execute("SELECT name, sum(json_extract(args, '$.bytes')::BIGINT) FROM events "
                         "WHERE cat = 'gpu_memcpy' GROUP BY 1 ORDER BY 1").fetchall()
    assert sum(b for _, b in copies) == q(A100, "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]
    assert {n for n, _ in copies} <= {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)",
                                      "Memcpy DtoD (Device -> Device)", "Memcpy HtoD (Pinned -> Device)",
                                      "Memcpy DtoH (Device -> Pinned)"}


@pytest.mark.parametrize("path", KERNSUM, ids=["adt", "genetic"])
def test_kernsum_csv(path: Path) -> None:
    frame = read_kernsum_csv(need(path))
    assert list(frame.columns) == ["name", "count", "total_us", "mean_us", "min_us", "max_us", "pct_of_kernel_time",
                                   "kind"]
    with open(path, newline="") as fh:
        raw = list(csv.DictReader(fh))
    assert len(frame) == len(raw) == 6 and frame["count"].sum() == 3003
    by_name = frame.set_index("name")
    for r in raw:
        got = by_name.loc[r["Name"]]
        assert got["total_us"] == pytest.approx(int(r["Total Time (ns)"]) / 1000)
        assert (got["count"], got["pct_of_kernel_time"]) == (int(r["Instances"]), float(r["Time (%)"]))
        assert got["max_us"] == pytest.approx(int(r["Max (ns)"]) / 1000)
    assert frame.iloc[0]["name"].startswith("void mudock::calc_energy")


def test_kernsum_older_layouts(tmp_path: Path) -> None:
    old = tmp_path / "gpukernsum.csv"
    old.write_text("Processing [report.sqlite] with [gpukernsum.py]... \n\n"
                   "Time(%),Total Time (ns),Instances,Average,Minimum,Maximum,Name\n"
                   '60.0,"3,000",3,1000.0,900,1100,"k1(float *)"\n40.0,2000,1,2000.0,2000,2000,k2\n')
    frame = read_kernsum_csv(old)
    cols = ["name", "count", "total_us", "mean_us", "min_us", "max_us", "pct_of_kernel_time"]
    assert frame[cols].values.tolist() == [
        ["k1(float *)", 3, 3.0, 1.0, 0.9, 1.1, 60.0], ["k2", 1, 2.0, 2.0, 2.0, 2.0, 40.0]]
    us = tmp_path / "us.csv"
    us.write_text("Time (%),Total Time (us),Instances,Avg (us),Med (us),Min (us),Max (us),StdDev (us),Name\n"
                  "100.0,12.5,2,6.25,6.25,6.0,6.5,0.35,k\n")
    assert read_kernsum_csv(us).iloc[0][["total_us", "min_us"]].tolist() == [12.5, 6.0]


def test_bad_inputs(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
    for path, message in [(text, "not an SQLite database"), (other, "not an nsys export"),
                          (tmp_path / "missing.sqlite", "no such file")]:
        with pytest.raises(InputError, match=message):
            read_nsys_sqlite(path)
    ncu = tmp_path / "ncu.csv"
    ncu.write_text('"ID","Kernel Name"\n"0","k"\n')
    for path in (ncu, text, tmp_path / "missing.csv"):
        with pytest.raises(InputError):
            read_kernsum_csv(path)
