"""Where ``-o`` writes. An output that is an input (or inside a database's events
folder, or a trace of an input folder) is a usage error before any work; FIFOs and devices are
written where they are (no rename over them, nothing beside them); a full disk is one ``Error:``
line; a closed pipe a quiet exit 141. Every input stays byte-identical."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, invoke

from trace_report.cli.options import check_database_output, output_conflict
from trace_report.errors import UsageError
from trace_report.present.tables import write_atomic, writes_in_place

BASELINE = REPO / "traces" / "h100-2026-11-25" / "baseline"
LINUX_DEVICES = sys.platform.startswith("linux") and Path("/dev/full").exists()
needs_devices = pytest.mark.skipif(not LINUX_DEVICES, reason="needs Linux /dev/full, /dev/null, /dev/stdout")


def trace_report() -> list[str]:
    exe = REPO / ".venv" / "bin" / "trace-report"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "trace_report.cli.app"]


def digest(path: Path) -> dict[str, str]:
    """SHA-256 of a file, or of every file under a folder."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def one_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the baseline run folder, its trace, and a database of it (with its events folder)."""
    root = tmp_path_factory.mktemp("outputs")
    run = root / "run"
    shutil.copytree(BASELINE, run)
    trace = next(run.glob("*.pt.trace.json.gz"))
    lone = root / "t.json.gz"
    shutil.copy(trace, lone)
    db = root / "runs.duckdb"
    result = invoke(["ingest", lone, "-o", db])
    assert result.exit_code == 0, result.output
    return {"root": root, "run": run, "run_trace": trace, "trace": lone, "db": db,
            "events": db.with_name(db.name + ".events")}


@pytest.fixture()
def kept(work: dict[str, Path]) -> Iterator[dict[str, dict[str, str]]]:
    """Digests of every input before a test; checked unchanged after it."""
    before = {k: digest(work[k]) for k in ("run", "trace", "db", "events")}
    yield before
    assert {k: digest(work[k]) for k in before} == before


# ------------------------------------------------------------------ -o is an input: exit 2


CASES = {
    "top-kernels": ["top-kernels", "{db}", "-o", "{db}"],
    "top-kernels -o first": ["top-kernels", "-o", "{db}", "{db}"],
    "top-kernels trace": ["top-kernels", "{trace}", "-o", "{trace}"],
    "breakdown": ["breakdown", "{db}", "-o", "{db}"],
    "flags": ["flags", "{db}", "-o", "{db}"],
    "advise": ["advise", "{db}", "-o", "{db}"],
    "ops": ["ops", "{db}", "-o", "{db}"],
    "overlap": ["overlap", "{db}", "-o", "{db}"],
    "queue": ["queue", "{db}", "-o", "{db}"],
    "collectives": ["collectives", "{db}", "-o", "{db}"],
    "memory": ["memory", "{db}", "-o", "{db}"],
    "compare": ["compare", "{db}", "{trace}", "-o", "{trace}"],
    "compare --chart": ["compare", "{db}", "{trace}", "--chart", "{db}"],
    "report": ["report", "{trace}", "-o", "{trace}"],
    "roofline": ["roofline", "{trace}", "-o", "{trace}"],
    "roofline --chart": ["roofline", "--chart", "{trace}", "{trace}"],
    "sql": ["sql", "{db}", "select 1", "-o", "{db}"],
    "hta": ["hta", "temporal", "{trace}", "-o", "{trace}"],
    "ingest": ["ingest", "{trace}", "-o", "{trace}"],
    "export": ["export", "{db}", "-o", "{db}"],
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_output_that_is_the_input_is_a_usage_error(case: str, work: dict[str, Path], kept: object) -> None:
    args = [a.format(**{k: str(v) for k, v in work.items()}) for a in CASES[case]]
    result = invoke(args)
    assert result.exit_code == 2, result.output
    line = one_error(result.stderr)
    option = "--chart" if "--chart" in args else "--output"
    given = args[args.index("--chart" if "--chart" in args else "-o") + 1]
    recorded = f"Error: {option} {given} is the trace {given} recorded in the input database {work['db']}: give " \
               "another output path"  # compare DB TRACE: the database's trace, checked before TRACE is parsed
    assert line in (f"Error: {option} {given} is the input {given}: give another output path", recorded)


@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_a_link_to_the_input_is_the_input(how: str, work: dict[str, Path], kept: object, tmp_path: Path) -> None:
    link = tmp_path / "link.duckdb"
    (link.symlink_to if how == "symlink" else link.hardlink_to)(work["db"])
    result = invoke(["top-kernels", work["db"], "-o", link, "-f", "csv"])
    assert result.exit_code == 2, result.output
    assert one_error(result.stderr) == f"Error: --output {link} is the input {work['db']}: give another output path"
    assert link.is_symlink() == (how == "symlink")


@pytest.mark.parametrize("where", ["piece", "new", "folder", "wal"])
def test_the_events_folder_and_log_of_a_database_are_the_database(where: str, work: dict[str, Path],
                                                                   kept: object) -> None:
    events = work["events"]
    out = {"piece": next(events.glob("*.parquet")), "new": events / "top.csv", "folder": events,
           "wal": work["db"].with_name("runs.duckdb.wal")}[where]
    for args in (["top-kernels", work["db"], "-o", out], ["sql", work["db"], "select 1", "-o", out],
                 ["export", work["db"], "-o", out, "--overwrite"]):
        result = invoke(args)
        assert result.exit_code == 2, result.output
        line = one_error(result.stderr)
        assert f"--output {out} " in line and str(work["db"]) in line
    assert not (events / "top.csv").exists() and not work["db"].with_name("runs.duckdb.wal").exists()


def test_traces_and_run_files_inside_an_input_folder(work: dict[str, Path], kept: object) -> None:
    run = work["run"]
    for out, what in ((work["run_trace"], "a Chrome/Kineto trace"), (run / "run.json", "the run file run.json"),
                      (run / "steps.csv", "the run file steps.csv")):
        result = invoke(["top-kernels", run, "-o", out])
        assert result.exit_code == 2, result.output
        assert one_error(result.stderr).startswith(f"Error: --output {out} is {what}")
        assert f"inside the input folder {run}" in result.stderr
    # ingest into the folder it reads: a trace there is refused, a database beside the traces is not
    result = invoke(["ingest", run, "-o", work["run_trace"]])
    assert result.exit_code == 2 and "is a Chrome/Kineto trace inside the input folder" in result.stderr
    # a folder that holds an input (export --overwrite would replace it)
    result = invoke(["export", work["trace"], "-o", work["root"], "--overwrite"])
    assert result.exit_code == 2
    assert one_error(result.stderr) == (f"Error: --output {work['root']} holds the input {work['trace']}: "
                                        "give another output path")


def test_other_files_in_an_input_folder_are_fine(work: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(work["run"], folder)
    out = folder / "top.csv"
    for _ in range(2):  # the second time over the CSV written the first time (not a trace)
        result = invoke(["top-kernels", folder, "-o", out])
        assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[0].count(",") > 2
    assert output_conflict(folder / "new.json", [folder]) is None


def test_ingest_refuses_a_device_or_fifo_before_its_lock(tmp_path: Path, work: dict[str, Path]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = invoke(["ingest", work["trace"], "-o", fifo])
    assert result.exit_code == 2
    assert one_error(result.stderr) == f"Error: --output {fifo} is not a regular file: a database is a file " \
                                       "(e.g. runs.duckdb)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no .pipe.lock
    if LINUX_DEVICES:
        with pytest.raises(UsageError):
            check_database_output(Path("/dev/null"), [work["trace"]])


# ------------------------------------------------------------------ FIFOs, devices, pipes, a full disk


def run_cli(args: list[object], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*trace_report(), *map(str, args)], capture_output="stdout" not in kwargs,
                          timeout=120, check=False, **kwargs)  # type: ignore[call-overload]


def test_a_fifo_is_written_where_it_is(tmp_path: Path, work: dict[str, Path]) -> None:
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = run_cli(["top-kernels", work["db"], "-o", fifo, "-f", "csv"])
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].split(b"\n")[0].count(b",") > 2  # the CSV rows came through the FIFO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.fifo"]  # no temporary file beside it


@needs_devices
def test_dev_null_and_dev_stdout_stay_what_they_are(work: dict[str, Path], tmp_path: Path) -> None:
    # the guard first: were these not written in place, the run below would rename over them
    assert writes_in_place(Path("/dev/null")) and writes_in_place(Path("/dev/stdout"))
    before = sorted(os.listdir("/dev"))
    done = run_cli(["top-kernels", work["db"], "-o", "/dev/null"])
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not Path("/dev/.null.lock").exists()
    assert [n for n in sorted(os.listdir("/dev")) if n not in before and n.startswith(".null")] == []
    done = run_cli(["top-kernels", work["db"], "-o", "/dev/stdout", "-f", "csv"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\n")[0].count(b",") > 2  # the rows came through the pipe
    assert os.path.islink("/dev/stdout")
    # a regular file behind /dev/stdout (`>> log`) is appended to, not replaced
    log = tmp_path / "log.csv"
    log.write_bytes(b"first line\n")
    with open(log, "ab") as fh:
        done = run_cli(["top-kernels", work["db"], "-o", "/dev/stdout", "-f", "csv"], stdout=fh,
                       stderr=subprocess.PIPE)
    assert done.returncode == 0
    assert log.read_bytes().startswith(b"first line\n") and log.read_bytes().count(b"\n") > 2


@needs_devices
def test_a_full_disk_is_one_error_line(work: dict[str, Path]) -> None:
    assert writes_in_place(Path("/dev/full"))
    done = run_cli(["top-kernels", work["db"], "-o", "/dev/full"])
    assert done.returncode == 1
    assert one_error(done.stderr.decode()) == "Error: /dev/full: cannot write (No space left on device)"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    with open("/dev/full", "wb") as full:  # stdout on a full disk: small output (flushed at exit) and large
        for query in ("select 1 as x", "select * from range(200000)"):
            done = run_cli(["sql", work["db"], query, "-f", "csv"], stdout=full, stderr=subprocess.PIPE)
            assert done.returncode == 1
            assert one_error(done.stderr.decode()) == "Error: stdout: cannot write (No space left on device)"


def test_a_closed_pipe_is_a_quiet_exit_141(work: dict[str, Path], tmp_path: Path) -> None:
    """`trace-report ... | head -1`: the reader went away; no traceback, no message, 141 (128 + SIGPIPE)."""
    query = ["sql", work["db"], "select * from range(300000)", "-f", "csv"]  # ~2 MB: more than a pipe holds
    for extra in ([], ["-o", "/dev/stdout"] if LINUX_DEVICES else []):
        proc = subprocess.Popen([*trace_report(), *map(str, query + extra)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"range\n"  # like `head -1`
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(120) == 141, stderr
        assert "Traceback" not in stderr and "Error" not in stderr and "Exception" not in stderr
    fifo = tmp_path / "short.fifo"  # an -o FIFO whose reader leaves early
    os.mkfifo(fifo)

    def read_a_little() -> None:
        with open(fifo, "rb") as fh:
            fh.read(10)

    reader = threading.Thread(target=read_a_little, daemon=True)
    reader.start()
    done = run_cli([*query, "-o", fifo])
    reader.join(30)
    assert done.returncode == 141, done.stderr
    assert b"Traceback" not in done.stderr and stat.S_ISFIFO(os.lstat(fifo).st_mode)


# ------------------------------------------------------------------ the helpers


def test_write_atomic_keeps_regular_files_atomic(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    write_atomic(out, "one\n")
    os.chmod(out, 0o600)
    inode = out.stat().st_ino
    write_atomic(out, "two\n")
    assert out.read_text() == "two\n" and (out.stat().st_mode & 0o777) == 0o600
    assert out.stat().st_ino != inode  # a new file renamed over the old one
    assert not writes_in_place(out) and not writes_in_place(tmp_path / "new.txt")
    assert writes_in_place(Path("/dev/fd/1")) and writes_in_place(Path("/proc/self/fd/2"))
