"""Issue 10: nothing stored is lost or half-written, whatever the user or the system does.

Each case asserts the exit code, the one ``Error:``/``note:`` line, and that an existing database
(its ``.duckdb`` and every piece, by SHA-256) is unchanged where it must be.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TRACES, invoke, shared_or_skip

from trace_report.store.layout import database_lock

TRACE = TRACES / "hta_trace_diff" / "control.json.gz"


def snapshot(db: Path) -> dict[str, str]:
    """SHA-256 of the database file and of every event piece beside it."""
    files = [db, *sorted(db.with_name(db.name + ".events").glob("*"))]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()}


def sql(db: Path, query: str) -> list[dict]:
    result = invoke(["sql", db, query, "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    shared_or_skip()
    trace = tmp_path / "t.json.gz"
    shutil.copy(TRACE, trace)
    path = tmp_path / "runs.duckdb"
    assert invoke(["ingest", trace, "-o", path]).exit_code == 0
    return path


# ---------------------------------------------------------------- duplicates and changed files


def test_same_path_twice_is_read_once_and_the_database_stays_readable(tmp_path: Path) -> None:
    shared_or_skip()
    out = tmp_path / "d.duckdb"
    result = invoke(["ingest", TRACE, TRACE, TRACE.parent, "-o", out])
    assert result.exit_code == 0, result.stderr
    assert "2 trace(s) ingested" in result.stderr and "given more than once" in result.stderr
    assert sql(out, "SELECT count(*) AS n FROM traces") == [{"n": 2}]
    assert sql(out, "SELECT count(*) > 0 AS ok FROM events") == [{"ok": True}]


def test_identical_content_in_one_call_is_stored_once(tmp_path: Path) -> None:
    shared_or_skip()
    copy = tmp_path / "copy.json.gz"
    shutil.copy(TRACE, copy)
    out = tmp_path / "one-call.duckdb"
    result = invoke(["ingest", TRACE, copy, "-o", out])  # the second is compared with rows not written yet
    assert result.exit_code == 0 and "same content as trace 1" in result.stderr
    assert sql(out, "SELECT trace_id, path FROM traces") == [{"trace_id": 1, "path": str(TRACE)}]
    assert sql(out, "SELECT count(DISTINCT trace_id) AS n FROM event_files") == [{"n": 1}]


def test_identical_content_is_stored_once(db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.json.gz"
    shutil.copy(TRACE, copy)
    before = snapshot(db)
    result = invoke(["ingest", copy, "-o", db])
    assert result.exit_code == 0 and "same content as trace 1" in result.stderr
    assert sql(db, "SELECT count(*) AS n FROM traces") == [{"n": 1}]
    assert set(snapshot(db)) == set(before)  # no new piece


def test_changed_file_replaces_its_trace(db: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json.gz"
    old_pieces = set(snapshot(db)) - {db.name}
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", trace)  # same path, other content
    result = invoke(["ingest", trace, "-o", db])
    assert result.exit_code == 0, result.stderr
    assert f"note: {trace}: replaced trace 1 (its content changed)" in result.stderr
    assert sql(db, "SELECT trace_id, path FROM traces") == [{"trace_id": 2, "path": str(trace)}]
    assert not old_pieces & set(snapshot(db))  # the old pieces are gone
    expected = sum(1 for _ in _kernel_events(TRACES / "hta_trace_diff" / "test.json.gz"))
    assert sql(db, "SELECT count(*) AS n FROM kernels") == [{"n": expected}]


def _kernel_events(path: Path) -> list[dict]:
    import gzip

    doc = json.loads(gzip.decompress(path.read_bytes()))
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]


def test_touched_file_is_not_read_again_and_force_replaces(db: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json.gz"
    os.utime(trace, (time.time() + 5, time.time() + 5))
    result = invoke(["ingest", trace, "-o", db])
    assert result.exit_code == 0 and "content unchanged (trace 1)" in result.stderr
    forced = invoke(["ingest", trace, "-o", db, "--force"])
    assert forced.exit_code == 0 and "replaced trace 1 (read again (--force))" in forced.stderr
    assert sql(db, "SELECT trace_id FROM traces") == [{"trace_id": 2}]


def test_append_versions_keeps_both(db: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json.gz"
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", trace)
    assert invoke(["ingest", trace, "-o", db, "--append-versions"]).exit_code == 0
    assert sql(db, "SELECT count(*) AS n, count(DISTINCT path) AS paths FROM traces") == [{"n": 2, "paths": 1}]


# ---------------------------------------------------------------- files: modes, links, locks


def test_database_keeps_its_mode_and_a_link_is_written_through(db: Path, tmp_path: Path) -> None:
    os.chmod(db, 0o640)
    other = tmp_path / "other.json.gz"
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", other)
    link = tmp_path / "link.duckdb"
    link.symlink_to(db)
    assert invoke(["ingest", other, "-o", link]).exit_code == 0
    assert link.is_symlink() and (db.stat().st_mode & 0o777) == 0o640
    assert not (tmp_path / "link.duckdb.events").exists()  # pieces beside the target, not the link
    assert sql(link, "SELECT count(*) AS n FROM traces") == [{"n": 2}]


def test_outputs_follow_the_umask(db: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = tmp_path / "top.csv"
        assert invoke(["top-kernels", db, "-o", out]).exit_code == 0
    finally:
        os.umask(old)
    assert (out.stat().st_mode & 0o777) == 0o644


def test_a_second_writer_is_refused_and_nothing_changes(db: Path, tmp_path: Path) -> None:
    before = snapshot(db)
    other = tmp_path / "other.json.gz"
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", other)
    with database_lock(db):
        ingest = invoke(["ingest", other, "-o", db])
        write = invoke(["sql", db, "CREATE TABLE x AS SELECT 1", "--write"])
    for result in (ingest, write):
        assert result.exit_code == 1
        assert result.stderr.strip().splitlines() == [
            f"Error: {db}: another trace-report process is writing this database; try again when it has finished"]
    assert snapshot(db) == before
    lock_neighbour = tmp_path / "elsewhere.duckdb"  # the lock covers one database, not the folder
    with database_lock(db):
        assert invoke(["ingest", other, "-o", lock_neighbour]).exit_code == 0


# ---------------------------------------------------------------- the sql sandbox


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT * FROM read_csv('/etc/passwd')", "Cannot access file"),
    ("COPY (SELECT 1) TO '{dir}/x.csv'", "a COPY statement is not allowed here (add --unsafe"),
    ("INSTALL httpfs", "a LOAD statement is not allowed here"),
    ("ATTACH '{dir}/other.duckdb'", "an ATTACH statement is not allowed here".replace("an ATTACH", "a ATTACH")),
    ("SET enable_external_access = true", "the configuration has been locked"),
    ("CREATE TABLE t AS SELECT 1", "add --write"),
])
def test_sql_is_read_only_and_sandboxed(db: Path, query: str, message: str) -> None:
    before = snapshot(db)
    result = invoke(["sql", db, query.format(dir=db.parent)])
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(db) == before and not (db.parent / "x.csv").exists()


def test_sql_unsafe_and_write(db: Path) -> None:
    out = db.parent / "x.csv"
    assert invoke(["sql", db, f"COPY (SELECT 1 AS a) TO '{out}'", "--unsafe"]).exit_code == 0 and out.is_file()
    assert invoke(["sql", db, "CREATE TABLE notes AS SELECT 'hi' AS text", "--write"]).exit_code == 0
    assert sql(db, "SELECT text FROM notes") == [{"text": "hi"}]


# ---------------------------------------------------------------- interrupts (real signals)


def _big_trace(path: Path, events: int) -> None:
    """A plain-JSON trace large enough for worker processes (> 48 MB)."""
    row = ('{"ph":"X","cat":"kernel","name":"void k<float>(int)","pid":0,"tid":"stream 7","ts":%d,'
           '"dur":3.5,"args":{"stream":7,"correlation":%d,"device":0,"grid":[1,2,3]}}')
    with open(path, "w") as fh:
        fh.write('{"schemaVersion":1,"traceEvents":[')
        fh.write(",".join(row % (i * 10, i) for i in range(events)))
        fh.write("]}")


# Decoding runs in threads of the ingest process when the compiled scanner is installed, in
# forked worker processes when it is not: the second case is made by hiding the scanner module.
NO_SCANNER = ("import sys; sys.modules['trace_report.formats._scan'] = None; "
              "from trace_report.cli.app import main; main()")


def _ingest_process(trace: Path, db: Path, engine: str) -> subprocess.Popen[str]:
    start = [sys.executable, "-c", NO_SCANNER] if engine == "processes" else \
        [sys.executable, "-m", "trace_report.cli.app"]
    return subprocess.Popen([*start, "ingest", str(trace), "-o", str(db), "--workers", "2", "--no-progress"],
                            cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _wait_for_decoding(proc: subprocess.Popen[str], db: Path, engine: str) -> list[int]:
    """Wait until the ingest decodes (worker processes started, or a first piece written by a
    decoding thread); return the worker pids (none for threads)."""
    pieces = db.with_name(db.name + ".events")
    known = set(pieces.glob("*"))
    for _ in range(400):
        if engine == "processes":
            kids = _children(proc.pid)
            if len(kids) >= 2:
                return kids
        elif set(pieces.glob("*")) - known:
            return []
        time.sleep(0.025)
    raise AssertionError("the ingest never started decoding")


MID_DECODING_S = {"threads": 0.05, "processes": 0.3}
"""How long after :func:`_wait_for_decoding` returns the ingest is surely still decoding: threads
are seen once a first piece is written (the trace decodes in ~0.3 s more), processes as soon as
the workers exist."""


def _running_ingest(db: Path, tmp_path: Path, engine: str) -> tuple[subprocess.Popen[str], list[int], dict[str, str]]:
    """An ingest of a large trace into ``db`` that has started decoding: (process, worker pids
    (none for threads), the database's snapshot before it)."""
    big = tmp_path / "big.json"
    _big_trace(big, 800_000)
    before = snapshot(db)
    proc = _ingest_process(big, db, engine)
    return proc, _wait_for_decoding(proc, db, engine), before


@pytest.mark.parametrize("engine", ["threads", "processes"])
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_cleans_up_and_says_so(db: Path, tmp_path: Path, sig: int, code: int, engine: str) -> None:
    proc, kids, before = _running_ingest(db, tmp_path, engine)
    time.sleep(MID_DECODING_S[engine])
    assert proc.poll() is None, "the ingest finished before the signal: make the trace larger"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1].startswith("Interrupted")
    assert snapshot(db) == before  # the database and its pieces, byte for byte
    assert not list(tmp_path.glob(".runs.duckdb.tmp-*"))
    time.sleep(0.5)
    assert not [k for k in kids if _alive(k)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.is_file() and stat.read_text().split(") ", 1)[1][:1] != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_kill_9_leaves_nothing_that_blocks_or_inflates(db: Path, tmp_path: Path, engine: str) -> None:
    proc, kids, before = _running_ingest(db, tmp_path, engine)
    time.sleep(MID_DECODING_S[engine])
    assert proc.poll() is None, "the ingest finished before the kill: make the trace larger"
    proc.kill()
    proc.wait()
    deadline = time.time() + 2
    while time.time() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.05)
    assert not [k for k in kids if _alive(k)], "workers outlived their parent"
    assert snapshot(db).items() >= before.items()  # the old database is intact (orphans may be beside it)
    small = tmp_path / "small.json.gz"
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", small)
    result = invoke(["ingest", small, "-o", db])  # the lock died with the process
    assert result.exit_code == 0, result.stderr
    leftovers = [line for line in result.stderr.splitlines() if "left by an interrupted ingest" in line]
    assert leftovers and all(line.startswith("note: ") for line in leftovers)
    listed = {r["file"] for r in sql(db, "SELECT file FROM event_files")}
    assert {p.name for p in db.with_name(db.name + ".events").glob("*")} == listed
    assert not list(tmp_path.glob(".runs.duckdb.tmp-*"))
