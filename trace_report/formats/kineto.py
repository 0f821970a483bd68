"""Streaming reader for Chrome Trace Event Format files written by Kineto / PyTorch Profiler.

A trace is either an object ``{"schemaVersion": ..., "traceEvents": [...], ...}`` or a bare
top-level array of events (2020 Kineto). The reader never holds a whole file: it reads blocks,
cuts the ``traceEvents`` array at event boundaries (``},{`` with optional white space) and
decodes each piece with msgspec into Arrow columns. A cut that lands inside a nested object
makes the piece invalid JSON; such a piece is merged with the next one and decoded again, so
the result never depends on where blocks happen to end.

Spec: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
(Trace Event Format); variants seen in real traces: ``../shared/FORMATS.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Annotated, Any

import msgspec
import numpy as np
import pyarrow as pa

from trace_report import arrowcalls as ac
from trace_report import storage
from trace_report.errors import TraceFormatError
from trace_report.formats.magic import GZIP_MAGIC, is_gzip
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.storage import Location

# zlib-ng inflates the stream in less than half of zlib's CPU time; its decompressobj is CPython's
# zlib code over zlib-ng, so ``max_length`` bounds each call
# as with zlib (tests/test_gzip_limits.py: same peak RSS on both bombs). zlib is the fallback.
# python-isal's inflate is as fast but, behind PieceStream, let a 100 KB gzip bomb reach 754 MB
# before it was refused: not used.
try:
    from zlib_ng import zlib_ng as _inflate
except ImportError:  # pragma: no cover - zlib-ng is a dependency; plain zlib still works
    _inflate = zlib  # type: ignore[no-redef]
_INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)

# The compiled scanner (trace_report/formats/_scan.pyx, built at install when a C compiler is
# there): the same columns as the msgspec decoder below, in one pass of C, for the pieces it
# accepts (it returns None for the rest, which msgspec decodes). Without it, msgspec does all.
try:
    from trace_report.formats import _scan
except ImportError:  # pragma: no cover - built by `pip install`; the msgspec path still works
    _scan = None  # type: ignore[assignment]


def has_compiled_scanner() -> bool:
    """Whether the compiled scanner (``_scan``) was built at install."""
    return _scan is not None


MEMORY_EVENT = "[memory]"
MEMORY_CAT = "cpu_instant_event"
"""Besides complete (``ph: X``) events, the allocator's ``[memory]`` instant events are kept
(``dur_us = 0``; 2021 traces give them no category, they get ``cpu_instant_event``)."""

PIECE_BYTES = 8 << 20
"""Target size of one piece (the unit of decoding), and the bytes read from the (decompressed)
stream at a time."""

MAX_EVENT_BYTES = 64 << 20
"""Largest single event (and largest header before ``traceEvents`` or trailer after it) that the
streaming reader accepts. Real events are at most a few KB (the largest seen in ../shared is
under 1 MB); a bigger one is a damaged file or a bomb, and holding it would cost memory without
bound, so it is a :class:`TraceFormatError` naming the file."""

MAX_RATIO = 300
"""Largest accepted ratio of decompressed to compressed bytes of a gzip trace. Real Kineto traces
compress 10-30:1 (28:1 at most in ../shared); deflate cannot exceed ~1032:1, which a bomb of one
repeated byte reaches. Override per ingest (``trace-report ingest --max-ratio N``; 0 = no limit)."""

RATIO_CHECK_AFTER = 8 << 20
"""Decompressed bytes after which :data:`MAX_RATIO` is enforced (small files are never refused)."""

READ_BYTES = 1 << 20
"""Decoded bytes read from a streamed file at a time: a piece is joined from several such blocks,
and what runs past its cut (less than a block) is copied to start the next piece."""

TAIL_CUT_MIN = 64 << 10
"""At the end of a streamed file, events before the last one go out as a piece of their own when
they are at least this many bytes; the rest (last event, ``]``, trailer) is the tail."""

RAW_BLOCK = 1 << 20
"""Compressed bytes read from a gzip file at a time (inflated at most a piece at a time)."""

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
UTF8_BOM = b"\xef\xbb\xbf"
"""A byte-order mark, which Windows editors write at the start of UTF-8 files: not JSON (RFC 8259
section 8.1 lets a parser ignore it), skipped before the trace is read."""
_WS = b" \t\r\n"


_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
"""An id column is int64: a larger number fails the typed decode, and the untyped one drops it."""


class _Args(msgspec.Struct, gc=False):
    correlation: _Int64 | None = None
    external_id: _Int64 | None = msgspec.field(default=None, name="External id")
    external_id_legacy: _Int64 | None = msgspec.field(default=None, name="external id")
    stream: _Int64 | None = None
    device: _Int64 | None = None


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw(b"")


_EMPTY_ARGS = _Args()


_DEC_EVENTS = msgspec.json.Decoder(list[_Event])
_DEC_ARGS = msgspec.json.Decoder(list[_Args | None])
_DEC_ANY = msgspec.json.Decoder()


class _HasPh(msgspec.Struct, gc=False):
    ph: str


_DEC_CHECK = msgspec.json.Decoder(list[_HasPh])
_DEC_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])

TOO_DEEP = "invalid JSON (arrays or objects nested too deeply)"
"""msgspec stops at a nesting depth that Python's recursion limit allows; no real trace nears it."""

EVENT_SCHEMA = pa.schema([f for f in EVENTS_SCHEMA if f.name not in ("trace_id", "event_id")])
"""Arrow schema of one decoded piece: the complete (``ph: X``) events, in file order."""


class TailBytes(bytes):
    """The raw end of a file (last events, ``]``, metadata): see :meth:`PieceStream.split_tail`."""


@dataclass
class Piece:
    """One decoded piece of ``traceEvents``: its complete events and its event count."""

    table: pa.Table
    n_events: int
    n_missing_time: int = 0
    n_not_objects: int = 0
    n_bad_utf8: int = 0
    args_suspects: np.ndarray | None = None
    """From the compiled scanner: bool per row, False where ``args`` cannot match
    :data:`~trace_report.redact.PRECHECK_PATTERN` (none of its strings has an anchor word, an
    escape or a non-ASCII byte); None: every row may."""


@dataclass
class TraceEnvelope:
    """Everything in a trace file around ``traceEvents``: metadata keys and the file digest."""

    metadata: dict[str, Any] = field(default_factory=dict)
    top_level_array: bool = False
    sha256: str = ""
    raw_bytes: int = 0


def _as_text(value: int | str | None) -> str | None:
    return None if value is None else str(value)


def _to_text_column(values: list[int | str | None]) -> pa.Array:
    """pid/tid values (ints, or strings such as ``"stream 7"``) as one string column."""
    first = next((v for v in values if v is not None), None)
    order = (pa.string(), pa.int64()) if isinstance(first, str) else (pa.int64(), pa.string())
    for kind in order:
        try:
            arr = pa.array(values, kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            continue
        return arr if kind == pa.string() else ac.cast(arr, pa.string())
    return pa.array([_as_text(v) for v in values], pa.string())


def _text_column(raws: list[msgspec.Raw]) -> pa.Array:
    """A string column over raw JSON texts (empty = null), built from one buffer and offsets."""
    lengths = np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws))
    offsets = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.packbits(lengths > 0, bitorder="little")
    data = b"".join(raws)
    return ac.cast(pa.Array.from_buffers(
        pa.large_string(), len(raws), [pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
    ), pa.string())


def replace_bad_utf8(data: bytes) -> tuple[bytes, int]:
    """``data`` with each invalid UTF-8 sequence replaced by U+FFFD, and how many were."""
    text = data.decode("utf-8", "replace")
    return text.encode(), text.count("\ufffd") - data.count("\ufffd".encode())


def is_utf8_error(exc: Exception, data: bytes) -> bool:
    """Whether decoding ``data`` failed with ``exc`` because it is not valid UTF-8: msgspec up to
    0.22 raises UnicodeDecodeError, later versions a DecodeError ("Invalid UTF-8 encoded string")."""
    if isinstance(exc, UnicodeDecodeError):
        return True
    if not isinstance(exc, msgspec.DecodeError) or data.isascii():
        return False
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return True
    return False


def decode_piece(data: bytes) -> Piece:
    """Decode ``data`` (a JSON array of events) into a :class:`Piece`.

    Invalid UTF-8 is replaced by U+FFFD (counted in ``n_bad_utf8``) rather than failing the
    trace: a name with one broken byte should not hide a day's profile. Raises
    ``msgspec.DecodeError`` when ``data`` is not valid JSON and :class:`TraceFormatError` when
    it is not an array or nests too deeply.
    """
    try:
        try:
            return _decode_piece(data)
        except (UnicodeDecodeError, msgspec.DecodeError) as exc:
            if is_utf8_error(exc, data):
                fixed, n_bad = replace_bad_utf8(data)
                piece = decode_piece(fixed)  # valid UTF-8 now: may still need the lenient pass
                piece.n_bad_utf8 += n_bad
                return piece
            lenient = lenient_events(data)
            if lenient is None:
                raise
            events, n_bad = lenient
            piece = _decode_piece_untyped(data, events)
            piece.n_bad_utf8 = n_bad
            return piece
    except RecursionError:
        raise TraceFormatError(TOO_DEEP) from None


_LENIENT_TOKENS = (b"NaN", b"Infinity", b"\\ud", b"\\uD")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lenient_events(data: bytes) -> tuple[list[Any], int] | None:
    """The events of ``data`` that strict JSON refuses for a ``NaN`` or ``Infinity`` literal (as
    Python's ``json.dumps`` writes them) or a lone surrogate escape (``"\\ud800"``), decoded by
    :func:`json.loads`, which takes both; each lone surrogate becomes U+FFFD (the count comes
    back). The numbers are NaN or infinite: the ingest drops those events and counts them
    (:func:`trace_report.ingest.normalize.finalize`). None when ``data`` holds none of these
    tokens or is no JSON even so (a piece cut inside an event)."""
    if not any(token in data for token in _LENIENT_TOKENS):
        return None
    try:
        events = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(events, list):
        return None
    text = json.dumps(events, ensure_ascii=False)
    n_bad = len(_SURROGATE.findall(text))
    return (json.loads(_SURROGATE.sub("\ufffd", text)) if n_bad else events), n_bad


def _bitmap(valid: bytes) -> pa.Buffer:
    return pa.py_buffer(np.packbits(np.frombuffer(valid, np.uint8), bitorder="little"))


def _scanned_piece(data: bytes) -> Piece | None:
    """:func:`decode_piece` through the compiled scanner, or None where it declines the piece."""
    if not data.isascii():
        try:
            str(data, "utf-8")
        except UnicodeDecodeError:
            return None
    out = _scan.scan_events(data, MEMORY_CAT.encode())
    if out is None:
        return None
    n_events, n_rows, n_missing, texts, numbers, suspects = out
    columns: list[pa.Array] = []
    for values, offsets, valid in texts:
        columns.append(pa.Array.from_buffers(pa.string(), n_rows, [_bitmap(valid), pa.py_buffer(offsets),
                                                                   pa.py_buffer(values)]))
    for k, (values, valid) in enumerate(numbers):
        kind = pa.float64() if k < 2 else pa.int64()
        columns.append(pa.Array.from_buffers(kind, n_rows, [_bitmap(valid), pa.py_buffer(values)]))
    cat, name, pid, tid, args = columns[:5]
    ts, dur, stream, device, correlation, external_id = columns[5:]
    ordered = [cat, name, pid, tid, ts, dur, stream, device, correlation, external_id, args]
    return Piece(pa.Table.from_arrays(ordered, schema=EVENT_SCHEMA), n_events, n_missing,
                 args_suspects=np.frombuffer(suspects, np.bool_))


def _decode_piece(data: bytes) -> Piece:
    """:func:`decode_piece` of valid UTF-8.

    Complete events (``ph == "X"``) and ``[memory]`` instant events become rows of :data:`EVENT_SCHEMA`; ``stream``,
    ``device``, ``correlation`` and ``external_id`` come from ``args`` (``External id`` or the
    2020/2021 spelling ``external id``), ``args`` keeps the raw JSON text. Events whose
    fields have unexpected types fall back to an untyped decode. Raises ``msgspec.DecodeError``
    when ``data`` is not valid JSON, :class:`TraceFormatError` when it is not an array.
    """
    if _scan is not None:
        piece = _scanned_piece(data)
        if piece is not None:
            return piece
    try:
        events = _DEC_EVENTS.decode(data)
        xs = [e for e in events if e.ph == "X" or (e.name == MEMORY_EVENT and e.ph in ("i", "I"))]
        raw_args = [e.args for e in xs]  # msgspec.Raw: buffers over ``data``, no copies yet
        xa = _DEC_ARGS.decode(b"[" + b",".join(a if len(a) else b"null" for a in raw_args) + b"]")
    except msgspec.ValidationError:
        return _decode_piece_untyped(data)
    xa = [a or _EMPTY_ARGS for a in xa]
    missing = sum(1 for e in xs if e.ts is None or (e.dur is None and e.ph == "X"))
    columns = [
        pa.array([e.cat if e.ph == "X" else (e.cat or MEMORY_CAT) for e in xs], pa.string()),
        pa.array([e.name for e in xs], pa.string()),
        _to_text_column([e.pid for e in xs]),
        _to_text_column([e.tid for e in xs]),
        pa.array([e.ts for e in xs], pa.float64()),
        pa.array([e.dur if e.ph == "X" else 0.0 for e in xs], pa.float64()),
        pa.array([a.stream for a in xa], pa.int64()),
        pa.array([a.device for a in xa], pa.int64()),
        pa.array([a.correlation for a in xa], pa.int64()),
        pa.array(
            [a.external_id if a.external_id is not None else a.external_id_legacy for a in xa],
            pa.int64(),
        ),
        _text_column(raw_args),
    ]
    return Piece(pa.Table.from_arrays(columns, schema=EVENT_SCHEMA), len(events), missing)


def _int_or_none(value: Any) -> int | None:
    """An id as an int64, or None (not a whole number, or outside int64)."""
    whole = (isinstance(value, int) or (isinstance(value, float) and value.is_integer())
             or (isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 40))
    out = int(value) if whole else None  # bool is an int: True -> 1; 40 digits: beyond int64, not parsed
    return out if out is not None and -(1 << 63) <= out < (1 << 63) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond a double (400 digits): infinite, excluded as absurd
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        return None


def _decode_piece_untyped(data: bytes, events: Any = None) -> Piece:
    """Slow path for pieces whose fields have types the typed decoder does not accept
    (``events``: already decoded, :func:`lenient_events`)."""
    events = _DEC_ANY.decode(data) if events is None else events
    if not isinstance(events, list):
        raise TraceFormatError("traceEvents is not a JSON array")
    rows: dict[str, list[Any]] = {f.name: [] for f in EVENT_SCHEMA}
    missing = not_objects = 0
    for e in events:
        if not isinstance(e, dict):
            not_objects += 1
            continue
        instant = e.get("ph") in ("i", "I") and e.get("name") == MEMORY_EVENT
        if e.get("ph") != "X" and not instant:
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        ext = args.get("External id")
        ext = args.get("external id") if ext is None else ext  # as the typed path: a null 'External id' falls through
        ts, dur = _float_or_none(e.get("ts")), (0.0 if instant else _float_or_none(e.get("dur")))
        missing += ts is None or dur is None
        rows["cat"].append(_as_text(e.get("cat") or (MEMORY_CAT if instant else None)))
        rows["name"].append(_as_text(e.get("name")))
        rows["pid"].append(_as_text(e.get("pid")))
        rows["tid"].append(_as_text(e.get("tid")))
        rows["ts_us"].append(ts)
        rows["dur_us"].append(dur)
        rows["stream"].append(_int_or_none(args.get("stream")))
        rows["device"].append(_int_or_none(args.get("device")))
        rows["correlation"].append(_int_or_none(args.get("correlation")))
        rows["external_id"].append(_int_or_none(ext))
        rows["args"].append(msgspec.json.encode(e["args"]).decode() if "args" in e else None)
    table = pa.Table.from_pydict(rows, schema=EVENT_SCHEMA)
    return Piece(table, len(events), missing, not_objects)


def open_stream(path: Location) -> IO[bytes]:
    """Open ``path`` (a local file or an object, :mod:`trace_report.storage`) for binary reading,
    decompressing gzip when it starts with its magic."""
    raw = storage.open_input(path)
    if not is_gzip(path):
        return raw
    gz = gzip.GzipFile(fileobj=raw, mode="rb")
    gz.myfileobj = raw  # closed with it, as gzip.open's own file is
    return gz  # type: ignore[return-value]


class _HashingReader:
    """Reads blocks of decoded bytes from a file (gunzipped when it is gzip) and hashes the bytes
    of the file as stored on disk.

    A gzip file is inflated at most ``block`` bytes per :meth:`read` (``max_length``), whatever
    its compression ratio, and refused once the ratio passes ``max_ratio`` (after
    :data:`RATIO_CHECK_AFTER` bytes): memory never depends on what one compressed block expands to.
    """

    def __init__(self, path: Location, block: int, max_ratio: float = MAX_RATIO) -> None:
        self.path = path
        self.block = block
        self.max_ratio = max_ratio
        self.digest = hashlib.sha256()
        self.raw_bytes = 0
        self.out_bytes = 0
        self._raw = storage.open_input(path)  # a forward stream for an object: read once, never sought
        self._in = self._read_raw(2)  # compressed bytes read but not yet inflated (for gzip)
        self._gz = _inflate.decompressobj(wbits=31) if self._in == GZIP_MAGIC else None
        self._raw_eof = False

    def _read_raw(self, size: int) -> bytes:
        raw = self._raw.read(size)
        if raw:
            self.digest.update(raw)
            self.raw_bytes += len(raw)
        return raw

    def read(self) -> bytes:
        """Return the next block of decoded bytes (at most ``block`` of them), ``b""`` at the end."""
        if self._gz is None:
            head, self._in = self._in, b""  # the first two bytes, read to tell gzip apart
            return head + self._read_raw(self.block - len(head)) if head else self._read_raw(self.block)
        try:
            while True:
                if not self._in and not self._raw_eof:
                    self._in = self._read_raw(RAW_BLOCK)
                    self._raw_eof = not self._in
                if not self._in:  # end of the file: what the inflater still holds, then the end
                    out = self._gz.flush()
                    if not out and not self._gz.eof:
                        raise TraceFormatError(f"{self.path}: truncated gzip file")
                    return self._count(out)
                if self._gz.eof:  # concatenated gzip members, maybe zero-padded (as gzip allows)
                    self._in = self._in.lstrip(b"\0")
                    if not self._in:
                        continue
                    self._gz = _inflate.decompressobj(wbits=31)
                out = self._gz.decompress(self._in, self.block)
                self._in = self._gz.unused_data if self._gz.eof else self._gz.unconsumed_tail
                if out:
                    return self._count(out)
        except _INFLATE_ERRORS as exc:
            raise TraceFormatError(f"{self.path}: corrupt gzip data ({exc})") from exc

    def _count(self, out: bytes) -> bytes:
        self.out_bytes += len(out)
        if self.max_ratio and self.out_bytes > RATIO_CHECK_AFTER:
            ratio = self.out_bytes / max(1, self.raw_bytes - len(self._in))
            if ratio > self.max_ratio:
                raise TraceFormatError(
                    f"{self.path}: looks like a decompression bomb (ratio {ratio:.0f}:1 after "
                    f"{self.out_bytes >> 20} MB, limit {self.max_ratio:g}:1); if the file is genuine, "
                    "pass --max-ratio to `trace-report ingest` to override"
                )
        return out

    def close(self) -> None:
        self._raw.close()


def is_boundary(buf: bytes, after: int) -> bool:
    """Whether ``buf[after:]`` starts with ``,`` then ``{`` (white space allowed around the comma):
    the ``}`` just before ``after`` may close an event of the array."""
    n = len(buf)
    j = after
    while j < n and buf[j] in _WS:
        j += 1
    if j >= n or buf[j] != 0x2C:  # ','
        return False
    j += 1
    while j < n and buf[j] in _WS:
        j += 1
    return j < n and buf[j] == 0x7B  # '{'


def _find_cut(buf: bytes, end: int, lo: int = 0) -> int:
    """Index just past the last ``}`` in ``buf[lo:end]`` that is followed by ``,`` and ``{``."""
    pos = end
    while True:
        pos = buf.rfind(b"}", lo, pos)
        if pos < 0:
            return -1
        if is_boundary(buf, pos + 1):
            return pos + 1


def _skip_comma(buf: bytes, start: int) -> int:
    j = start
    while j < len(buf) and buf[j] in _WS:
        j += 1
    if j < len(buf) and buf[j] == 0x2C:
        j += 1
    return j


def _check_events(data: bytes) -> None:
    """Raise ``msgspec.DecodeError`` unless ``data`` is a JSON array of events (strict JSON, or
    JSON with the literals and escapes :func:`lenient_events` takes)."""
    try:
        _DEC_CHECK.decode(data)
    except msgspec.DecodeError:
        if lenient_events(data) is None:
            raise


def _decode_any(text: bytes, path: Location) -> Any:
    """Untyped decode of trace metadata: invalid UTF-8 replaced, too deep an error."""
    try:
        try:
            return _DEC_ANY.decode(text)
        except (UnicodeDecodeError, msgspec.DecodeError) as exc:
            if not is_utf8_error(exc, text):
                raise
            return _DEC_ANY.decode(replace_bad_utf8(text)[0])
    except RecursionError:
        raise TraceFormatError(f"{path}: {TOO_DEEP}") from None


def _parse_object(text: bytes, what: str, path: Location) -> dict[str, Any]:
    try:
        value = _decode_any(text, path)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: invalid JSON in the trace {what} ({exc})") from exc
    if not isinstance(value, dict):
        raise TraceFormatError(f"{path}: the trace {what} is not a JSON object")
    return value


class PieceStream:
    """Iterate over the raw pieces of ``traceEvents`` of one file (bytes of a JSON array); the
    last item is a :class:`TailBytes` for :meth:`split_tail` (after merging pending pieces).

    After iteration, :attr:`envelope` holds the metadata around the array (keys before and
    after ``traceEvents``) and the SHA-256 of the file as stored.
    """

    def __init__(self, path: Location, block: int = PIECE_BYTES, *, max_ratio: float = MAX_RATIO,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.path = path
        self.block = block
        self.max_ratio = max_ratio
        self.max_event_bytes = max_event_bytes
        self.envelope = TraceEnvelope()
        self._reader: _HashingReader | None = None

    def bytes_read(self) -> int:
        """Bytes of the file (as stored) read so far."""
        return self._reader.raw_bytes if self._reader is not None else 0

    def __iter__(self) -> Iterator[bytes]:
        reader = _HashingReader(self.path, min(self.block, READ_BYTES), self.max_ratio)
        self._reader = reader
        try:
            yield from self._pieces(reader)
        finally:
            reader.close()
        self.envelope.sha256 = reader.digest.hexdigest()
        self.envelope.raw_bytes = reader.raw_bytes

    def _head(self, reader: _HashingReader) -> tuple[bytes, bytes]:
        """Read until the start of the events array; return (header, rest after ``[``)."""
        buf = b""
        while True:
            data = reader.read()
            buf = (buf + data) if buf else data.removeprefix(UTF8_BOM)
            stripped = buf.lstrip()
            if stripped[:1] == b"[":
                self.envelope.top_level_array = True
                return b"", stripped[1:]
            if stripped and stripped[:1] != b"{":
                raise TraceFormatError(f"{self.path}: not a JSON trace (expected '{{' or '[')")
            m = _EVENTS_KEY.search(buf)
            if m:
                return buf[: m.start()], buf[m.end() :]
            if len(buf) > self.max_event_bytes:
                raise TraceFormatError(
                    f"{self.path}: no 'traceEvents' array in the first {self.max_event_bytes >> 20} MB")
            if not data:
                if not stripped:
                    raise TraceFormatError(f"{self.path}: empty file")
                raise TraceFormatError(f"{self.path}: no 'traceEvents' array in the trace")

    def _pieces(self, reader: _HashingReader) -> Iterator[bytes]:
        """The pieces of the array, each made with one copy: the decoded blocks of a piece are
        kept as they come (:data:`READ_BYTES` each) and joined once, cut at the last event
        boundary of the last block; what follows the cut starts the next piece."""
        header, first = self._head(reader)
        if header:
            meta = _parse_object(header + b'"traceEvents": []}', "header", self.path)
            meta.pop("traceEvents", None)
            self.envelope.metadata.update(meta)
        blocks: list[bytes | bytearray] = [first] if first else []
        size = len(first)
        del first
        eof = False
        want = self.block
        searched = 0  # of a joined run without an event boundary (a long event being read on)
        # A cut that lands in the metadata after the array makes an invalid piece, which the
        # decoder merges with the next ones and at last with the tail (PieceRunner), so pieces go
        # out as soon as they are cut.
        while not eof:
            while size < want and not eof:
                data = reader.read()
                eof = not data
                if data:
                    blocks.append(data)
                    size += len(data)
                del data
            if eof:
                break
            last = blocks[-1]
            cut = _find_cut(last, len(last))
            if cut < 0:  # no event ends in the last block: look at the whole run, joined
                # (grown in place while a long event is read on, not joined again per block)
                run = blocks[0] if isinstance(blocks[0], bytearray) else bytearray(blocks[0])
                for block in blocks[1:]:
                    run += block
                blocks = [run]
                cut = _find_cut(run, len(run), searched)
                if cut < 0:  # one event larger than a block: read on, up to the limit
                    self._check_event_size(size, reader)
                    searched = max(0, size - 4096)  # a boundary's white space may run past the end
                    want = size + self.block
                    continue
                last = run
            want, searched = self.block, 0
            with memoryview(last) as view:
                piece = b"".join([b"[", *blocks[:-1], view[:cut], b"]"])
                rest = bytes(view[_skip_comma(last, cut):])
            blocks = [rest] if rest else []
            size = len(rest)
            del last, rest
            yield piece
            del piece
        buf = bytearray().join(blocks)
        del blocks
        # The end of the file: its events but the last go out as a piece of their own, so that the
        # tail (validated, then decoded where the file is read) is one event and the trailer. A
        # boundary inside the trailer's own metadata makes that piece invalid: merged as above.
        cut = _find_cut(buf, len(buf))
        if cut >= TAIL_CUT_MIN:
            with memoryview(buf) as view:
                piece = b"".join((b"[", view[:cut], b"]"))
            del buf[: _skip_comma(buf, cut)]
            yield piece
            del piece
        self._check_event_size(len(buf) - 2 * self.block, reader)  # the last blocks: events, then the trailer
        yield TailBytes(buf)

    def _check_event_size(self, size: int, reader: _HashingReader) -> None:
        """Refuse a run of bytes without an event boundary longer than :data:`MAX_EVENT_BYTES`
        (the last event and the metadata after the array count as one)."""
        if size > self.max_event_bytes:
            raise TraceFormatError(
                f"{self.path}: an event (or the metadata after traceEvents) is larger than "
                f"{self.max_event_bytes >> 20} MB, near byte {reader.out_bytes or reader.raw_bytes:,} of the "
                "decoded trace; the file is damaged or not a real trace"
            )

    def split_tail(self, buf: bytes) -> bytes:
        """The events piece (``[...]``) at the start of the file's raw end ``buf``.

        ``buf`` must start at an event boundary: the caller prepends any earlier piece that was
        cut inside an event. The metadata after the array goes into :attr:`envelope`.
        Raises :class:`TraceFormatError` when the array's end cannot be found.
        """
        return next(self._tail(buf))

    def _not_objects(self, buf: bytes) -> None:
        """Before "not closed": say so when the array ends with ``]}`` but holds entries that are
        not objects (``{"traceEvents": [1, 2, "x"]}``)."""
        end = buf.rfind(b"]")
        if end < 0 or buf[end + 1:].strip() != b"}":
            return
        try:
            entries = _DEC_RAW_LIST.decode(b"[" + buf[:end] + b"]")
        except msgspec.DecodeError:
            return
        except RecursionError:
            raise TraceFormatError(f"{self.path}: {TOO_DEEP}") from None
        n = sum(1 for e in entries if not bytes(e).lstrip().startswith(b"{"))
        if n:
            raise TraceFormatError(f"{self.path}: traceEvents holds {n} entries that are not event objects")

    def _tail(self, buf: bytes) -> Iterator[bytes]:
        """Split the last bytes into the end of the array and the metadata after it."""
        if self.envelope.top_level_array:
            body = buf.strip()
            if body.endswith(b"]"):  # Chrome's array form may also stop without the "]"
                body = body[:-1]
            yield b"[" + body.strip().rstrip(b",") + b"]"
            return
        end = len(buf)
        while True:
            end = buf.rfind(b"]", 0, end)
            if end < 0:
                raise TraceFormatError(f"{self.path}: invalid JSON (traceEvents array not closed)")
            trailer = buf[end + 1 :].strip()
            if trailer.startswith(b","):
                trailer = trailer[1:]
            try:
                value = _decode_any(b"{" + trailer, self.path) if trailer != b"}" else {}
                _check_events(b"[" + buf[:end] + b"]")
            except (msgspec.DecodeError, msgspec.ValidationError):
                if end == 0 or buf.rfind(b"]", 0, end) < 0:
                    self._not_objects(buf)
                continue
            except RecursionError:
                raise TraceFormatError(f"{self.path}: {TOO_DEEP}") from None
            if isinstance(value, dict):
                self.envelope.metadata.update(value)
                break
        body = buf[:end].strip()
        if body.endswith(b","):  # tolerated trailing comma, as Chrome tolerates it
            body = body[:-1]
        yield b"[" + body + b"]"
