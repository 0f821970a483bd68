"""gzip traces: bounded streaming, and decompression bombs refused with one error line."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import REPO, invoke, trace_file

from trace_report.errors import TraceFormatError
from trace_report.formats import kineto
from trace_report.formats.kineto import MAX_EVENT_BYTES, MAX_RATIO
from trace_report.ingest import decoding
from trace_report.ingest.decoding import decode_file
from trace_report.ingest.files import decoded_size

RSS_LIMIT_MB = 512
"""Peak RSS allowed to a CLI process refusing a bomb: the interpreter with its libraries (~250 MB)
plus one event at the 64 MB limit and its copies (~330 MB measured); unbounded, the 100 KB
"huge event" file was ingested at 1.3 GB, and a 510 KB bomb reached 4.7 GB."""


def write_gz(path: Path, head: bytes, fill: bytes, n_fill: int, tail: bytes) -> Path:
    """A gzip file of ``head + fill * n_fill + tail``, written without holding it whole."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        fh.write(deflate.compress(head))
        chunk = fill * ((1 << 20) // len(fill))
        for _ in range(n_fill * len(fill) // len(chunk)):
            fh.write(deflate.compress(chunk))
        fh.write(deflate.compress(tail) + deflate.flush())
    return path


def spaces_bomb(tmp_path: Path) -> Path:
    """~100 KB that inflates to 100 MB of white space inside ``traceEvents`` (ratio ~1000:1)."""
    return write_gz(tmp_path / "bomb.json.gz", b'{"traceEvents": [', b" ", 100 << 20, b"]}")


def huge_event(tmp_path: Path) -> Path:
    """One event whose name is a 100 MB string."""
    return write_gz(tmp_path / "huge.json.gz", b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "name": "',
                    b"a", 100 << 20, b'"}]}')


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Error:")]


def test_decompression_bomb_is_refused(tmp_path: Path) -> None:
    bomb = spaces_bomb(tmp_path)
    result = invoke(["ingest", bomb, "-o", tmp_path / "db.duckdb", "--no-progress"])
    assert result.exit_code == 1, result.output
    (line,) = error_lines(result.output)
    assert "bomb.json.gz" in line and "decompression bomb" in line and "--max-ratio" in line
    assert not (tmp_path / "db.duckdb").exists()


def test_event_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = huge_event(tmp_path)
    # --max-ratio 0 turns the ratio guard off: the event limit must stop it on its own
    result = invoke(["ingest", path, "-o", tmp_path / "db.duckdb", "--no-progress", "--max-ratio", "0"])
    assert result.exit_code == 1, result.output
    (line,) = error_lines(result.output)
    assert "huge.json.gz" in line and f"larger than {MAX_EVENT_BYTES >> 20} MB" in line


def test_the_limits_leave_real_ratios_alone() -> None:
    assert 30 < MAX_RATIO < 1000  # real traces: under 30:1; deflate's most: ~1032:1
    assert MAX_EVENT_BYTES >= 16 << 20


PEAK_SNIPPET = """
import sys
from trace_report.cli.app import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = int(exc.code or 0)
# VmHWM: this address space's peak. (ru_maxrss is kept across fork and exec on Linux, so it would
# report the peak of the test process that started this one.)
hwm = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("PEAK_KB", hwm, file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("make, extra", [(spaces_bomb, []), (huge_event, ["--max-ratio", "0"])])
def test_bombs_are_refused_in_bounded_memory(make, extra: list[str], tmp_path: Path) -> None:  # noqa: ANN001
    path = make(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_SNIPPET, "ingest", str(path), "-o", str(tmp_path / "db.duckdb"),
         "--no-progress", *extra],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert len(error_lines(proc.stderr)) == 1, proc.stderr
    peak_mb = int(proc.stderr.split("PEAK_KB")[1].split()[0]) / 1024
    assert peak_mb < RSS_LIMIT_MB, f"peak RSS {peak_mb:.0f} MB"


def events(n: int, start: int = 0) -> list[dict]:
    return [{"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": i, "dur": 1,
             "args": {"correlation": i, "stream": 7, "items": [{"a": 1}, {"b": i}]}} for i in range(start, start + n)]


def test_streamed_pieces_are_released_once_written(tmp_path: Path) -> None:
    """Accepted jobs keep no bytes (a gzip file's pieces were all held until its end)."""
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events(3000), "meta": [{"x": 1}]}).encode()))
    envelope, results = decode_file(path, path.name, 1, piece_bytes=4096)
    assert len(results) > 20
    assert all(job.data == b"" for job, _ in results)
    assert sum(r.stats.rows for _, r in results) == 3000
    assert envelope.metadata["meta"] == [{"x": 1}]


def test_concatenated_gzip_members(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": events(500)}).encode()
    path = tmp_path / "two.json.gz"
    for padding in (b"", b"\0" * 700):  # gzip (the tool and the module) accept zero padding
        path.write_bytes(gzip.compress(text[:1000]) + padding + gzip.compress(text[1000:]) + padding)
        assert gzip.decompress(path.read_bytes()) == text
        _, results = decode_file(path, path.name, 1, piece_bytes=2048)
        assert sum(r.stats.rows for _, r in results) == 500


def test_decoded_size_of_gzip_counts_its_content(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": events(2000)}).encode()
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    assert decoded_size(plain) == len(text)
    assert decoded_size(packed) >= len(text) > packed.stat().st_size


def test_invalid_piece_is_not_carried_to_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece that no merge can repair is reported once the merge passes its bound, instead
    of collecting the rest of the file in memory."""
    good = json.dumps(events(3000))
    broken = good.replace('"name": "k3"', '"name": "k3" "oops"', 1)
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": ' + broken.encode() + b"}"))
    monkeypatch.setattr(decoding, "MAX_EVENT_BYTES", 0)  # the bound: two pieces
    pieces: list[int] = []
    with pytest.raises(TraceFormatError, match="invalid JSON"):
        decode_file(path, path.name, 1, piece_bytes=4096, on_piece=pieces.append)
    assert len(pieces) < 20  # of ~100 pieces in the file


def test_fast_inflater_reads_a_real_trace_as_gzip_does() -> None:
    """zlib-ng (the installed inflater) yields the bytes the standard library's gzip does, at most a
    piece per read, and hashes the file as stored."""
    pytest.importorskip("zlib_ng")
    assert kineto._inflate.__name__.endswith("zlib_ng")
    path = trace_file("kineto_rn50_nw4_2021jun")
    reader = kineto._HashingReader(path, 1 << 20)
    blocks = []
    while block := reader.read():
        assert len(block) <= 1 << 20
        blocks.append(block)
    reader.close()
    assert b"".join(blocks) == gzip.decompress(path.read_bytes())
    assert reader.digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("inflater", ["installed", "standard library"])
def test_gzip_reader_members_padding_digest_and_damage(inflater: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader behind every streamed trace, with zlib-ng and with the fallback (the standard
    library's zlib, used where zlib-ng is missing): members and zero padding read as gzip.decompress
    reads them, at most a block per read, every stored byte hashed; a truncated and a corrupt file
    are one TraceFormatError each."""
    if inflater == "standard library":
        monkeypatch.setattr(kineto, "_inflate", zlib)
    text = json.dumps({"traceEvents": events(500)}).encode()
    data = gzip.compress(text[:1000]) + b"\0" * 700 + gzip.compress(text[1000:]) + b"\0" * 3
    path = tmp_path / "t.json.gz"

    def read_all() -> tuple[bytes, kineto._HashingReader]:
        reader = kineto._HashingReader(path, 4096)
        blocks = []
        try:
            while block := reader.read():
                assert len(block) <= 4096
                blocks.append(block)
        finally:
            reader.close()
        return b"".join(blocks), reader

    path.write_bytes(data)
    out, reader = read_all()
    assert out == gzip.decompress(data) == text
    assert reader.raw_bytes == len(data) and reader.digest.hexdigest() == hashlib.sha256(data).hexdigest()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated gzip file"):
        read_all()
    whole = gzip.compress(text)
    path.write_bytes(whole[:-8] + bytes([whole[-8] ^ 0xFF]) + whole[-7:])  # CRC-32 of the member changed
    with pytest.raises(TraceFormatError, match="corrupt gzip data"):
        read_all()
