"""top-kernels, sql, ingest and the Python API on real traces."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import TRACES, events_of, load_json, run_cli, trace_file

import trace_report as tr
from trace_report.cli.app import app
from trace_report.present.tables import records


def plain_top(path: Path) -> dict[str, tuple[int, float]]:
    per = defaultdict(lambda: [0, 0.0])
    for e in events_of(load_json(path)):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
            per[e["name"]][0] += 1
            per[e["name"]][1] += e["dur"]
    return {k: (n, t) for k, (n, t) in per.items()}


GPU_OP_KINDS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
                "gpu_memset": "memset", "Memset": "memset"}
"""A trace's GPU operation categories (2020/2021 Kineto spellings too) and top-kernels' ``kind`` of each."""


def plain_gpu_ops(path: Path) -> dict[tuple[str, str], tuple[int, float]]:
    """(count, total µs) per (kind, name) of kernels, memcpy and memset: the rows of ``top-kernels``
    without a limit, by a plain pass over the JSON."""
    per = defaultdict(lambda: [0, 0.0])
    for e in events_of(load_json(path)):
        if e.get("ph") == "X" and e.get("cat") in GPU_OP_KINDS:
            per[GPU_OP_KINDS[e["cat"]], e["name"]][0] += 1
            per[GPU_OP_KINDS[e["cat"]], e["name"]][1] += e["dur"]
    return {k: (n, t) for k, (n, t) in per.items()}


def test_top_kernels_json_matches_plain_pass(capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_file("hta_ns_resolution")
    code, out, _ = run_cli(["top-kernels", str(path), "--limit", "5", "--format", "json"], capsys)
    assert code == 0
    rows = json.loads(out)
    expected = plain_gpu_ops(path)  # kernels, memcpy and memset are ranked together
    # pct_of_gpu_time: of kernels + memcpy + memset, the denominator flags and HTA use
    total = sum(e["dur"] for e in events_of(load_json(path)) if e.get("ph") == "X"
                and e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"))
    assert total > sum(t for _, t in plain_top(path).values())
    ranked = sorted(expected.items(), key=lambda kv: (-kv[1][1], kv[0][1], kv[0][0]))[:5]
    assert [(r["kind"], r["name"]) for r in rows] == [k for k, _ in ranked]
    for row in rows:
        n, t = expected[row["kind"], row["name"]]
        assert {"name", "count", "total_us", "mean_us", "min_us", "max_us", "pct_of_gpu_time", "kind"} <= set(row)
        assert row["count"] == n and row["total_us"] == pytest.approx(t)
        assert row["mean_us"] == pytest.approx(t / n)
        assert row["pct_of_gpu_time"] == pytest.approx(100 * t / total)


def test_formats(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = trace_file("hta_amd_mi250")
    _, csv_out, _ = run_cli(["top-kernels", str(path), "-f", "csv"], capsys)
    assert csv_out.splitlines()[0] == "name,count,total_us,mean_us,min_us,max_us,pct_of_gpu_time,kind"
    _, md, _ = run_cli(["top-kernels", str(path), "-f", "markdown", "-n", "3"], capsys)
    assert md.splitlines()[0].startswith("| name | count |") and len(md.splitlines()) == 5
    _, table, _ = run_cli(["top-kernels", str(path), "-n", "3"], capsys)
    assert "total_us" in table
    out = tmp_path / "top.json"
    code, stdout, _ = run_cli(["top-kernels", str(path), "-o", str(out)], capsys)
    assert code == 0 and stdout == ""
    # every GPU operation is a row (the default limit, 20, is above their number): kernels, and memcpy here
    rows, expected = json.loads(out.read_text()), plain_gpu_ops(path)
    assert len(rows) == len(expected) > len(plain_top(path))
    assert {(r["kind"], r["name"]): r["count"] for r in rows} == {k: n for k, (n, _) in expected.items()}


def test_cpu_only_trace_ranks_cpu_operators(capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_file("hta_cpu_only")
    code, out, err = run_cli(["top-kernels", str(path), "-f", "json"], capsys)
    assert code == 0 and "no GPU kernels" in err
    rows = json.loads(out)
    assert rows and all(r["kind"] == "cpu_op" for r in rows)
    ops = [e for e in events_of(load_json(path)) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert sum(r["count"] for r in rows) == len(ops)
    # none of the cpu_ops nests another event here, so self time equals duration
    assert sum(r["total_us"] for r in rows) == pytest.approx(sum(e["dur"] for e in ops))


def test_cpu_self_time_subtracts_children(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "parent", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "child", "pid": 1, "tid": 1, "ts": 10, "dur": 30},
        {"ph": "X", "cat": "cpu_op", "name": "grandchild", "pid": 1, "tid": 1, "ts": 15, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "child", "pid": 1, "tid": 1, "ts": 50, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "other_thread", "pid": 1, "tid": 2, "ts": 10, "dur": 30},
    ]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with tr.open(path) as db:
        frame = db.top_kernels()
    got = dict(zip(frame["name"], frame["total_us"], strict=True))
    assert got == {"parent": 50.0, "child": 45.0, "grandchild": 5.0, "other_thread": 30.0}


def test_ranks_from_tar(capsys: pytest.CaptureFixture[str]) -> None:
    archive = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
    if not archive.is_file():
        pytest.skip("shared traces absent")
    _, out, _ = run_cli(["top-kernels", str(archive), "--by-rank", "-n", "2", "-f", "json"], capsys)
    rows = json.loads(out)
    assert sorted({r["rank"] for r in rows}) == list(range(8))
    assert all(sum(1 for r in rows if r["rank"] == k) == 2 for k in range(8))
    code, out0, err0 = run_cli(["top-kernels", str(archive), "--rank", "3", "-n", "0", "-f", "json"], capsys)
    assert (code, out0) == (2, "") and err0.startswith("Error:") and "-n" in err0  # -n < 1 is a usage error
    _, out3, _ = run_cli(["top-kernels", str(archive), "--rank", "3", "-n", "1000", "-f", "json"], capsys)
    by_rank3 = [r for r in json.loads(out3)]
    assert 0 < sum(r["pct_of_gpu_time"] for r in by_rank3) <= 100.0  # kernels' share; the rest is memcpy/memset
    _, agg, _ = run_cli(["top-kernels", str(archive), "-n", "1000", "-f", "json"], capsys)
    names = [r["name"] for r in json.loads(agg)]
    assert len(names) == len(set(names))  # one aggregate row per kernel name across ranks


def test_ingest_then_query_and_skip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_file("hta_a100_ddp_nccl")
    db = tmp_path / "runs.duckdb"
    code, _, err = run_cli(["ingest", str(path), "-o", str(db)], capsys)
    assert code == 0 and "1 trace(s) ingested" in err
    code, _, err = run_cli(["ingest", str(path), "-o", str(db)], capsys)
    assert code == 0 and "0 trace(s) ingested, 1 skipped" in err and "already ingested" in err
    copy = tmp_path / "copy.json.gz"
    copy.write_bytes(path.read_bytes())
    code, _, err = run_cli(["ingest", str(copy), "-o", str(db)], capsys)
    assert "same content as trace 1" in err
    _, out, _ = run_cli(["sql", str(db), "select count(*) as n, min(path) as path from traces", "-f", "json"], capsys)
    assert json.loads(out) == [{"n": 1, "path": str(path)}]  # the copy was not added as a second trace
    code, out, _ = run_cli(["sql", str(db), "select count(*) as n from kernels", "-f", "json"], capsys)
    assert json.loads(out) == [{"n": 2700}]
    _, from_db, _ = run_cli(["top-kernels", str(db), "-f", "json", "-n", "50"], capsys)
    _, from_trace, _ = run_cli(["top-kernels", str(path), "-f", "json", "-n", "50"], capsys)
    assert _same(json.loads(from_db), json.loads(from_trace))


def test_python_api_matches_cli(capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_file("tracelens_h100_timesformer")
    _, out, _ = run_cli(["top-kernels", str(path), "-f", "json", "-n", "10"], capsys)
    with tr.open(path) as db:
        frame = db.top_kernels(limit=10)
        rel = db.sql("select name, sum(dur_us) as total from kernels group by 1 order by 2 desc limit 1")
        first = rel.fetchall()
    assert frame.to_dict(orient="records") == json.loads(out)
    assert first[0][0] == frame["name"][0] and first[0][1] == pytest.approx(frame["total_us"][0])


def test_secrets_are_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"metadata": {"env": {"HF_TOKEN": "hf_abcdefSECRET", "PATH": "/usr/bin"}}, "api_key": "k-12345678",
           "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": 0, "dur": 1}]}
    path = tmp_path / "secret.json"
    path.write_text(json.dumps(doc))
    db = tmp_path / "s.duckdb"
    code, _, err = run_cli(["ingest", str(path), "-o", str(db)], capsys)
    assert code == 0 and "redacted 2 secret-looking" in err and "hf_abcdef" not in err
    assert b"hf_abcdefSECRET" not in db.read_bytes() and b"k-12345678" not in db.read_bytes()
    _, out, _ = run_cli(["sql", str(db), "select metadata from traces", "-f", "json"], capsys)
    meta = json.loads(json.loads(out)[0]["metadata"])
    assert meta["metadata"]["env"] == {"HF_TOKEN": "<redacted:secret_key>", "PATH": "/usr/bin"}


@pytest.mark.parametrize("command", ["ingest", "top-kernels", "sql", "capture"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    if command not in names:
        pytest.skip(f"{command} is not registered")
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0 and "Usage" in out and len(out) > 200


def _same(a: object, b: object) -> bool:
    """Equal, floats to 1e-12 relative: DuckDB sums a column in parallel pieces whose order varies
    from run to run, which moves the last bits of a total (28.308818459364563 / ...545)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_api_analyses_match_cli(capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_file("hta_a100_ddp_nccl")
    with tr.open(path) as db:
        api = {"breakdown": db.breakdown(), "flags": db.flags(), "advise": db.advise()}
    for command, frame in api.items():
        _, out, _ = run_cli([command, str(path), "-f", "json"], capsys)
        rows = json.loads(out)
        assert len(rows) > 0, command
        api_rows = json.loads(json.dumps(records(frame)))
        assert _same(rows, api_rows), (command, rows[:3], api_rows[:3])  # the same values, not just the shape
