"""Objects larger than the head the kind detection reads are streamed, never copied whole: a
plain or gzip trace is decoded from one GET as it arrives, a tar archive unpacked from it.

The local run of the same files is the reference. The head size is lowered for the small shared
traces (``inputs.HEAD_BYTES``); a plain trace of 35 MB streams at the default size.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TRACES, shared_or_skip
from tests.storage.test_storage_inputs import GZ, TAR, Mirror, _ingest, _same_output

SMALL_HEAD = 16 << 10


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Heads of :data:`SMALL_HEAD`; copying an object whole fails the test; yields the URLs opened as streams."""
    from trace_report import inputs, staging, storage

    opened: list[str] = []
    open_input = storage.open_input

    def logged(loc: object, buffering: int = -1) -> object:
        if storage.is_url(loc):
            opened.append(str(loc))
        return open_input(loc, buffering)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "HEAD_BYTES", SMALL_HEAD)
    monkeypatch.setattr(staging.storage, "download", lambda loc, dest: pytest.fail(f"{loc} copied whole"))
    monkeypatch.setattr(storage, "open_input", logged)
    yield opened


def test_gzip_objects_stream_same_as_local(mirror: Mirror, streamed: list[str]) -> None:
    local, url = mirror(GZ)
    _same_output(["top-kernels"], local, url + "/")
    assert streamed == [f"{url}/{p.name}" for p in local.iterdir()]


def test_tar_object_unpacked_from_its_stream(mirror: Mirror, streamed: list[str]) -> None:
    local, url = mirror(TAR)
    _same_output(["top-kernels", "--by-rank"], local / "dlrm_kineto.tar.gz", f"{url}/dlrm_kineto.tar.gz")
    assert streamed == [f"{url}/dlrm_kineto.tar.gz"]


def test_streamed_object_keeps_its_identity(tmp_path: Path, mirror: Mirror, streamed: list[str]) -> None:
    """``traces`` holds the SHA-256 and size of the object's bytes (computed here from the file),
    and an unchanged object is skipped by its ETag, size and time without being read again."""
    import duckdb

    from trace_report import storage

    local, url = mirror(GZ)
    trace = next(local.iterdir())
    db = tmp_path / "runs.duckdb"
    code, out = _ingest(url, db)
    assert code == 0, out
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT path, sha256, file_bytes FROM traces").fetchall()
    data = trace.read_bytes()
    assert rows == [(f"{url}/{trace.name}", hashlib.sha256(data).hexdigest(), len(data))]
    assert storage.stat(f"{url}/{trace.name}").size == len(data)
    streamed.clear()
    code, out = _ingest(url, db)
    assert code == 0 and "already ingested" in out, out
    assert streamed == []


def test_object_changed_while_streamed_is_not_stored(tmp_path: Path, mirror: Mirror, streamed: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from trace_report import storage

    _, url = mirror(GZ)
    open_input = storage.open_input  # the logging one

    def open_then_overwrite(loc: object, buffering: int = -1) -> object:
        stream = open_input(loc, buffering)
        if storage.is_url(loc):  # a new upload meanwhile, which the stream may read in part or whole
            storage.write_bytes(str(loc), gzip.compress(gzip.decompress(storage.read_range(loc, 0, 1 << 30)) + b"\n"))
        return stream

    monkeypatch.setattr(storage, "open_input", open_then_overwrite)
    code, out = _ingest(url, tmp_path / "runs.duckdb")
    assert code == 1 and "changed while it was read" in out and url in out, out
    assert out.count("Error:") == 1 and "Traceback" not in out


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_large_object_streams_at_the_default_head(tmp_path: Path, bucket: str, upload: object,
                                                  monkeypatch: pytest.MonkeyPatch, compress: bool) -> None:
    """A plain trace of 35 MB (and its gzip) is decoded from its stream, the same as the local file."""
    from trace_report import inputs, staging

    shared_or_skip()
    source = TRACES / "hta_trace_diff" / "control.json.gz"
    local = tmp_path / "run" / ("control.json.gz" if compress else "control.json")
    local.parent.mkdir()
    data = gzip.decompress(source.read_bytes())
    local.write_bytes(gzip.compress(data, compresslevel=0) if compress else data)  # level 0: larger than a head
    assert local.stat().st_size > inputs.HEAD_BYTES
    url = upload(local, f"{bucket}/run/{local.name}")  # type: ignore[operator]
    monkeypatch.setattr(staging.storage, "download", lambda loc, dest: pytest.fail(f"{loc} copied whole"))
    _same_output(["top-kernels"], local, url)
