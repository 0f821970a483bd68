"""The events of a trace that the database does not keep, read again from the original file for
``trace-report slice`` (:mod:`trace_report.analyses.slice`): process/thread names (``ph: M``),
flow events (``s``/``t``/``f``) bound to kept events, and other events (instants, counters,
``B``/``E``...) inside the slice's time range.

One streaming pass (:class:`~trace_report.formats.kineto.PieceStream`: the file is read a piece at
a time, never whole; a gzip file is inflated a block at a time with the ingest's ratio limit),
which also hashes the file: the events are used only when its SHA-256 is the one the trace was
ingested with. Complete events, most of a trace, are not decoded: a regular expression finds each
``"ph"`` whose value is not ``"X"``, and the event around it (from the ``{`` that follows an
event boundary to the ``}`` before the next one) is decoded alone and checked (a JSON object
whose ``ph`` is that value). Where that fails (an event nesting objects before its ``ph``, a
piece cut inside an event), the piece is decoded whole, and a piece that is not valid JSON is
joined with the next, as the ingest does (``ingest/decoding.PieceRunner``). Every string kept is
screened for secrets as the ingest screens stored strings (:func:`trace_report.redact.redact_json_text`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from trace_report.errors import TraceFormatError
from trace_report.formats.kineto import MAX_EVENT_BYTES, PIECE_BYTES, PieceStream, TailBytes, is_boundary
from trace_report.redact import Redaction, redact_json_text, summarize

MEMORY_EVENT = "[memory]"
FLOW_PHASES = ("s", "t", "f")
_FLOW = re.compile(rb'"ph"\s*:\s*"[stf]"')
_OTHER = re.compile(rb'"ph"\s*:\s*"(?!X"|[stf]")')
"""A ``"ph"`` of a flow event; of any other event but a complete one."""
_WS = b" \t\r\n"
_TRIES = 8
"""Event boundaries tried after a non-X ``"ph"`` before the piece is decoded whole."""
_DEC = msgspec.json.Decoder()
_ENC = msgspec.json.Encoder()
SOURCE_PIECE_BYTES = 2 << 20
"""Piece size of the pass (the ingest's is 8 MB): a quarter of the memory for a few more calls."""
_MAX_PENDING = MAX_EVENT_BYTES + 2 * PIECE_BYTES


@dataclass
class FlowIndex:
    """The kept complete events per ``(pid, tid)`` (as text, as ``events`` holds them): starts in
    ascending order and the running maximum of their ends (µs)."""

    spans: dict[tuple[str, str], tuple[list[float], list[float]]]

    def bounds(self) -> tuple[float, float]:
        """The earliest start and the latest end of the kept events (µs); (inf, -inf) when none."""
        if not self.spans:
            return float("inf"), float("-inf")
        return min(s[0][0] for s in self.spans.values()), max(s[1][-1] for s in self.spans.values())

    def holds(self, pid: Any, tid: Any, ts: Any) -> bool:
        """Whether a kept complete event of ``pid``/``tid`` (trace values) holds time ``ts``."""
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            return False
        entry = self.spans.get((_text(pid), _text(tid)))
        if entry is None:
            return False
        i = bisect_right(entry[0], ts) - 1
        return i >= 0 and entry[1][i] >= ts


def _text(value: Any) -> str:
    return str(value)


@dataclass
class _Flow:
    starts: int = 0
    ends: int = 0
    events: list[bytes] = field(default_factory=list)


@dataclass
class SourceEvents:
    """What the pass kept. ``ok``: the file was read whole and its digest matched (else the
    lists are empty and ``notes`` say why); ``metadata_events``: ``ph: M``; ``other_events``:
    instants, counters and the rest inside the range; flows through :meth:`flow_events`."""

    ok: bool = False
    notes: list[str] = field(default_factory=list)
    metadata_events: list[bytes] = field(default_factory=list)
    other_events: list[bytes] = field(default_factory=list)
    flows: dict[tuple[str, str, str], _Flow] = field(default_factory=dict)
    redactions: list[Redaction] = field(default_factory=list)
    whole_pieces: int = 0

    def complete_flows(self) -> list[_Flow]:
        """The flows with at least one start (``s``) and one end (``f``) bound to kept events."""
        return [f for f in self.flows.values() if f.starts and f.ends]

    @property
    def n_flow_events(self) -> int:
        return sum(len(f.events) for f in self.complete_flows())

    def flow_events(self) -> Iterator[bytes]:
        for flow in self.complete_flows():
            yield from flow.events

    def clear(self) -> None:
        self.whole_pieces = 0
        self.metadata_events.clear()
        self.other_events.clear()
        self.flows.clear()
        self.redactions.clear()


class _Collector:
    """Sorts the decoded non-X events of a trace into a :class:`SourceEvents`."""

    def __init__(self, out: SourceEvents, index: FlowIndex, lo: float, hi: float) -> None:
        self.out, self.index, self.lo, self.hi = out, index, lo, hi
        self.flow_range = index.bounds()

    def add(self, event: dict[str, Any]) -> None:
        ph = event.get("ph")
        if ph == "X" or (ph in ("i", "I") and event.get("name") == MEMORY_EVENT):
            return  # rows of the database
        if ph == "M":
            self.out.metadata_events.append(self._encode(event))
        elif ph in FLOW_PHASES:
            self._flow(event, ph)
        else:
            ts = event.get("ts")
            if isinstance(ts, (int, float)) and not isinstance(ts, bool) and self.lo <= ts <= self.hi:
                self.out.other_events.append(self._encode(event))

    def _flow(self, event: dict[str, Any], ph: str) -> None:
        if not self.index.holds(event.get("pid"), event.get("tid"), event.get("ts")):
            return
        ident = event.get("id", event.get("id2"))
        key = (_text(event.get("cat")), _text(event.get("name")), _ENC.encode(ident).decode())
        flow = self.out.flows.setdefault(key, _Flow())
        flow.starts += ph == "s"
        flow.ends += ph == "f"
        flow.events.append(self._encode(event))

    def _encode(self, event: dict[str, Any]) -> bytes:
        text = _ENC.encode(event)
        clean, found = redact_json_text(text.decode(), "events")  # a quick test of the text first, as the ingest's
        if not found:
            return text
        self.out.redactions.extend(found)
        return clean.encode()


def _event_start(data: bytes, ph_at: int) -> int:
    """The ``{`` opening the event whose ``"ph"`` is at ``ph_at``, when it follows an event
    boundary (``[`` or ``},``); else -1."""
    start = data.rfind(b"{", 0, ph_at)
    if start < 0:
        return -1
    j = start - 1
    while j >= 0 and data[j] in _WS:
        j -= 1
    if j < 0 or data[j] == 0x5B:  # '['
        return start
    if data[j] != 0x2C:  # ','
        return -1
    j -= 1
    while j >= 0 and data[j] in _WS:
        j -= 1
    return start if j >= 0 and data[j] == 0x7D else -1  # '}'


def _ends_array(data: bytes, after: int) -> bool:
    rest = data[after:after + 64].lstrip(_WS)
    return rest[:1] == b"]" or (not rest and after + 64 >= len(data))


def _event_at(data: bytes, ph_at: int) -> dict[str, Any] | None:
    """The event around the ``"ph"`` at ``ph_at``, decoded alone and checked, else None."""
    start = _event_start(data, ph_at)
    if start < 0:
        return None
    pos = ph_at
    for _ in range(_TRIES):
        pos = data.find(b"}", pos)
        if pos < 0:
            return None
        pos += 1
        if not (is_boundary(data, pos) or _ends_array(data, pos)):
            continue
        try:
            event = _DEC.decode(data[start:pos])
        except (msgspec.DecodeError, RecursionError):
            continue
        return event if isinstance(event, dict) and isinstance(event.get("ph"), str) else None
    return None


class _FlowHead(msgspec.Struct, gc=False):
    """What decides whether a flow event is kept (the rest is decoded only for those kept)."""

    ph: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None


_DEC_FLOW = msgspec.json.Decoder(_FlowHead)
_DEC_FLOWS = msgspec.json.Decoder(list[_FlowHead])


def _flow_at(data: bytes, ph_at: int, index: FlowIndex) -> tuple[bool, dict[str, Any] | None]:
    """A flow event (an object without nested ones, as Kineto writes them) around ``ph_at``:
    ``(True, None)`` when it is not bound to a kept event (nothing more decoded), ``(True, event)``
    when it is, ``(False, None)`` when it is not such an object (the caller looks again)."""
    start = _event_start(data, ph_at)
    end = data.find(b"}", ph_at) + 1
    if start < 0 or end <= 0 or not (is_boundary(data, end) or _ends_array(data, end)):
        return False, None
    span = data[start:end]
    try:
        head = _DEC_FLOW.decode(span)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False, None
    if head.ph not in FLOW_PHASES:
        return False, None
    if not index.holds(head.pid, head.tid, head.ts):
        return True, None
    return True, _DEC.decode(span)


def _flows_near(data: bytes, at: list[int], lo: float, hi: float) -> list[int]:
    """Of the flow ``"ph"`` positions ``at``, those whose event's ``ts`` is in [lo, hi] (all of
    them when the events cannot be decoded in one go: each is then looked at alone). The events
    around them are cut out (``{`` before, ``}`` after) and decoded as one array."""
    rf, fi = data.rfind, data.find
    spans = [data[rf(b"{", 0, p):fi(b"}", p) + 1] for p in at]
    try:
        heads = _DEC_FLOWS.decode(b"[" + b",".join(spans) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return at
    return [p for p, h in zip(at, heads, strict=True) if isinstance(h.ts, (int, float)) and lo <= h.ts <= hi]


def _piece_fast(data: bytes, collect: _Collector) -> bool:
    """Collect the non-X events of one piece without decoding the piece; False where an event
    could not be found alone (then nothing of the piece was collected). Flow events outside the
    kept events' time range are dropped in bulk first (most of a big trace's flows)."""
    found: list[dict[str, Any]] = []
    flows = [m.start() for m in _FLOW.finditer(data)]
    lo, hi = collect.flow_range
    for at in _flows_near(data, flows, lo, hi) if flows else ():
        done, event = _flow_at(data, at, collect.index)
        if not done:
            return False
        if event is not None:
            found.append(event)
    for m in _OTHER.finditer(data):
        event = _event_at(data, m.start())
        if event is None or event["ph"] in ("X", *FLOW_PHASES):
            return False
        found.append(event)
    for event in found:
        collect.add(event)
    return True


def _piece_whole(data: bytes, collect: _Collector) -> bool:
    """Decode the piece whole and collect its non-X events; False when it is not valid JSON (a
    piece cut inside an event: the caller joins it with the next)."""
    try:
        events = _DEC.decode(data)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return False
    if not isinstance(events, list):
        raise TraceFormatError("traceEvents is not a JSON array")
    collect.out.whole_pieces += 1
    for event in events:
        if isinstance(event, dict) and event.get("ph") != "X":
            collect.add(event)
    return True


def _join(a: bytes, b: bytes) -> bytes:
    if b == b"[]":
        return a
    return b if a == b"[]" else a[:-1] + b"," + b[1:]


def _scan(path: Path, collect: _Collector, *, fast: bool = True, block: int = SOURCE_PIECE_BYTES) -> str:
    """Read ``path`` once, collecting its non-X events; return its SHA-256 (as stored).
    Raises :class:`TraceFormatError` for a file the ingest would refuse."""
    stream = PieceStream(path, block)
    pending = b""
    for data in stream:
        if isinstance(data, TailBytes):
            body = stream.split_tail(pending[1:-1] + b"," + data if pending else bytes(data))
            pending = b""
            if not ((fast and _piece_fast(body, collect)) or _piece_whole(body, collect)):
                raise TraceFormatError(f"{path}: invalid JSON at the end of traceEvents")
            continue
        if pending:
            data = _join(pending, data)
        if (fast and not pending and _piece_fast(data, collect)) or _piece_whole(data, collect):
            pending = b""
        else:
            pending = data
            if len(pending) > _MAX_PENDING:
                raise TraceFormatError(f"{path}: invalid JSON in traceEvents")
    if pending:
        raise TraceFormatError(f"{path}: invalid JSON in traceEvents")
    return stream.envelope.sha256


def _unusable(path: Path, file_bytes: int | None) -> str | None:
    """Why ``path`` cannot be the file that was ingested, without reading it; None when it may be."""
    try:
        if not path.is_file():
            return f"{path} is no longer there" if not path.exists() else f"{path} is not a file"
        size = path.stat().st_size
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if file_bytes is not None and size != file_bytes:
        return f"{path} changed since it was ingested ({size:,} bytes, then {file_bytes:,})"
    return None


MISSING = ("the slice has no process/thread names (ph M), no other instant or counter events of the trace, "
           "and its flows are made from the correlation of each launch call and GPU operation "
           "(the database keeps complete events and [memory] instants only)")


def read_source(path_text: str, sha256: str | None, file_bytes: int | None, index: FlowIndex,
                lo: float, hi: float, *, fast: bool = True, block: int = SOURCE_PIECE_BYTES) -> SourceEvents:
    """The events of the original trace ``path_text`` that the slice needs and the database
    lacks: ``ph: M`` (all), flows whose events all bind to kept complete events (``index``),
    and other non-complete events with ``lo <= ts <= hi`` (µs). Never raises for an unusable
    file: the result is then not ``ok`` and its note says why. ``fast=False`` decodes every
    piece whole and ``block`` sets the piece size (the tests compare both ways)."""
    out = SourceEvents()
    path = Path(path_text)
    reason = _unusable(path, file_bytes)
    if reason is not None:
        out.notes.append(f"{reason}: {MISSING}")
        return out
    try:
        try:
            digest = _scan(path, _Collector(out, index, lo, hi), fast=fast, block=block)
        except TraceFormatError:
            if not fast:
                raise
            # A piece cut inside an event with its "ph" after the cut looks whole to the fast
            # path, and the next piece then never decodes: read again, every piece decoded whole.
            out.clear()
            digest = _scan(path, _Collector(out, index, lo, hi), fast=False, block=block)
    except (TraceFormatError, OSError) as exc:
        out.clear()
        out.notes.append(f"{path} cannot be read again ({exc}): {MISSING}")
        return out
    if sha256 and digest != sha256:
        out.clear()
        out.notes.append(f"{path} changed since it was ingested (SHA-256 differs): {MISSING}")
        return out
    out.ok = True
    if out.redactions:
        out.notes.append("redacted in the events read again from the trace: " + "; ".join(summarize(out.redactions)))
    return out
