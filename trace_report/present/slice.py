"""Writing a Chrome trace (``trace-report slice``): the trace's top-level keys, then
``traceEvents``, streamed event by event (never held whole), gzip-compressed when the name ends
in ``.gz``, and written atomically as every output of the project: into a temporary file beside
the target, renamed over it only once complete (:func:`trace_report.present.tables.write_atomic`'s
rules: a new file gets ``0666`` less the umask, a replaced one keeps its mode; a FIFO, device or
``/dev/stdout`` is written in place)."""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from trace_report.errors import InputError
from trace_report.present.tables import atomic_output, writes_in_place

if TYPE_CHECKING:
    from trace_report.analyses.slice import SliceOptions
    from trace_report.analyses.slice.compute import SliceResult

BUFFER_BYTES = 1 << 20
"""Encoded events gathered before one write."""
GZIP_LEVEL = 6
"""Kineto's own level for ``.json.gz`` traces (``use_gzip``)."""


def _head(metadata: dict[str, Any]) -> bytes:
    """``{"key": value, ..., "traceEvents": [`` (metadata keys first, in their order)."""
    text = msgspec.json.encode(metadata)
    return (text[:-1] + b',"traceEvents":[\n') if len(metadata) else b'{"traceEvents":[\n'


def _write_events(fh: IO[bytes], metadata: dict[str, Any], events: Iterable[bytes]) -> int:
    fh.write(_head(metadata))
    n = 0
    chunk: list[bytes] = []
    size = 0
    for event in events:
        if n:
            chunk.append(b",\n")
        chunk.append(event)
        size += len(event) + 2
        n += 1
        if size >= BUFFER_BYTES:
            fh.write(b"".join(chunk))
            chunk, size = [], 0
    chunk.append(b"\n]}\n")
    fh.write(b"".join(chunk))
    return n


def _write_to(raw: IO[bytes], metadata: dict[str, Any], events: Iterable[bytes], compress: bool) -> int:
    if not compress:
        n = _write_events(raw, metadata, events)
        raw.flush()
        return n
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as gz:
        n = _write_events(gz, metadata, events)
    raw.flush()
    return n


def write_chrome_trace(path: Path, metadata: dict[str, Any], events: Iterable[bytes],
                       compress: bool | None = None) -> int:
    """Write ``{**metadata, "traceEvents": [events...]}`` to ``path`` and return the number of
    events. ``events``: each one encoded JSON object (consumed once, as it is written);
    ``compress``: gzip (default: when the name ends in ``.gz``).

    Nothing is left behind on failure: the temporary file is removed and an existing ``path`` is
    untouched. Raises :class:`InputError` when the folder is missing or the file cannot be
    written (a full disk included); whatever ``events`` raises propagates."""
    compress = path.name.endswith(".gz") if compress is None else compress
    if writes_in_place(path):
        return _in_place(path, metadata, events, compress)
    with atomic_output(path) as fh:
        n = _write_to(fh, metadata, events, compress)
    return n


def _in_place(path: Path, metadata: dict[str, Any], events: Iterable[bytes], compress: bool) -> int:
    """A FIFO, device or descriptor name: opened for writing without creating or truncating
    anything (a regular file behind ``/dev/stdout`` is appended to, as the shell's would be)."""
    try:
        append = os.O_APPEND if stat.S_ISREG(os.stat(path).st_mode) else 0
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY | append)
        with os.fdopen(fd, "wb") as fh:
            return _write_to(fh, metadata, events, compress)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def save_slice(result: SliceResult, options: SliceOptions, path: Path) -> tuple[int, list[str]]:
    """``slice``'s saver (:class:`trace_report.declare.Save`): ``result`` written to ``path``
    (:func:`write_chrome_trace`); returns the number of events written and the line saying what
    they are."""
    n = write_chrome_trace(path, result.metadata, result.events)
    plan, c = result.plan, result.counts
    what = f"steps {_steps_text(plan.steps)}, " if plan.steps else ""
    return n, [f"wrote {path}: {n:,} events of rank {plan.rank} ({what}[{plan.t0:.3f}, {plan.t1:.3f}) µs): "
               f"{c.get('rows', 0):,} complete/memory, {c.get('flows', 0):,} flow, "
               f"{c.get('metadata_events', 0):,} metadata, {c.get('other_events', 0):,} other, "
               f"{c.get('counters', 0):,} counter"]


def _steps_text(steps: tuple[int, ...]) -> str:
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
