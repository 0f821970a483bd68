"""``_scan.scan_only``, the scanner's pass with no column written (the "scanner alone" of
benchmarks/shapes.py): the same events, rows and missing times as the msgspec decoder counts,
and None exactly where ``scan_events`` declines a piece."""

from __future__ import annotations

import msgspec
import pytest
from conftest import TRACES, shared_or_skip

from trace_report.formats import kineto

needs_scanner = pytest.mark.skipif(kineto._scan is None, reason="the compiled scanner is not built")

X = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0}
EVENTS = [
    X,
    dict(X, args={"correlation": 5, "External id": 9, "stream": 7, "device": 0}),
    dict(X, ts=None),  # a missing time
    {"ph": "X", "name": "no dur", "ts": 1.0},  # another
    {"ph": "i", "name": "[memory]", "ts": 3.0, "args": {"Bytes": 512}},  # kept: an allocator instant
    {"ph": "i", "name": "other", "ts": 6.0},  # not kept
    {"ph": "M", "name": "process_name", "args": {"name": "x"}},  # not kept
    dict(X, args={"Input Dims": [[1, 2], []], "x": {"y": {"z": 1.5}}}),
]
DECLINED = {
    "escape in a name": '[{"ph": "X", "name": "a\\"b", "ts": 1, "dur": 1}]',
    "a key given twice": '[{"ph": "X", "ts": 1, "ts": 2, "dur": 1}]',
    "a float id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"correlation": 1.5}}]',
    "not an object": '[{"ph": "X", "ts": 1, "dur": 1}, 3]',
    "invalid JSON": '[{"ph": "X", "ts": 1, "dur": 1},]',
    "cut inside an event": '[{"ph": "X", "ts": 1, "args": {"a": 1}]',
}


def _counts(data: bytes) -> tuple[int, int, int]:
    """(events, kept rows, rows missing a time) as the msgspec decoder gives them."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kineto, "_scan", None)
        piece = kineto.decode_piece(data)
    return piece.n_events, piece.table.num_rows, piece.n_missing_time


@needs_scanner
def test_scan_only_counts_what_the_decoder_counts() -> None:
    data = ("[" + ",\n ".join(msgspec.json.encode(e).decode() for e in EVENTS) + "]").encode()
    assert kineto._scan.scan_only(data) == _counts(data) == (8, 6, 2)
    assert kineto._scan.scan_only(b" [ ] ") == (0, 0, 0)


@needs_scanner
@pytest.mark.parametrize("case", sorted(DECLINED))
def test_scan_only_declines_what_scan_events_declines(case: str) -> None:
    data = DECLINED[case].encode()
    assert kineto._scan.scan_events(data, kineto.MEMORY_CAT.encode()) is None
    assert kineto._scan.scan_only(data) is None


@needs_scanner
def test_scan_only_on_the_pieces_of_a_real_trace() -> None:
    shared_or_skip()
    path = TRACES / "param_linear_kineto_2080ti" / "linear_kineto.json.gz"
    stream = kineto.PieceStream(path, 1 << 20)
    scanned = 0
    for raw in stream:
        data = stream.split_tail(raw) if isinstance(raw, kineto.TailBytes) else raw
        full = kineto._scan.scan_events(data, kineto.MEMORY_CAT.encode())
        only = kineto._scan.scan_only(data)
        assert (only is None) == (full is None)
        if full is not None:
            assert only == full[:3] == _counts(data)
            scanned += 1
    assert scanned >= 10
