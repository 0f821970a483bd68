"""The storage seam (trace_report/storage.py) on a local S3 server and on local files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from trace_report import storage
from trace_report.errors import InputError


def test_url_or_path() -> None:
    assert storage.location("s3://bkt/run-42/") == "s3://bkt/run-42/"
    assert storage.location("run-42/r0.json") == Path("run-42/r0.json")
    assert storage.location("file:///tmp/x") == Path("file:/tmp/x")
    assert not storage.is_url("C://x") and not storage.is_url(Path("s3://b"))
    assert storage.shown("s3://AKIA:SECRET@bkt/x") == "s3://bkt/x"


def test_round_trip_keeps_gzip_bytes(bucket: str, tmp_path: Path) -> None:
    """A .gz object reads back as stored (pyarrow would un-gzip it by its suffix), whole and by range."""
    raw = gzip.compress(b'{"traceEvents": []}' * 1000)
    url = storage.join(bucket, "run", "r0.json.gz")
    storage.write_bytes(url, raw)
    with storage.open_stream(url) as fh:
        assert fh.read() == raw
    assert storage.read_range(url, 3, 10) == raw[3:13]
    info = storage.stat(url)
    assert info.size == len(raw) and info.etag and info.mtime_ns > 0
    assert [o.location for o in storage.list_prefix(bucket)] == [url]
    assert storage.is_prefix(storage.join(bucket, "run")) and not storage.is_prefix(url)
    local = storage.download(url, tmp_path / "r0.json.gz")
    assert local.etag == info.etag and (tmp_path / "r0.json.gz").read_bytes() == raw
    assert (tmp_path / "r0.json.gz").stat().st_mtime_ns == info.mtime_ns
    storage.delete(url)
    assert storage.list_prefix(bucket) == []


def test_etag_changes_with_content(bucket: str) -> None:
    url = storage.join(bucket, "a.json")
    storage.write_bytes(url, b"[1]")
    first = storage.stat(url)
    storage.write_bytes(url, b"[2]")
    assert storage.stat(url).etag != first.etag


def test_duckdb_reads_and_writes_through_register(bucket: str) -> None:
    import duckdb

    con = duckdb.connect()
    storage.register(con, bucket)
    target = storage.join(bucket, "out", "x.parquet")
    con.execute(f"COPY (SELECT range AS x FROM range(5)) TO '{target}' (FORMAT parquet)")
    assert con.execute(f"SELECT sum(x) FROM read_parquet('{target}')").fetchall() == [(10,)]


def test_errors_name_the_url(bucket: str) -> None:
    with pytest.raises(InputError, match=r"^s3://no-such-bucket-here/x\.json: no such bucket$"):
        storage.stat("s3://no-such-bucket-here/x.json")
    with pytest.raises(InputError, match=r": no such object or prefix$"):
        storage.stat(storage.join(bucket, "missing.json"))
    with pytest.raises(InputError, match="may not hold credentials") as info:
        storage.stat("s3://AKIAEXAMPLE:wJalrSECRET@bkt/x.json")
    assert "wJalrSECRET" not in str(info.value) and "AKIAEXAMPLE" not in str(info.value)


def test_fsspec_fallback(tmp_path: Path) -> None:
    """A scheme pyarrow has no file system of its own for goes through fsspec."""
    storage.write_bytes("memory://traces/t.json", b"[]")
    assert storage.stat("memory://traces/t.json").size == 2
    with storage.open_stream("memory://traces/t.json") as fh:
        assert fh.read() == b"[]"


def test_parquet_piece_and_sandbox(bucket: str, tmp_path: Path) -> None:
    """A Parquet piece written to a bucket reads back through DuckDB; a sandboxed connection
    (trace_report.store.sandbox) reads neither it nor a local file outside its folders, though
    the file system is registered on it."""
    import duckdb
    import pyarrow as pa

    from trace_report.store.sandbox import sandbox

    url = storage.join(bucket, "pieces", "p0.parquet")
    storage.write_parquet(pa.table({"x": [1, 2, 3]}), url)
    (tmp_path / "allowed").mkdir()
    storage.write_parquet(pa.table({"x": [4]}), tmp_path / "outside.parquet")
    con = duckdb.connect()
    storage.register(con, bucket)
    assert con.execute(f"SELECT sum(x) FROM read_parquet('{url}')").fetchall() == [(6,)]
    sandbox(con, [str(tmp_path / "allowed")])
    for target in (url, tmp_path / "outside.parquet"):
        with pytest.raises(duckdb.Error):
            con.execute(f"SELECT * FROM read_parquet('{target}')").fetchall()
