"""Issue 10, hostile inputs: impossible numbers, duplicates, deep nesting, bad UTF-8, damaged or
half-made databases, a full disk, unknown ranks, markdown cells (items 6, 7, 11). Each failure: its
exit code, one ``Error:`` line, an existing database unchanged."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import tarfile
from pathlib import Path

import duckdb
import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr


def event(name: str = "k", ts: float = 10.0, dur: float = 2.0, **extra: object) -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": 1, "stream": 7, **extra}}


def write_trace(path: Path, events: list[object]) -> Path:
    path.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    return path


def digest_tree(db: Path) -> dict[str, str]:
    files = [db, *sorted(db.with_name(db.name + ".events").glob("*"))]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()}


def one_line(stderr: str, prefix: str = "Error: ") -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(prefix), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture()
def good_db(tmp_path: Path) -> Path:
    trace = write_trace(tmp_path / "good.json", [event(f"k{i}", ts=10.0 * i, correlation=i) for i in range(5)])
    db = tmp_path / "good.duckdb"
    assert invoke(["ingest", trace, "-o", db]).exit_code == 0
    return db


def fails_keeping(db: Path, args: list[object], code: int = 1) -> str:
    """Run ``args``; assert exit ``code`` and one Error line, and that ``db`` is unchanged."""
    before = digest_tree(db)
    result = invoke(args)
    assert result.exit_code == code, result.output
    assert digest_tree(db) == before
    return one_line(result.stderr)


# ------------------------------------------------------------------ A: numbers


def test_broken_durations_are_excluded_with_a_note(tmp_path: Path) -> None:
    events = [event("ok1", 0.0, 5.0), event("ok2", 100.0, 50.0), event("neg", 20.0, -3.0),
              event("nan", 30.0, "nan"), event("inf", 31.0, "inf"), event("huge", 40.0, 2e12),
              event("ok3", 60.0, 1.0)]
    trace = write_trace(tmp_path / "t.json", events)
    result = invoke(["sql", trace, "select name from events order by ts_us", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["name", "ok1", "ok3", "ok2"]
    note = next(ln for ln in result.stderr.splitlines() if "excluded" in ln)
    assert note.startswith("note: ") and "excluded 4 event(s)" in note
    assert "'neg' (ts 20.0 us, dur -3.0 us)" in note


def test_event_longer_than_the_rest_of_the_trace_is_excluded(tmp_path: Path) -> None:
    events = [event("a", 0.0, 10.0), event("b", 1000.0, 10.0), event("broken", 500.0, 5e9),
              event("c", 2000.0, 10.0)]
    trace = write_trace(tmp_path / "t.json", events)
    db = tmp_path / "t.duckdb"
    result = invoke(["ingest", trace, "-o", db])
    assert result.exit_code == 0
    assert "excluded 1 event(s)" in result.stderr and "'broken' (ts 500.0 us, dur 5000000000.0 us)" in result.stderr
    with tr.open(db) as opened:
        assert sorted(r[0] for r in opened.sql("select name from events").fetchall()) == ["a", "b", "c"]
        assert opened.scalar("select n_complete_events from traces") == 3
        assert opened.scalar("select sum(rows) from event_files") == 3


def test_whole_trace_annotation_is_kept(tmp_path: Path) -> None:
    """An event enclosing everything (``PyTorch Profiler (0)``, a step) is as long as the trace."""
    events = [event("PyTorch Profiler (0)", 0.0, 3_000_000.0), event("a", 10.0, 5.0), event("b", 2_000_000.0, 5.0)]
    result = invoke(["sql", write_trace(tmp_path / "t.json", events), "select count(*) from events", "-f", "csv"])
    assert result.stdout.split()[-1] == "3" and "excluded" not in result.stderr


def test_real_traces_lose_nothing() -> None:
    shared_or_skip()
    for folder in ("hta_cpu_only", "hta_amd_mi250", "hta_trace_diff", "tracelens_h100_bert_small"):
        result = invoke(["sql", TRACES / folder, "select count(*) from events", "-f", "csv"])
        assert result.exit_code == 0 and "excluded" not in result.stderr and "duplicate" not in result.stderr
    result = invoke(["sql", TRACES / "hta_triton_example", "select count(*) from steps", "-f", "csv"])
    # ProfilerStep#1 lasts 13.3 s around 0.36 s of other events: a real step enclosing idle time, kept
    assert "excluded" not in result.stderr and result.stdout.split()[-1] == "1"


def test_exact_duplicates_are_kept_and_counted(tmp_path: Path) -> None:
    same = event("dup", 5.0, 1.0)
    events = [same, event("other", 5.0, 1.0), same, same, event("x", 7.0, 1.0)]
    result = invoke(["sql", write_trace(tmp_path / "t.json", events), "select count(*) from events", "-f", "csv"])
    assert result.stdout.split()[-1] == "5"
    assert "note: " in result.stderr and "2 event(s) are exact duplicates" in result.stderr


def test_duplicates_across_pieces_are_counted(tmp_path: Path) -> None:
    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    events = [event(f"k{i % 500}", float(i % 500), 1.0, correlation=i % 500) for i in range(2000)]
    trace = write_trace(tmp_path / "t.json", events)
    report = ingest_to_database([trace], tmp_path / "t.duckdb", IngestOptions(workers=1, piece_bytes=4096))
    assert any("1500 event(s) are exact duplicates" in n for n in report.notes), report.notes


# ------------------------------------------------------------------ B: one Error line


@pytest.mark.parametrize("text", [
    '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": ' + "[" * 100_000 + "]" * 100_000 + "}]}",
    '{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"meta": ' + "[" * 100_000 + "]" * 100_000 + ', "traceEvents": []}',
], ids=["in-args", "events", "metadata"])
def test_deep_nesting_is_one_error(text: str, tmp_path: Path, good_db: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(text)
    line = fails_keeping(good_db, ["ingest", deep, "-o", good_db])
    assert str(deep) in line and "nested too deeply" in line
    assert "nested too deeply" in one_line(invoke(["top-kernels", deep]).stderr)


def test_invalid_utf8_is_replaced_with_a_warning(tmp_path: Path) -> None:
    trace = tmp_path / "utf.json"
    trace.write_bytes(json.dumps({"traceEvents": [event("kNAME")]}).encode().replace(b"NAME", b"\xff\xfeok"))
    result = invoke(["sql", trace, "select name from events", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split()[-1] == "k\ufffd\ufffdok"
    assert "warning: " in result.stderr and "replaced 2 invalid UTF-8" in result.stderr


def test_entries_that_are_not_events(tmp_path: Path, good_db: Path) -> None:
    bad = tmp_path / "ints.json"
    bad.write_text('{"traceEvents": [1, 2, "x"]}')
    line = fails_keeping(good_db, ["ingest", bad, "-o", good_db])
    assert line == f"Error: {bad}: traceEvents holds 3 entries that are not event objects"
    mixed = write_trace(tmp_path / "mixed.json", [event("k"), 7, event("j")])
    line = one_line(invoke(["top-kernels", mixed]).stderr)
    assert line == f"Error: {mixed}: traceEvents holds 1 entries that are not event objects"


def test_tar_members_are_named_archive_bang_member(tmp_path: Path, good_db: Path) -> None:
    archive = tmp_path / "ranks.tar"
    data = b'{"traceEvents": [1, 2]}'
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("run/rank0.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    line = fails_keeping(good_db, ["ingest", archive, "-o", good_db])
    assert line == f"Error: {archive}!run/rank0.json: traceEvents holds 2 entries that are not event objects"


def test_damaged_event_piece(good_db: Path) -> None:
    piece = sorted(good_db.with_name(good_db.name + ".events").glob("*.parquet"))[0]
    piece.write_bytes(piece.read_bytes()[:100])
    for args in (["top-kernels", good_db], ["sql", good_db, "select count(*) from events"],
                 ["export", good_db, "-o", good_db.parent / "dataset"]):
        line = fails_keeping(good_db, args)
        assert line.startswith(f"Error: {good_db}: event piece {piece.name} is damaged (")


def test_damaged_piece_body_found_when_queried(good_db: Path) -> None:
    piece = sorted(good_db.with_name(good_db.name + ".events").glob("*.parquet"))[0]
    raw = bytearray(piece.read_bytes())
    raw[4:len(raw) // 2] = b"\x55" * (len(raw) // 2 - 4)
    piece.write_bytes(bytes(raw))
    line = fails_keeping(good_db, ["sql", good_db, "select * from events"])
    assert line.startswith(f"Error: {good_db}: event piece {piece.name} is damaged (")


def test_half_made_database(tmp_path: Path, good_db: Path) -> None:
    half = tmp_path / "half.duckdb"
    con = duckdb.connect(str(half))
    con.execute("CREATE TABLE trace_report_info (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO trace_report_info VALUES ('app', 'trace-report'), ('schema_version', '1')")
    con.close()
    trace = write_trace(tmp_path / "t.json", [event()])
    for args in (["top-kernels", half], ["sql", half, "select 1"], ["ingest", trace, "-o", half]):
        line = fails_keeping(half, args)
        assert line.startswith(f"Error: {half}: an incomplete trace-report database")


def test_disk_full_during_ingest(tmp_path: Path, good_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import trace_report.ingest.decoding as decoding
    import trace_report.ingest.pipeline as pipeline

    def full(table: object, path: Path) -> None:
        path.write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pipeline, "write_parquet", full)
    monkeypatch.setattr(decoding, "write_parquet", full)
    trace = write_trace(tmp_path / "new.json", [event("n")])
    line = fails_keeping(good_db, ["ingest", trace, "-o", good_db])
    assert "No space left on device" in line and str(good_db) in line
    # no temporary copy left (the lock file .DB.lock stays, by design)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.suffix != ".lock"]


def test_disk_full_when_the_database_is_saved(tmp_path: Path, good_db: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import trace_report.store.database as database

    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(database.os, "replace", full)
    line = fails_keeping(good_db, ["ingest", write_trace(tmp_path / "new.json", [event("n")]), "-o", good_db])
    assert "No space left on device" in line
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.suffix != ".lock"]


class _FullFile(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("command", ["top-kernels", "report", "export"])
def test_disk_full_on_output(command: str, tmp_path: Path, good_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: (os.close(fd), _FullFile())[1])
    import trace_report.store.export as export

    def full_dataset(con: duckdb.DuckDBPyConnection, tmp: Path, report: object) -> None:
        (tmp / "events").mkdir()
        (tmp / "events" / "half.parquet").write_bytes(b"PAR1")
        raise duckdb.IOException("IO Error: Could not write file \"x.parquet\": No space left on device")

    monkeypatch.setattr(export, "_write_dataset", full_dataset)
    target = tmp_path / {"top-kernels": "out.csv", "report": "page.html", "export": "dataset"}[command]
    line = fails_keeping(good_db, [command, good_db, "-o", target])
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert "No space left on device" in line, line
    assert not target.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.suffix != ".lock"]


# ------------------------------------------------------------------ C: small things


@pytest.mark.parametrize("command", ["top-kernels", "breakdown", "flags", "advise", "report", "compare"])
def test_unknown_rank_is_a_usage_error(command: str, tmp_path: Path, good_db: Path) -> None:
    extra = {"report": ["-o", tmp_path / "r.html"], "compare": [good_db]}.get(command, [])
    line = fails_keeping(good_db, [command, good_db, *extra, "--rank", "5"], code=2)
    assert "no trace of rank 5 (ranks: 0)" in line


def test_markdown_cells_are_escaped(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", [event()])
    query = "select 'a|b' as \"x|y\", 'void k<float, 2>(T&)' as name, 'two\nlines' as note"
    result = invoke(["sql", trace, query, "-f", "markdown"])
    assert result.exit_code == 0, result.output
    head, _, row = result.stdout.splitlines()
    assert head == "| x\\|y | name | note |"
    assert row == "| a\\|b | void k&lt;float, 2&gt;(T&amp;) | two<br>lines |"
