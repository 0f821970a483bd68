"""Plan byte ranges of ``traceEvents`` in an uncompressed trace file, without reading it whole.

Large plain ``.json`` traces are decoded in parallel: each worker reads its own byte range
(:class:`trace_report.storage.RangeReader`: ``pread`` of a local file). The planner reads only
small windows: the head (up to ``"traceEvents": [``), one window at each cut target, and the
tail (the end of the array and the metadata after it).
A cut that lands inside a nested object makes its range invalid JSON; the ingest merges it with
the next range, so a wrong cut costs time, never correctness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_report.errors import TraceFormatError
from trace_report.formats.kineto import (
    _EVENTS_KEY,
    _WS,
    UTF8_BOM,
    PieceStream,
    TraceEnvelope,
    _find_cut,
    _parse_object,
    is_boundary,
)
from trace_report.storage import RangeReader, open_ranges

WINDOW = 1 << 18


@dataclass
class RangePlan:
    """Byte ranges ``[start, end)`` of event runs (no brackets) and the last piece as bytes."""

    ranges: list[tuple[int, int]] = field(default_factory=list)
    last_piece: bytes = b"[]"
    envelope: TraceEnvelope = field(default_factory=TraceEnvelope)


def _body_start(src: RangeReader, path: Path, size: int) -> tuple[int, dict[str, Any], bool]:
    window = WINDOW
    while True:
        head = src.pread(0, min(window, size))
        bom = len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0
        stripped = head[bom:].lstrip()
        if not stripped:
            raise TraceFormatError(f"{path}: empty file")
        if stripped[:1] == b"[":
            return len(head) - len(stripped) + 1, {}, True
        if stripped[:1] != b"{":
            raise TraceFormatError(f"{path}: not a JSON trace (expected '{{' or '[')")
        m = _EVENTS_KEY.search(head)
        if m:
            meta = _parse_object(head[bom: m.start()] + b'"traceEvents": []}', "header", path)
            meta.pop("traceEvents", None)
            return m.end(), meta, False
        if window >= size:
            raise TraceFormatError(f"{path}: no 'traceEvents' array in the trace")
        window *= 4


def _first_cut_after(src: RangeReader, pos: int, limit: int) -> int:
    """Index just past the first event-closing ``}`` (followed by ``, {``) at or after ``pos``."""
    window = WINDOW
    while pos < limit:
        data = src.pread(pos, min(window, limit - pos) + 64)
        i = 0
        while True:
            j = data.find(b"}", i)
            if j < 0 or j >= len(data) - 64:  # the last 64 bytes are only look-ahead
                break
            if is_boundary(data, j + 1):
                return pos + j + 1
            i = j + 1
        pos += max(len(data) - 64, 1)
        window *= 2
    return -1


def _after_comma(src: RangeReader, cut: int) -> int:
    data = src.pread(cut, 4096)
    i = 0
    while i < len(data) and data[i] in _WS:
        i += 1
    return cut + i + 1  # past the ','


def _tail_start(src: RangeReader, body: int, size: int) -> int:
    """Start of the last event run: just past the comma after the last event boundary."""
    window = WINDOW
    while True:
        start = max(body, size - window)
        data = src.pread(start, size - start)
        cut = _find_cut(data, len(data))
        if cut >= 0:
            return _after_comma(src, start + cut)
        if start == body:
            return body
        window *= 4


def plan_ranges(path: Path, target: int) -> RangePlan:
    """Cut the events array of the plain JSON file ``path`` into ranges of about ``target`` bytes.

    Raises :class:`TraceFormatError` for an empty file, a file that is not a JSON object or
    array, or one whose ``traceEvents`` array cannot be found or is not closed.
    """
    plan = RangePlan()
    with open_ranges(path) as src:
        size = src.size
        body, meta, top_array = _body_start(src, path, size)
        plan.envelope.metadata.update(meta)
        plan.envelope.top_level_array = top_array
        tail = _tail_start(src, body, size)
        start = body
        while tail - start > target * 3 // 2:
            cut = _first_cut_after(src, start + target, tail)
            if cut < 0 or cut >= tail:
                break
            plan.ranges.append((start, cut))
            start = _after_comma(src, cut)
        if start < tail:
            plan.ranges.append((start, _last_cut_before(src, start, tail)))
        last = src.pread(tail, size - tail)
    stream = PieceStream(path)
    stream.envelope = plan.envelope
    plan.last_piece = stream.split_tail(last)
    return plan


def _last_cut_before(src: RangeReader, start: int, tail: int) -> int:
    """End of the range that runs up to the tail (just before the comma that precedes it)."""
    data = src.pread(max(start, tail - 4096), tail - max(start, tail - 4096))
    end = len(data) - 1
    while end >= 0 and data[end] in _WS:
        end -= 1
    if end >= 0 and data[end] == 0x2C:
        end -= 1
    return max(start, tail - 4096) + end + 1
