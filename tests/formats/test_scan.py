"""The compiled scanner (trace_report/formats/_scan.pyx) gives exactly the msgspec decoder's
columns, or declines the piece (and msgspec decodes it): on every piece of every real trace and
on pieces built to hit each rule (escapes, nulls, ids of other types, duplicate keys, instant
events, invalid JSON)."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from conftest import REPO, TRACES, shared_or_skip

import trace_report.ingest.decoding as decoding
from trace_report.errors import TraceFormatError
from trace_report.formats import kineto
from trace_report.ingest.decoding import decode_file

needs_scanner = pytest.mark.skipif(kineto._scan is None, reason="the compiled scanner is not built")


def test_scanner_is_built_where_a_compiler_is() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the install goes on without the scanner")
    assert kineto._scan is not None, "pip install did not build trace_report/formats/_scan.pyx"


def _msgspec(data: bytes, monkeypatch: pytest.MonkeyPatch) -> kineto.Piece | str:
    with monkeypatch.context() as m:
        m.setattr(kineto, "_scan", None)
        try:
            return kineto.decode_piece(data)
        except (msgspec.DecodeError, TraceFormatError) as exc:
            return type(exc).__name__


def _same(a: kineto.Piece, b: kineto.Piece) -> bool:
    return (a.table.equals(b.table) and (a.n_events, a.n_missing_time, a.n_not_objects, a.n_bad_utf8)
            == (b.n_events, b.n_missing_time, b.n_not_objects, b.n_bad_utf8))


def _pieces_of(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    seen: list[bytes] = []

    def keep(data: bytes) -> kineto.Piece:
        seen.append(bytes(data))
        return kineto.decode_piece(data)

    with monkeypatch.context() as m:
        m.setattr(decoding, "decode_piece", keep)
        decode_file(path, str(path), 1, piece_bytes=1 << 20)  # small pieces: cuts land everywhere
    return seen


@needs_scanner
def test_every_piece_of_every_real_trace_decodes_as_msgspec_does(monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    files = [f for root in (TRACES, REPO / "traces") for f in sorted(root.rglob("*"))
             if f.is_file() and (".pt.trace" in f.name  # our traces/ also hold run.json files
                                 or (root == TRACES and f.name.endswith((".json", ".json.gz"))))]
    scanned = declined = 0
    for path in files:
        for data in _pieces_of(path, monkeypatch):
            fast = kineto._scanned_piece(data)
            slow = _msgspec(data, monkeypatch)
            assert not isinstance(slow, str), (path, slow)
            if fast is None:
                declined += 1
                continue
            scanned += 1
            assert _same(fast, slow), path
    assert scanned >= 30 and declined <= scanned // 10, (scanned, declined)


def _ev(**fields: object) -> str:
    return msgspec.json.encode(fields).decode()


X = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0}
ACCEPTED = {
    "plain": [X, dict(X, name="gemm", args={"correlation": 5, "External id": 9, "stream": 7, "device": 0})],
    "nulls": [dict(X, cat=None, name=None, pid=None, tid=None, ts=None, dur=None, args=None)],
    "no args, empty args": [X, dict(X, args={})],
    "legacy external id": [dict(X, args={"external id": 4}), dict(X, args={"External id": None, "external id": 3})],
    "text ids": [dict(X, pid="Spans", tid="stream 7"), dict(X, pid=-3, tid=123456789012345678)],
    "numbers": [dict(X, ts=1623212756351, dur=0), dict(X, ts=1.5e3, dur=-0.0), dict(X, ts=-2.25E-2, dur=7e+1)],
    "instants": [{"ph": "i", "name": "[memory]", "ts": 3.0, "args": {"Bytes": 512}},
                 {"ph": "I", "cat": "", "name": "[memory]", "ts": 4.0, "pid": 1},
                 {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.0},
                 {"ph": "i", "name": "other", "ts": 6.0}, {"ph": "X", "name": "[memory]", "ts": 1, "dur": 1}],
    "other phases and keys": [{"ph": "M", "name": "process_name", "args": {"name": "x"}},
                              dict(X, s="g", id=[1, {"a": [True, False, None]}], bp="e"), {}],
    "nested args": [dict(X, args={"Input Dims": [[1, 2], []], "Concrete Inputs": ["", "1"], "x": {"y": {"z": 1.5}},
                                  "correlation": 8})],
    "unicode": [dict(X, name="conv ✓ 融合", args={"note": "é"})],
    "missing times": [dict(X, ts=None), {"ph": "X", "name": "no dur", "ts": 1.0}],
    # keys that start as ours do (the scanner compares an event's keys in place, quotes included)
    "keys like ours": [dict(X, phase=1, pids=[2], tsx="3", names="n", arg={"a": 1}, durable=0, c="x", t=5,
                            p=None, n="", d=1.5, a=[], ca="y", cats=2)],
    # runs longer than 16 bytes are skipped 16 at a time: stops at every offset of a block
    "long strings": [dict(X, name="n" * k + "é" + "m" * (40 - k), args={"Call stack": "/a/b.py(1): f;" * k})
                     for k in range(0, 40, 3)],
    "digits": [dict(X, pid=-123456789012345678, ts=0.001, dur=1234567890123456, args={"correlation": 0}),
               dict(X, ts=12345678901234567890.5, dur=0.000000000000000000001, args={"stream": -7})],
}


@needs_scanner
@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_scanner_accepts_and_matches(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = ("[" + ",\n  ".join(_ev(**e) for e in ACCEPTED[case]) + "]").encode()
    fast = kineto._scanned_piece(data)
    slow = _msgspec(data, monkeypatch)
    assert fast is not None and not isinstance(slow, str)
    assert _same(fast, slow), (fast.table.to_pylist(), slow.table.to_pylist())


def test_scanner_columns_hold_the_values_written() -> None:
    if kineto._scan is None:
        pytest.skip("the compiled scanner is not built")
    data = (b'[ {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 10, "dur": 2.5,\n'
            b'   "args": {"External id": 9, "correlation": 5, "stream": 7, "device": 1}},\n'
            b'  {"ph": "i", "name": "[memory]", "ts": 11.0, "args": {"Bytes": -512}} ]')
    piece = kineto._scanned_piece(data)
    assert piece is not None and piece.n_events == 2 and piece.n_missing_time == 0
    rows = piece.table.to_pylist()
    assert rows[0] == {"cat": "kernel", "name": "gemm", "pid": "0", "tid": "stream 7", "ts_us": 10.0, "dur_us": 2.5,
                       "stream": 7, "device": 1, "correlation": 5, "external_id": 9,
                       "args": '{"External id": 9, "correlation": 5, "stream": 7, "device": 1}'}
    assert rows[1]["cat"] == kineto.MEMORY_CAT and rows[1]["dur_us"] == 0.0 and rows[1]["args"] == '{"Bytes": -512}'


DECLINED = {
    "escaped name": '[{"ph": "X", "name": "a\\"b", "ts": 1, "dur": 1}]',
    "escaped key": '[{"p\\u0068": "X", "name": "a", "ts": 1, "dur": 1}]',
    "escaped args key": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"Ex\\u0074ernal id": 3}}]',
    "float id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"stream": 7.0}}]',
    "text id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"stream": "0x0"}}]',
    "bool id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"device": true}}]',
    "float pid": '[{"ph": "X", "pid": 1.5, "ts": 1, "dur": 1}]',
    "text ts": '[{"ph": "X", "ts": "1", "dur": 1}]',
    "duplicate key": '[{"ph": "X", "ts": 1, "ts": 2, "dur": 1}]',
    "duplicate args id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"stream": 1, "stream": 2}}]',
    "array args": '[{"ph": "X", "ts": 1, "dur": 1, "args": [1]}]',
    "not an object": '[{"ph": "X", "ts": 1, "dur": 1}, 1, "x"]',
    "huge id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"correlation": 12345678901234567890}}]',
    "deep": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"a": ' + "[" * 100 + "]" * 100 + "}}]",
    "invalid utf-8": b'[{"ph": "X", "name": "\xff", "ts": 1, "dur": 1}]',
    # invalid JSON: msgspec gives the error
    "trailing comma": '[{"ph": "X", "ts": 1, "dur": 1},]',
    "unclosed": '[{"ph": "X", "ts": 1, "dur": 1}',
    "bad literal": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"a": tru}}]',
    "control char": '[{"ph": "X", "name": "a\tb", "ts": 1, "dur": 1}]',
    "bad escape": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"a": "\\x"}}]',
    "leading zero": '[{"ph": "X", "ts": 01, "dur": 1}]',
    "bare dot": '[{"ph": "X", "ts": 1., "dur": 1}]',
    "bare exponent": '[{"ph": "X", "ts": 1e, "dur": 1}]',
    "overflow": '[{"ph": "X", "ts": 1e999, "dur": 1}]',
    "overflow in args": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"a": -1e999}}]',
    "text after the array": '[{"ph": "X", "ts": 1, "dur": 1}] x',
    "missing colon": '[{"ph" "X"}]',
    "object, not array": '{"ph": "X"}',
    "escape after a long run": '[{"ph": "X", "name": "' + "a" * 37 + '\\n", "ts": 1, "dur": 1}]',
    "control char after a long run": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"s": "' + "b" * 29 + '\x01"}}]',
    "cut after a key": '[{"ph": "X", "ts": 1, "dur"',
    "cut inside a key": '[{"ph": "X", "ts": 1, "du',
    "19-digit pid": '[{"ph": "X", "pid": 1234567890123456789, "ts": 1, "dur": 1}]',
    "negative zero id": '[{"ph": "X", "ts": 1, "dur": 1, "args": {"device": -0}}]',
}


@needs_scanner
@pytest.mark.parametrize("case", sorted(DECLINED))
def test_scanner_declines_and_msgspec_decides(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = DECLINED[case]
    data = raw if isinstance(raw, bytes) else raw.encode()
    assert kineto._scanned_piece(data) is None
    slow = _msgspec(data, monkeypatch)
    try:
        whole: kineto.Piece | str = kineto.decode_piece(data)
    except (msgspec.DecodeError, TraceFormatError) as exc:
        whole = type(exc).__name__
    if isinstance(slow, str):
        assert whole == slow
    else:
        assert not isinstance(whole, str) and _same(whole, slow)


def test_empty_and_blank_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    for data in (b"[]", b" [ \n ] \n", b"[{}]"):
        slow = _msgspec(data, monkeypatch)
        fast = kineto.decode_piece(data)
        assert not isinstance(slow, str) and _same(fast, slow)


def test_ids_outside_int64_are_dropped_not_a_crash() -> None:
    data = (b'[{"ph": "X", "pid": 98765432109876543210, "ts": 1, "dur": 1, '
            b'"args": {"correlation": 12345678901234567890, "stream": 7}}]')
    row = kineto.decode_piece(data).table.to_pylist()[0]
    assert (row["correlation"], row["stream"], row["pid"]) == (None, 7, "98765432109876543210")


@needs_scanner
def test_times_parse_to_the_same_doubles_as_msgspec(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clinger's fast path (mantissa < 2**53, power of ten <= 22) and strtod for the rest give
    the correctly rounded double, as msgspec does: shortest reprs of random doubles, Kineto-style
    microsecond stamps, and decimal strings with 15-20 digits and exponents on both sides of 22."""
    import random

    rng = random.Random(11)
    texts = ["0.1", "1e22", "1e23", "9007199254740993", "123456789012345.678", "1.7976931348623157e308",
             "5e-324", "2.2250738585072014e-308", "0.000001", "-0.0", "1623212756351.123", "4203669603018.756",
             "0.30000000000000004", "1.5000000000000000000", "100000000000000000000000", "7e-23", "12.3456e-20"]
    texts += [repr(rng.uniform(-1e6, 1e16)) for _ in range(400)]
    texts += [repr(rng.expovariate(1e-3) * 10.0 ** rng.randint(-30, 30)) for _ in range(400)]
    texts += [f"{rng.randint(0, 10**rng.randint(1, 20))}.{rng.randint(0, 999999):06d}" for _ in range(400)]
    texts += [f"{rng.randint(1, 99999)}e{rng.randint(-40, 40)}" for _ in range(400)]
    data = ("[" + ",".join(f'{{"ph": "X", "ts": {t}, "dur": {t}}}' for t in texts) + "]").encode()
    fast = kineto._scanned_piece(data)
    slow = _msgspec(data, monkeypatch)
    assert fast is not None and not isinstance(slow, str)
    got = fast.table.column("ts_us").to_pylist()
    want = slow.table.column("ts_us").to_pylist()
    assert [(t, g) for t, g, w in zip(texts, got, want, strict=True) if repr(g) != repr(w)] == []
    assert want[:3] == [0.1, 1e22, 1e23] and want[9] == -0.0 and str(want[9]) == "-0.0"
