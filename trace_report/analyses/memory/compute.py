"""The computation of ``memory`` (its declaration: the package's ``__init__``): allocated and
reserved bytes per device over time, and their peak per ProfilerStep.

Source: the caching allocator's ``[memory]`` instant events (``profile_memory=True``), view
``memory_events`` (``store/sql/views_memory.sql``): ``allocated_bytes`` = the event's
"Total Allocated", ``reserved_bytes`` = "Total Reserved" (bytes held by the allocator, what
``nvidia-smi`` sees of PyTorch), ``bytes`` = this allocation (negative for a free). Traces of
2021 carry only "Bytes": ``allocated_bytes`` is then relative to the trace's start (the running
sum of Bytes, as torch-tb-profiler draws it) and ``reserved_bytes`` is NULL. Peaks: query
``analyses/memory/memory_peaks.sql``; a step's peak includes the level the step starts at (the device's
last event before it, by time then event order, with a value).
"""

from __future__ import annotations

import pandas as pd

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.memory import MemoryOptions
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

PEAK_COLUMNS = ["rank", "device", "step", "events", "peak_allocated_bytes", "peak_reserved_bytes"]
TIMELINE_COLUMNS = ["rank", "device", "ts_us", "time_ms", "bytes", "allocated_bytes", "reserved_bytes"]
NO_MEMORY_NOTE = "no [memory] events: profile with torch.profiler.profile(profile_memory=True)"


def _notes(db: TraceDB) -> list[str]:
    if not db.scalar("SELECT count(*) FROM memory_events"):
        return [NO_MEMORY_NOTE]
    if db.scalar("SELECT bool_or(NOT totals_known) FROM memory_events"):
        return ["this trace's [memory] events carry no 'Total Allocated': allocated bytes are relative to "
                "the start of the trace (running sum of allocations), reserved bytes unknown"]
    return []


def memory(db: TraceDB, options: MemoryOptions) -> Result:
    """:func:`memory_timeline` with ``timeline``, else :func:`memory_peaks` (the declaration's compute)."""
    return memory_timeline(db, options) if options.timeline else memory_peaks(db, options)


def memory_peaks(db: TraceDB, options: MemoryOptions | None = None) -> Result:
    """Per trace, device and step: ``rank``, ``device``, ``step`` (NULL: outside every step),
    ``events`` (allocations and frees), ``peak_allocated_bytes``, ``peak_reserved_bytes``
    (bytes); ``trace_id`` too when several traces share a rank."""
    opts = options or MemoryOptions()
    db.check_rank(opts.rank)
    frame = db.con.execute(sql_text("memory_peaks.sql", __package__), {"rank": opts.rank}).df()
    if opts.device is not None:
        frame = frame[frame["device"] == opts.device]
    frame = frame[[*PEAK_COLUMNS, "trace_id"]].astype(
        {"rank": "int64", "events": "int64", "step": "Int64", "peak_allocated_bytes": "Int64",
         "peak_reserved_bytes": "Int64"})
    return Result(drop_single_trace_ids(frame).reset_index(drop=True), _notes(db))


def memory_timeline(db: TraceDB, options: MemoryOptions | None = None) -> Result:
    """One row per ``[memory]`` event: ``rank``, ``device``, ``ts_us`` (trace clock),
    ``time_ms`` (ms since the trace's first event), ``bytes``, ``allocated_bytes``,
    ``reserved_bytes``; ``trace_id`` too when several traces share a rank."""
    opts = options or MemoryOptions()
    db.check_rank(opts.rank)
    frame = db.con.execute(
        "SELECT t.rank, m.device, m.ts_us, (m.ts_us - s.t0) / 1e3 AS time_ms, m.bytes, m.allocated_bytes, "
        "m.reserved_bytes, m.trace_id FROM memory_events m JOIN traces t USING (trace_id) "
        "JOIN (SELECT trace_id, min(ts_us) AS t0 FROM events GROUP BY trace_id) s USING (trace_id) "
        "WHERE ($rank IS NULL OR t.rank = $rank) AND ($device IS NULL OR m.device = $device) "
        "ORDER BY t.rank, m.trace_id, m.device, m.ts_us, m.event_id",
        {"rank": opts.rank, "device": opts.device}).df()
    frame = frame[[*TIMELINE_COLUMNS, "trace_id"]].astype({"rank": "int64", "reserved_bytes": "Int64"})
    return Result(drop_single_trace_ids(frame).reset_index(drop=True), _notes(db))


def device_names(frame: pd.DataFrame) -> list[str]:
    """The devices of a memory frame, in order of appearance."""
    return list(dict.fromkeys(frame["device"]))
