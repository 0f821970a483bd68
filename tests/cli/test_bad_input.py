"""Bad input: one 'Error:' line, exit 1, no traceback, and an existing database untouched."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import run_cli

GOOD = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
                         "args": {"correlation": 1, "stream": 7}}]}



def make_bad_inputs(tmp: Path) -> dict[str, Path]:
    raw = json.dumps(GOOD).encode()
    cases = {
        "missing": tmp / "nope.json",
        "empty": tmp / "empty.json",
        "truncated_gz": tmp / "trunc.json.gz",
        "invalid_json": tmp / "invalid.json",
        "no_events": tmp / "noevents.json",
        "empty_dir": tmp / "emptydir",
        "no_ts_dur": tmp / "nots.json",
        "not_json": tmp / "text.json",
        "no_trace_events_key": tmp / "nokey.json",
    }
    cases["empty"].write_bytes(b"")
    cases["truncated_gz"].write_bytes(gzip.compress(raw * 50)[:-40])
    cases["invalid_json"].write_bytes(raw[:-10] + b"}{]")
    cases["no_events"].write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    cases["empty_dir"].mkdir()
    (cases["empty_dir"] / "notes.txt").write_text("no traces here")
    cases["no_ts_dur"].write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]}))
    cases["not_json"].write_text("hello world")
    cases["no_trace_events_key"].write_text(json.dumps({"schemaVersion": 1}))
    return cases


def digest_tree(db: Path) -> dict[str, str]:
    files = [db, *sorted(db.with_name(db.name + ".events").glob("*"))]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()}


@pytest.fixture()
def good_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    db = tmp_path / "t.duckdb"
    code, _, _ = run_cli(["ingest", str(good), "-o", str(db)], capsys)
    assert code == 0
    return db


@pytest.mark.parametrize("case", ["missing", "empty", "truncated_gz", "invalid_json", "no_events", "empty_dir",
                                  "no_ts_dur", "not_json", "no_trace_events_key"])
def test_bad_trace_gives_one_error_line_and_keeps_database(
        case: str, tmp_path: Path, good_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = make_bad_inputs(tmp_path)[case]
    before = digest_tree(good_db)
    code, out, err = run_cli(["ingest", str(bad), "-o", str(good_db)], capsys)
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    assert digest_tree(good_db) == before
    code, _, err = run_cli(["top-kernels", str(bad)], capsys)
    assert code == 1 and err.startswith("Error: ")


def test_good_then_bad_in_one_call_writes_nothing(tmp_path: Path, good_db: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"traceEvents": GOOD["traceEvents"] * 2}))
    bad = make_bad_inputs(tmp_path)["invalid_json"]
    before = digest_tree(good_db)
    code, _, _ = run_cli(["ingest", str(other), str(bad), "-o", str(good_db)], capsys)
    assert code == 1
    assert digest_tree(good_db) == before


def test_foreign_duckdb_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE x AS SELECT 42 AS answer")
    con.close()
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    for args in (["ingest", str(good), "-o", str(foreign)], ["top-kernels", str(foreign)],
                 ["sql", str(foreign), "select 1"]):
        code, _, err = run_cli(args, capsys)
        assert code == 1 and err.startswith("Error: ") and "not one written by trace-report" in err
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before


def test_not_a_database_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "fake.duckdb"
    fake.write_bytes(b"this is not duckdb" * 100)
    code, _, err = run_cli(["top-kernels", str(fake)], capsys)
    assert code == 1 and err.startswith("Error: ")


def test_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["top-kernels", "--no-such-option", "x"], capsys)
    assert code == 2 and err.startswith("Error: ")


def test_bad_sql_is_an_error(good_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["sql", str(good_db), "select * from no_such_table"], capsys)
    assert code == 1 and err.startswith("Error: SQL failed")


def test_database_is_read_only_by_default(good_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = digest_tree(good_db)
    code, _, err = run_cli(["sql", str(good_db), "delete from traces returning *"], capsys)
    assert code == 1 and "a DELETE statement is not allowed here (add --write" in err  # the sandbox
    code, _, err = run_cli(["sql", str(good_db), "delete from traces returning *", "--unsafe"], capsys)
    assert code == 1 and "read-only" in err.lower()  # and underneath, a read-only connection
    assert digest_tree(good_db) == before


def test_real_process_prints_no_traceback(tmp_path: Path) -> None:
    bad = make_bad_inputs(tmp_path)["truncated_gz"]
    proc = subprocess.run([sys.executable, "-m", "trace_report.cli.app", "top-kernels", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("Error: ")
    assert "truncated gzip" in proc.stderr
