"""Nothing stored is lost or half-written, whatever the user or the system does.

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
    ("ATTACH '{dir}/other.duckdb'", "an ATTACH statement is not allowed here"),
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
# Both start with SIGINT as an interactive shell leaves it: a test run started in the background
# by a shell without job control (`cmd &` in a script, as some CI runners do) inherits SIGINT
# ignored, and an ignored SIGINT stays ignored (interrupts.handling), so the ingest ran to its
# end with exit 0 and the test failed.
AS_A_TERMINAL = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
NO_SCANNER = "sys.modules['trace_report.formats._scan'] = None; "
MAIN = "from trace_report.cli.app import main; main()"


def _ingest_process(trace: Path, db: Path, engine: str) -> subprocess.Popen[str]:
    start = [sys.executable, "-c", AS_A_TERMINAL + (NO_SCANNER if engine == "processes" else "") + MAIN]
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
are seen once a first piece is written (the trace decodes a while more), processes as soon as
the workers exist."""


def _running_ingest(db: Path, tmp_path: Path, engine: str) -> tuple[subprocess.Popen[str], list[int], dict[str, str]]:
    """An ingest of a large trace into ``db`` that has started decoding: (process, worker pids
    (none for threads), the database's snapshot before it)."""
    big = tmp_path / "big.json"
    _big_trace(big, 800_000)
    before = snapshot(db)
    proc = _ingest_process(big, db, engine)
    return proc, _wait_for_decoding(proc, db, engine), before


@pytest.mark.parametrize(("sig", "code", "engine"), [
    (signal.SIGINT, 130, "threads"), (signal.SIGTERM, 143, "processes"),  # each signal, each engine once
    pytest.param(signal.SIGTERM, 143, "threads", marks=pytest.mark.slow),  # the other two pairs: ./run test-all
    pytest.param(signal.SIGINT, 130, "processes", marks=pytest.mark.slow),
])
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


# ---------------------------------------------------------------- inputs and numbers


def _set_schema_version(db: Path, version: str) -> None:
    import duckdb

    con = duckdb.connect(str(db))
    try:
        con.execute("UPDATE trace_report_info SET value = ? WHERE key = 'schema_version'", [version])
    finally:
        con.close()


@pytest.mark.parametrize(("version", "orphan"), [("2", True), ("1.5", False)])
def test_newer_schema_is_never_written_and_read_with_one_warning(db: Path, tmp_path: Path, version: str,
                                                                 orphan: bool) -> None:
    """Refused before anything is removed (an orphan piece, which clean_leftovers would delete) or
    copied; a version that is not a whole number is not one this code knows either."""
    _set_schema_version(db, version)
    if orphan:
        (db.with_name(db.name + ".events") / "orphan.parquet").write_bytes(b"PAR1")
    before = snapshot(db)
    other = tmp_path / "other.json.gz"
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", other)
    for args in (["ingest", other, "-o", db], ["sql", db, "CREATE TABLE x AS SELECT 1", "--write"]):
        result = invoke(args)
        assert result.exit_code == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: {db}: written by a newer trace-report"), lines
        assert f"schema version '{version}'" in lines[0]
        assert snapshot(db) == before  # the version, the tables and the pieces (the orphan too)
    read = invoke(["sql", db, "SELECT count(*) AS n FROM traces", "-f", "csv"])
    assert read.exit_code == 0 and read.stdout.split() == ["n", "1"]
    warnings = [ln for ln in read.stderr.splitlines() if "newer trace-report" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: "), read.stderr


def test_known_schema_versions_are_written(db: Path, tmp_path: Path) -> None:
    """The version this code writes is written to (the refusal above is for later ones only)."""
    from trace_report.store.database import SCHEMA_VERSION

    _set_schema_version(db, SCHEMA_VERSION)
    other = tmp_path / "other.json.gz"
    shutil.copy(TRACES / "hta_trace_diff" / "test.json.gz", other)
    result = invoke(["ingest", other, "-o", db])
    assert result.exit_code == 0 and "newer" not in result.stderr, result.stderr
    assert sql(db, "SELECT value FROM trace_report_info WHERE key = 'schema_version'") == [{"value": SCHEMA_VERSION}]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0.5", "1", "1e400"])
def test_max_ratio_must_be_finite_and_above_one(tmp_path: Path, value: str) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}')
    out = tmp_path / "t.duckdb"
    result = invoke(["ingest", trace, "-o", out, f"--max-ratio={value}"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: Invalid value for '--max-ratio'"), lines
    assert not out.exists()


@pytest.mark.parametrize("value", ["0", "1.5", "300"])
def test_max_ratio_zero_or_above_one_is_accepted(tmp_path: Path, value: str) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}')
    result = invoke(["ingest", trace, "-o", tmp_path / "t.duckdb", f"--max-ratio={value}"])
    assert result.exit_code == 0, result.output


def _kernel_json(name: str, ts: str, dur: str = "2.0") -> str:
    """One kernel event as JSON text, ``ts`` as written (an integer past 2^64 stays one)."""
    return (f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}, "dur": {dur}, '
            '"args": {"correlation": 1, "stream": 7}}')


def _timeline(path: Path, far: list[str], n: int = 5) -> Path:
    """``n`` kernels of 2 us every 10 us from 1000 us (busy 2n us over 10n - 8 us), then ``far``."""
    events = [_kernel_json(f"k{i}", str(1000 + 10 * i)) for i in range(n)]
    events += [_kernel_json(f"far{i}", ts) for i, ts in enumerate(far)]
    path.write_text('{"distributedInfo": {"rank": 0}, "traceEvents": [' + ", ".join(events) + "]}")
    return path


@pytest.mark.parametrize("far", [["18446744073709551616"], ["1.8e19"], ["-1.8e19"], ["0", "0.5"],
                                 ["1.8e19", "18446744073709551616", "-1e18"]])
def test_time_stamps_far_outside_the_trace_are_excluded_with_a_note(tmp_path: Path, far: list[str]) -> None:
    """A ts of 2^64 us kept made the headline read 1.6e-17% GPU busy (the GPU span ~2^64 us).
    Five kernels 10 us apart at epoch time stamps (2023): busy 10 us of a 42 us span; the far
    events (a ts of 0 too, some sheltering each other) go, with the note impossible durations have."""
    events = [_kernel_json(f"k{i}", str(1_700_000_000_000_000 + 10 * i)) for i in range(5)]
    events += [_kernel_json(f"far{i}", ts) for i, ts in enumerate(far)]
    trace = tmp_path / "t.json"
    trace.write_text('{"distributedInfo": {"rank": 0}, "traceEvents": [' + ", ".join(events) + "]}")
    result = invoke(["sql", trace, "SELECT count(*) AS n, min(name) AS first, max(name) AS last, "
                     "(SELECT gpu_util_pct FROM gpu_utilization_by_rank) AS util FROM events", "-f", "json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)[0]
    assert (row["n"], row["first"], row["last"]) == (5, "k0", "k4")
    assert row["util"] == pytest.approx(100.0 * 10 / 42)
    notes = [ln for ln in result.stderr.splitlines() if "excluded" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: ") and f"excluded {len(far)} event(s)" in notes[0]
    assert "'far" in notes[0]


def test_time_stamps_of_the_bulk_or_within_a_day_are_kept(tmp_path: Path) -> None:
    """Not misplaced: an event an hour after a 42 us trace (the one-day floor), and half of a
    trace two days after the other half (the bulk of a trace is never judged)."""
    hour = _timeline(tmp_path / "hour.json", [str(1000 + 3600e6)])
    halves = [_kernel_json(f"late{i}", str(1000 + 2 * 86_400e6 + i)) for i in range(3)]
    split = tmp_path / "split.json"
    split.write_text('{"traceEvents": [' + ", ".join(
        [_kernel_json(f"k{i}", str(1000 + i)) for i in range(3)] + halves) + "]}")
    for trace, n in ((hour, 6), (split, 6)):
        result = invoke(["sql", trace, "SELECT count(*) AS n FROM events", "-f", "csv"])
        assert result.exit_code == 0 and result.stdout.split() == ["n", str(n)], result.output
        assert "excluded" not in result.stderr


def test_time_stamp_outliers_are_found_across_pieces(tmp_path: Path) -> None:
    """The rule reads each piece's edge rows: an outlier in a middle piece of a trace cut into
    many pieces is found once the whole trace is read, and its piece is rewritten without it."""
    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    events = [_kernel_json(f"k{i}", str(1000 + i)) for i in range(2000)]
    events[1000] = _kernel_json("far", "18446744073709551616")
    trace = tmp_path / "t.json"
    trace.write_text('{"distributedInfo": {"rank": 0}, "traceEvents": [' + ", ".join(events) + "]}")
    db = tmp_path / "t.duckdb"
    report = ingest_to_database([trace], db, IngestOptions(workers=1, piece_bytes=8192))
    assert any("excluded 1 event(s)" in n and "'far'" in n for n in report.notes), report.notes
    assert sql(db, "SELECT count(*) AS n, max(ts_us) AS last, (SELECT count(*) FROM event_files) > 3 AS pieces "
                   "FROM events") == [{"n": 1999, "last": 2999.0, "pieces": True}]


def test_overlapping_steps_count_each_instant_once(tmp_path: Path) -> None:
    """ProfilerStep#1 [0, 100) us, #2 nested in it [25, 50), #3 overlapping it [80, 180); kernels
    [10, 30) and [90, 120). Summed step time is the union of the steps, 180 us (not 100 + 25 +
    100 = 225), and busy time the kernels' 50 us (not 65, the nested step's 5 us counted again):
    #2 is left out, #3 starts at 100."""
    def ev(name: str, cat: str, ts: float, dur: float, pid: int, tid: int) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                "args": {"stream": 7, "correlation": int(ts)} if cat == "kernel" else {}}

    step = "user_annotation"
    events = [ev("ProfilerStep#1", step, 0, 100, 1, 1), ev("ProfilerStep#2", step, 25, 25, 1, 1),
              ev("ProfilerStep#3", step, 80, 100, 1, 1), ev("k1", "kernel", 10, 20, 0, 7),
              ev("k2", "kernel", 90, 30, 0, 7)]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    result = invoke(["sql", trace, "SELECT steps, wall_us, busy_us FROM gpu_utilization_by_rank", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"steps": 2, "wall_us": 180.0, "busy_us": 50.0}]
    counts = invoke(["sql", trace, "SELECT clipped, nested, overlap_us FROM step_overlap_counts", "-f", "json"])
    assert json.loads(counts.stdout) == [{"clipped": 1, "nested": 1, "overlap_us": 45.0}]
    steps = invoke(["sql", trace, "SELECT step, ts_us, dur_us FROM steps ORDER BY step", "-f", "csv"])
    assert steps.stdout.split()[1:] == ["1,0.0,100.0", "2,25.0,25.0", "3,80.0,100.0"]  # as recorded


def test_a_byte_order_mark_before_a_json_trace_is_accepted(tmp_path: Path) -> None:
    """A UTF-8 byte-order mark (Windows editors) before a JSON trace, plain (read in byte ranges,
    several pieces) or gzip (streamed): the same events as without it."""
    import gzip

    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    events = [_kernel_json(f"k{i}", str(1000 + 10 * i)) for i in range(300)]
    text = ('{"distributedInfo": {"rank": 0}, "traceEvents": [' + ", ".join(events) + "]}").encode()
    plain, marked, zipped = tmp_path / "plain.json", tmp_path / "marked.json", tmp_path / "marked.json.gz"
    plain.write_bytes(text)
    marked.write_bytes(BOM + text)
    zipped.write_bytes(gzip.compress(BOM + text))
    rows = []
    for trace in (plain, marked, zipped):
        db = tmp_path / f"{trace.name}.duckdb"
        ingest_to_database([trace], db, IngestOptions(workers=1, piece_bytes=4096))
        rows.append(sql(db, "SELECT name, ts_us, dur_us FROM events ORDER BY event_id"))
        assert sql(db, "SELECT rank FROM traces") == [{"rank": 0}]  # the metadata before the events, read
    assert len(rows[0]) == 300 and rows[1] == rows[0] and rows[2] == rows[0]


BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_before_an_nsys_kernel_summary_is_accepted(tmp_path: Path) -> None:
    """With the mark the first column, ``Time (%)``, was not recognised and the share of each
    kernel was computed (93.305...) instead of read as nsys printed it (93.3)."""
    shared_or_skip()
    kernsum = TRACES.parent / "nsys" / "mudock_nsys_kernsum_adt_cuda" / "nsys_adt_CUDA_Native_gpukernsum.csv"
    marked = tmp_path / "kernsum.csv"
    marked.write_bytes(BOM + kernsum.read_bytes())
    results = [invoke(["top-kernels", p, "-f", "json", "-n", "1"]) for p in (kernsum, marked)]
    assert results[0].exit_code == results[1].exit_code == 0, results[1].stderr
    assert results[1].stdout == results[0].stdout
    assert json.loads(results[1].stdout)[0]["pct_of_kernel_time"] == 93.3
