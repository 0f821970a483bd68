"""Hostile inputs: impossible numbers, duplicates, deep nesting, bad UTF-8, damaged or
half-made databases, a full disk, unknown ranks, markdown cells (items 6, 7, 11). Each failure: its
exit code, one ``Error:`` line, an existing database unchanged."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import duckdb
import pytest
from conftest import REPO, TRACES, invoke, shared_or_skip

import trace_report as tr
from trace_report.errors import InputError


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
    assert row == "| a\\|b | void k&lt;float, 2&gt;\\(T&amp;\\) | two<br>lines |"


# ------------------------------------------------------------------ D: archives, scratch folders, names


class _Zeros(io.RawIOBase):
    """``n`` zero bytes, read without holding them."""

    def __init__(self, n: int) -> None:
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray) -> int:  # type: ignore[override]
        k = min(len(buf), self.left)
        buf[:k] = bytes(k)
        self.left -= k
        return k


def add_member(tar: tarfile.TarFile, name: str, data: bytes | int, kind: bytes = tarfile.REGTYPE,
               link: str = "") -> None:
    """Add a member: ``data`` bytes, or that many zero bytes; a link of type ``kind`` to ``link``."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    if kind == tarfile.REGTYPE:
        info.size = data if isinstance(data, int) else len(data)
        tar.addfile(info, io.BufferedReader(_Zeros(data)) if isinstance(data, int) else io.BytesIO(data))
    else:
        tar.addfile(info)


def trace_bytes(name: str, rank: int = 0) -> bytes:
    return json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": [event(name)]}).encode()


@pytest.fixture()
def scratch_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder archives are unpacked in, for this test alone."""
    import tempfile

    parent = tmp_path / "tmp"
    parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(parent))
    return parent


def test_archive_bomb_is_refused_before_it_is_written(tmp_path: Path, good_db: Path, scratch_parent: Path) -> None:
    """A 24 MB member of zeros packed into ~24 KB (1000:1): refused from its header, as a gzip
    trace is, with nothing of it written and no scratch folder left."""
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz") as tar:
        add_member(tar, "rank0.json", trace_bytes("k"))
        add_member(tar, "big.json", 24 << 20)
    ratio = (24 << 20) / bomb.stat().st_size
    assert ratio > 300
    for args in (["ingest", bomb, "-o", good_db], ["top-kernels", bomb]):
        line = fails_keeping(good_db, args)
        assert line == (f"Error: {bomb}!big.json: looks like a decompression bomb (ratio {ratio:.0f}:1: 24 MB "
                        f"from an archive of {bomb.stat().st_size >> 10} KB, limit 300:1); if the file is "
                        "genuine, pass --max-ratio to `trace-report ingest` to override")
    assert list(scratch_parent.iterdir()) == []


def test_archive_ratio_is_counted_while_unpacking(tmp_path: Path) -> None:
    """Random bytes after a bomb hide it from the whole-archive ratio; the byte counter stops the
    bomb's copy after RATIO_CHECK_AFTER bytes and one block, not at its 16 MB."""
    from trace_report.archives import COPY_BYTES, RATIO_CHECK_AFTER, ArchiveLimits, unpack

    archive = tmp_path / "hidden.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add_member(tar, "zeros.json", 16 << 20)
        add_member(tar, "noise.bin", random_bytes(200 << 10))
    assert (16 << 20) / archive.stat().st_size < 300  # the check from the header alone passes
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(InputError, match=r"!zeros\.json: looks like a decompression bomb \(ratio \d+:1 after "
                                         r"\d+ MB, limit 300:1\); if the file is genuine, pass --max-ratio"):
        unpack(archive, into)
    written = [p.stat().st_size for p in into.iterdir()]
    assert len(written) == 1 and 0 < written[0] <= RATIO_CHECK_AFTER + 2 * COPY_BYTES
    # --max-ratio covers members: 0 turns the check off, a higher limit lets the archive through
    for limits in (ArchiveLimits(max_ratio=0), ArchiveLimits(max_ratio=5000)):
        shutil.rmtree(into)
        into.mkdir()
        names = [(m.name, m.path.stat().st_size if m.path else None) for m in unpack(archive, into, limits)]
        assert names == [("zeros.json", 16 << 20), ("noise.bin", 200 << 10)]


def random_bytes(n: int) -> bytes:
    import random

    return random.Random(36).randbytes(n)


def test_max_ratio_of_resolve_reaches_archives(tmp_path: Path) -> None:
    """``resolve(max_ratio=)`` is what ``ingest --max-ratio`` passes: it replaces the archive's
    ratio limit as it does a gzip trace's."""
    from trace_report.inputs import resolve

    archive = tmp_path / "zeros.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add_member(tar, "rank0.json", trace_bytes("k"))
        add_member(tar, "pad.bin", 12 << 20)
    with pytest.raises(InputError, match="decompression bomb"):
        resolve([archive])
    with resolve([archive], max_ratio=0) as found:
        assert [s.label for s in found.sources] == [f"{archive}!rank0.json"]
        assert [label for label, _ in found.skipped] == [f"{archive}!pad.bin"]


def test_archive_size_limits(tmp_path: Path) -> None:
    """Per member and per archive, from the member headers before anything is written."""
    from trace_report.archives import ArchiveLimits
    from trace_report.inputs import resolve

    archive = tmp_path / "three.tar"
    with tarfile.open(archive, "w") as tar:
        for rank in range(3):
            add_member(tar, f"rank{rank}.json", trace_bytes("k" * 500, rank))
    size = len(trace_bytes("k" * 500))
    with pytest.raises(InputError) as err:
        resolve([archive], archive_limits=ArchiveLimits(member_bytes=size - 1))
    assert str(err.value) == (f"{archive}!rank0.json: unpacks to {size} bytes, over the limit of {size - 1} "
                              "bytes per archive member; unpack the archive and give the files")
    with pytest.raises(InputError) as err:
        resolve([archive], archive_limits=ArchiveLimits(total_bytes=3 * size - 1))
    assert str(err.value) == (f"{archive}: unpacks to more than {3 * size - 1} bytes, the limit per archive; "
                              "unpack the archive and give the files")
    with resolve([archive], archive_limits=ArchiveLimits(member_bytes=size, total_bytes=3 * size)) as found:
        assert len(found.sources) == 3


def test_archive_ratio_rule_is_the_gzip_traces(tmp_path: Path) -> None:
    from trace_report import archives
    from trace_report.formats import kineto

    assert (archives.MAX_RATIO, archives.RATIO_CHECK_AFTER) == (kineto.MAX_RATIO, kineto.RATIO_CHECK_AFTER)


def test_damaged_gzip_archive_is_one_error(tmp_path: Path, good_db: Path) -> None:
    archive = tmp_path / "ranks.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add_member(tar, "rank0.json", trace_bytes("k"))
    raw = bytearray(archive.read_bytes())
    raw[-6] ^= 0xFF  # the CRC-32 of the gzip trailer
    archive.write_bytes(raw)
    line = fails_keeping(good_db, ["ingest", archive, "-o", good_db])
    assert line == f"Error: {archive}: cannot read tar archive (zlib error: Error -3 while decompressing data: " \
                   "incorrect data check)"


def _scratch_owner(parent: Path) -> subprocess.Popen[str]:
    """A process that makes a scratch folder in ``parent``, prints it and waits."""
    code = ("import sys, time; from pathlib import Path; from trace_report.archives import Scratch; "
            "s = Scratch(Path(sys.argv[1])); print(s.path, flush=True); time.sleep(60)")
    return subprocess.Popen([sys.executable, "-c", code, str(parent)], stdout=subprocess.PIPE, text=True, cwd=REPO)


def test_scratch_folders_of_dead_processes_are_removed(tmp_path: Path, scratch_parent: Path) -> None:
    from trace_report.inputs import resolve

    killed, alive = _scratch_owner(scratch_parent), _scratch_owner(scratch_parent)
    try:
        dead_dir, live_dir = Path(killed.stdout.readline().strip()), Path(alive.stdout.readline().strip())
        assert dead_dir.name.startswith(f"trace-report-{killed.pid}-")
        (dead_dir / "00000-rank0.json").write_bytes(b"{}")
        killed.send_signal(signal.SIGKILL)  # as kill -9 during an ingest of an archive
        killed.wait()
        other = scratch_parent / "trace-report-hta-abcdefgh"  # not ours: no process id
        other.mkdir()
        archive = tmp_path / "ranks.tar"
        with tarfile.open(archive, "w") as tar:
            add_member(tar, "rank0.json", trace_bytes("k"))
        with resolve([archive]) as found:
            mine = found.sources[0].path.parent
            assert mine.name.startswith(f"trace-report-{os.getpid()}-")
            assert sorted(scratch_parent.iterdir()) == sorted([live_dir, other, mine])
        assert sorted(scratch_parent.iterdir()) == sorted([live_dir, other])
    finally:
        alive.kill()
        killed.kill()
        alive.wait()


def test_hard_links_and_long_member_names(tmp_path: Path) -> None:
    """GNU tar's way: a hard link to a regular member is that member's content under its own
    name; a member's name is kept whole whatever its length; the rest is listed, not dropped."""
    long_name = "run/" + "r" * 245 + "_rank1.json"  # 256 bytes with the scratch folder's prefix
    archive = tmp_path / "links.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        add_member(tar, "run/rank0.json", trace_bytes("k0"))
        add_member(tar, "copy/rank0.json", b"", tarfile.LNKTYPE, "run/rank0.json")
        add_member(tar, "run/gone.json", b"", tarfile.LNKTYPE, "run/absent.json")
        add_member(tar, "run/sym.json", b"", tarfile.SYMTYPE, "rank0.json")
        add_member(tar, long_name, trace_bytes("k1", rank=1))
    from trace_report.inputs import resolve

    with resolve([archive]) as found:
        by_label = {s.label.split("!")[1]: s.path for s in found.sources}
        assert list(by_label) == ["run/rank0.json", "copy/rank0.json", long_name]
        assert by_label["copy/rank0.json"] == by_label["run/rank0.json"]
        assert json.loads(by_label[long_name].read_bytes())["traceEvents"][0]["name"] == "k1"
        assert found.skipped == [
            (f"{archive}!run/gone.json", "a hard link to run/absent.json, which is not a regular file before it "
                                         "in the archive"),
            (f"{archive}!run/sym.json", "a symbolic link (to rank0.json), not followed")]
    db = tmp_path / "links.duckdb"
    result = invoke(["ingest", archive, "-o", db])
    assert result.exit_code == 0, result.output
    with tr.open(db) as opened:
        assert sorted(r[0] for r in opened.sql("select path from traces").fetchall()) == \
            sorted([f"{archive}!{long_name}", f"{archive}!run/rank0.json"])
    assert f"skipped: {archive}!copy/rank0.json (same content as trace 1)" in result.stderr


def _non_utf8(folder: Path, name: bytes) -> Path:
    """``folder/name`` for a name whose bytes are not UTF-8 (skips where the file system refuses)."""
    path = Path(os.fsdecode(os.path.join(os.fsencode(folder), name)))
    try:
        path.touch()
    except OSError as exc:
        pytest.skip(f"this file system refuses names that are not UTF-8 ({exc})")
    return path


def test_non_utf8_names_are_stored_escaped(tmp_path: Path) -> None:
    trace = _non_utf8(tmp_path, b"t\xff.json")
    write_trace(trace, [event("k")])
    escaped = f"{tmp_path}/t\\xff.json"
    result = invoke(["sql", trace, "select path from traces", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["path", escaped]
    folder = tmp_path / "runs"
    folder.mkdir()
    write_trace(_non_utf8(folder, b"r\xfe.json"), [event("k")])
    _non_utf8(folder, b"notes\xff.txt").write_text("hello")
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        add_member(tar, os.fsdecode(b"m\xfe.json"), trace_bytes("in-archive"))
    db = tmp_path / "names.duckdb"
    result = invoke(["ingest", folder, archive, "-o", db])
    assert result.exit_code == 0, result.output
    assert f"skipped: {folder}/notes\\xff.txt (" in result.stderr
    with tr.open(db) as opened:
        paths = sorted(r[0] for r in opened.sql("select path from traces").fetchall())
    assert paths == [f"{archive}!m\\xfe.json", f"{folder}/r\\xfe.json"]


def test_non_utf8_database_and_report_names_are_one_error_line(tmp_path: Path) -> None:
    """DuckDB fails on a database name that is not UTF-8 with std::bad_cast (a RuntimeError and a
    traceback), ncu_report with a TypeError: both refused with one Error line, nothing written."""
    good = tmp_path / "good.duckdb"
    trace = tmp_path / "t.json"
    write_trace(trace, [event("k")])
    assert invoke(["ingest", trace, "-o", good]).exit_code == 0
    bad = _non_utf8(tmp_path, b"b\xff.duckdb")
    os.replace(good, bad)
    os.replace(tmp_path / "good.duckdb.events", Path(f"{bad}.events"))
    made = _non_utf8(tmp_path, b"n\xfe.duckdb")
    made.unlink()
    message = ("DuckDB cannot open a database whose name is not valid UTF-8; rename it, or give a link to it "
               "with a UTF-8 name")
    for argv, shown in ((["top-kernels", bad], "b\\xff.duckdb"), (["ingest", trace, "-o", made], "n\\xfe.duckdb")):
        result = invoke(argv)
        assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines() == [f"Error: {tmp_path}/{shown}: {message}"]
    written = [p.name for p in tmp_path.iterdir() if p.name.lstrip(".").startswith("n")]
    assert written in ([], [".n\udcfe.duckdb.lock"])  # no database, no pieces (the writers' lock, as beside any)
    report = sorted((TRACES.parent / "ncu").glob("*/*.ncu-rep")) if TRACES.is_dir() else []
    if report:
        copy = _non_utf8(tmp_path, b"r\xff.ncu-rep")
        shutil.copyfile(report[0], copy)
        result = invoke(["roofline", copy])
        assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
        assert "ncu_report cannot open a report whose name is not valid UTF-8" in result.stderr


def test_fifo_given_explicitly_is_refused(tmp_path: Path) -> None:
    """A FIFO without a writer would block the first read for ever; a watchdog opens its writing
    end every 5 s, so a reader that waits fails this test instead of hanging it."""
    import threading

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    stop = threading.Event()

    def unblock() -> None:
        while not stop.wait(5):
            with contextlib.suppress(OSError):  # ENXIO: nobody is reading, as it should be
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    try:
        for args in (["top-kernels", fifo], ["ingest", fifo, "-o", tmp_path / "f.duckdb"]):
            result = invoke(args)
            assert result.exit_code == 1
            assert one_line(result.stderr) == f"Error: {fifo}: a FIFO (named pipe), not a regular file"
    finally:
        stop.set()
    write_trace(tmp_path / "t.json", [event()])
    result = invoke(["ingest", tmp_path, "-o", tmp_path / "f.duckdb"])  # met in a folder: listed, skipped
    assert result.exit_code == 0, result.output
    assert f"skipped: {fifo} (a FIFO (named pipe), not a regular file)" in result.stderr


def test_ingest_max_ratio_covers_archive_members(tmp_path: Path, scratch_parent: Path) -> None:
    archive = tmp_path / "zeros.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add_member(tar, "rank0.json", trace_bytes("k"))
        add_member(tar, "pad.bin", 12 << 20)
    db = tmp_path / "m.duckdb"
    refused = invoke(["ingest", archive, "-o", db])
    assert refused.exit_code == 1 and "looks like a decompression bomb" in one_line(refused.stderr)
    result = invoke(["ingest", archive, "-o", db, "--max-ratio", "0"])
    assert result.exit_code == 0, result.output
    assert f"skipped: {archive}!pad.bin (" in result.stderr
