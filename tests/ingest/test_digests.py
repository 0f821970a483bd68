"""SHA-256 of plain traces computed ahead of their decoding (trace_report.ingest.digests): the
digest is the file's, each file is read for it once, a changed file is hashed again, and the module
loads without the heavy libraries."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from conftest import run_cli

from trace_report.ingest import digests, files


def _trace(path: Path, n: int) -> bytes:
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": 5.0,
               "args": {"correlation": i, "stream": 7}} for i in range(n)]
    data = json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()
    path.write_bytes(data)
    return data


def _wait_idle(timeout: float = 10.0) -> None:
    hasher = digests._hasher
    assert hasher is not None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with hasher.cond:
            if hasher.running is None and hasher.done:
                return
        time.sleep(0.01)
    raise AssertionError("background hashing did not finish")


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    monkeypatch.setattr(digests, "PREHASH_MIN_BYTES", 1)
    yield
    digests.stop_hashing()


def test_plain_files_of_a_folder_are_hashed_ahead_gzip_ones_are_not(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    plain = _trace(tmp_path / "sub" / "a.json", 500)
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(_trace(tmp_path / "tmp.json", 50)))
    (tmp_path / "tmp.json").unlink()
    (tmp_path / "notes.txt").write_text("not json")
    digests.start_hashing([tmp_path])
    _wait_idle()
    ahead = digests.claim(tmp_path / "sub" / "a.json")
    assert ahead is not None
    assert ahead() == hashlib.sha256(plain).hexdigest()
    assert digests.claim(tmp_path / "b.json.gz") is None  # hashed while it is inflated
    assert digests.claim(tmp_path / "notes.txt") is None


def test_a_file_changed_after_it_was_hashed_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    _trace(path, 300)
    digests.start_hashing([path])
    _wait_idle()
    changed = _trace(path, 301)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert digests.claim(path) is None  # so the decoding hashes what it reads
    assert digests.sha256_file(path) == hashlib.sha256(changed).hexdigest()


def test_nothing_after_stop(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    _trace(path, 100)
    digests.stop_hashing()
    assert digests.claim(path) is None


def test_ingest_stores_the_files_sha256_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.json"
    data = _trace(path, 2000)
    reads: list[Path] = []
    real = digests.sha256_file

    def counted(p: Path) -> str:
        reads.append(Path(p))
        return real(p)

    monkeypatch.setattr(digests, "sha256_file", counted)  # the background thread
    monkeypatch.setattr(files, "sha256_file", counted)  # the decoding's own hashing
    code, _, err = run_cli(["ingest", path, "-o", tmp_path / "t.duckdb"])
    assert code == 0, err
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    try:
        (sha,), = con.execute("SELECT sha256 FROM traces").fetchall()
    finally:
        con.close()
    assert sha == hashlib.sha256(data).hexdigest()
    assert reads == [path]  # by the background thread only, not again beside the decoding


def test_an_analysis_of_a_raw_trace_hashes_it_ahead_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command on raw traces starts their SHA-256 when its command line is parsed (before it
    imports the analysis libraries); its in-memory ingest takes the digest and reads no more."""
    import threading

    path = tmp_path / "t.json"
    data = _trace(path, 2000)
    reads: list[tuple[str, Path]] = []
    real = digests.sha256_file

    def counted(p: Path) -> str:
        reads.append((threading.current_thread().name, Path(p)))
        return real(p)

    monkeypatch.setattr(digests, "sha256_file", counted)
    monkeypatch.setattr(files, "sha256_file", counted)
    code, out, err = run_cli(["sql", path, "SELECT sha256 FROM traces", "--format", "csv"])
    assert code == 0, err
    assert out.split() == ["sha256", hashlib.sha256(data).hexdigest()]
    assert reads == [("trace-report-sha256", path)]


def test_the_module_loads_before_numpy_pyarrow_and_duckdb() -> None:
    code = ("import sys, trace_report.ingest.digests; "
            "print(sorted({'numpy', 'pyarrow', 'duckdb', 'pandas'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
