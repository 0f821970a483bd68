"""``trace-report slice``'s computation: the plan (one trace, one window), the kept events and
the counter tracks, as :mod:`trace_report.analyses.slice` describes them."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgspec

from trace_report.analyses.slice import NOTHING_CHOSEN, SliceOptions
from trace_report.analyses.slice.source import FlowIndex, SourceEvents, read_source
from trace_report.errors import InputError, UsageError
from trace_report.store.step_numbers import STEP_MAX
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

GPU_AND_RUNTIME = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")
"""The categories joined through ``correlation`` (slice_kept.sql; launch calls and what they launched)."""
GPU_OPS = ("kernel", "gpu_memcpy", "gpu_memset")
MEMORY_EVENT = "[memory]"
FETCH_ROWS = 20_000
"""Rows fetched from DuckDB at a time while the slice is written."""

_STEPS = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
_NUMBER = r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)?\s*"
_WINDOW = re.compile(_NUMBER + ":" + _NUMBER)
_ENC = msgspec.json.Encoder()
_DEC = msgspec.json.Decoder()


@dataclass
class SlicePlan:
    """The one trace and the window a slice is cut from. ``t0``/``t1``: the window (µs, trace
    clock, half-open); ``steps``: the ProfilerStep numbers inside it (those asked for that the
    trace has); ``hi``: the end of the kept GPU work (>= ``t1``)."""

    trace_id: int
    rank: int
    path: str
    sha256: str | None
    file_bytes: int | None
    rank_source: str | None
    t0: float
    t1: float
    steps: tuple[int, ...] = ()
    step_range: tuple[int, int] | None = None
    hi: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass
class SliceResult:
    """What :func:`slice_trace` made: ``metadata`` (the trace's top-level keys, redacted, plus
    ``traceReportSlice`` saying what was cut), ``events`` (each one encoded JSON object, in
    writing order: read lazily, once), the counts per kind once ``events`` is consumed, and notes."""

    plan: SlicePlan
    metadata: dict[str, Any]
    events: Iterator[bytes]
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def parse_steps(text: str, flag: str = "--steps") -> tuple[int, int]:
    """``"3-4"`` -> ``(3, 4)``, ``"5"`` -> ``(5, 5)``; :class:`UsageError` naming ``flag`` otherwise,
    and for a number above :data:`STEP_MAX` (checked on the digits: a range is never listed)."""
    m = _STEPS.fullmatch(text or "")
    if m is None:
        raise UsageError(f"{flag} {text!r}: give a ProfilerStep number or a range, e.g. 3 or 3-4")
    digits = [g.lstrip("0") or "0" for g in m.groups() if g is not None]
    if any(len(d) > len(str(STEP_MAX)) or int(d) > STEP_MAX for d in digits):
        raise UsageError(f"{flag} {_shown(text)}: ProfilerStep numbers are 0 to {STEP_MAX}")
    lo = int(digits[0])
    hi = int(digits[1]) if len(digits) > 1 else lo
    if hi < lo:
        raise UsageError(f"{flag} {text!r}: the range ends before it starts")
    return lo, hi


def _shown(text: str, limit: int = 40) -> str:
    """``text`` quoted, cut to ``limit`` characters (an option may be thousands of digits long)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_window(text: str, flag: str = "--window") -> tuple[float | None, float | None]:
    """``"T0:T1"`` (µs; either side may be empty) -> ``(t0, t1)``; :class:`UsageError` naming ``flag`` otherwise,
    and for a bound that is no finite float (``1e400``)."""
    m = _WINDOW.fullmatch(text or "")
    if m is None or (m.group(1) is None and m.group(2) is None):
        raise UsageError(f"{flag} {_shown(text)}: give T0:T1 in µs on the trace's clock (as ts_us), e.g. "
                         "1712195495609361:1712195495705059; T0: or :T1 leave a side open")
    t0, t1 = (float(g) if g is not None else None for g in m.groups())
    if any(t is not None and not math.isfinite(t) for t in (t0, t1)):
        raise UsageError(f"{flag} {_shown(text)}: a bound is too large for a time in µs")
    if t0 is not None and t1 is not None and t1 <= t0:
        raise UsageError(f"{flag} {text!r}: T1 must be after T0")
    return t0, t1


def _pick_trace(db: TraceDB, rank: int | None) -> tuple[Any, ...]:
    db.check_rank(rank)
    rows = db.con.execute(
        "SELECT trace_id, rank, path, sha256, file_bytes, rank_source FROM traces "
        "WHERE $rank IS NULL OR rank = $rank ORDER BY trace_id", {"rank": rank}).fetchall()
    if not rows:
        raise InputError("no trace to slice (the input holds no Chrome/Kineto trace)")
    if len(rows) > 1:
        ranks = sorted({r[1] for r in rows if r[1] is not None})
        if rank is None and len(ranks) > 1:
            raise UsageError(f"the input holds {len(rows)} traces (ranks {', '.join(map(str, ranks))}): "
                             "a slice is one trace, choose it with --rank")
        raise UsageError(f"{len(rows)} traces have rank {rows[0][1]} ({', '.join(str(r[2]) for r in rows[:3])}): "
                         "slice one file or database of one run")
    return rows[0]


def _step_window(db: TraceDB, trace_id: int, steps: tuple[int, int]) -> tuple[float, float, tuple[int, ...]]:
    rows = db.con.execute(
        "SELECT step, min(ts_us), max(end_us) FROM steps WHERE trace_id = $t AND step BETWEEN $a AND $b "
        "GROUP BY step ORDER BY step", {"t": trace_id, "a": steps[0], "b": steps[1]}).fetchall()
    if not rows:
        have = [r[0] for r in db.con.execute(
            "SELECT DISTINCT step FROM steps WHERE trace_id = $t AND step IS NOT NULL ORDER BY 1",
            {"t": trace_id}).fetchall()]
        if not have:
            raise InputError("the trace has no ProfilerStep#N events: select a time range with --window T0:T1")
        asked = str(steps[0]) if steps[0] == steps[1] else f"{steps[0]}-{steps[1]}"
        raise InputError(f"no ProfilerStep#{asked} in the trace (its steps: {_ranges(have)})")
    return min(r[1] for r in rows), max(r[2] for r in rows), tuple(int(r[0]) for r in rows)


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _gaps(asked: tuple[int, int], found: tuple[int, ...]) -> str:
    """The numbers of ``asked`` (inclusive bounds) missing from ``found`` (sorted, inside them), as
    ranges: ``(1, 9), (3, 4)`` -> ``"1-2, 5-9"``; from the bounds, never a list of the range."""
    out: list[str] = []
    nxt = asked[0]
    for n in [*found, asked[1] + 1]:
        if n > nxt:
            out.append(str(nxt) if n - 1 == nxt else f"{nxt}-{n - 1}")
        nxt = max(nxt, n + 1)
    return ", ".join(out)


def plan_slice(db: TraceDB, options: SliceOptions) -> SlicePlan:
    """Choose the trace and the window of a slice.

    Raises :class:`UsageError` (exit 2) when neither ``steps`` nor ``window`` is given, for an
    unknown rank, or when several traces fit; :class:`InputError` when the steps are not in the
    trace or the window holds nothing of it."""
    if options.steps is None and options.window is None:
        raise UsageError(NOTHING_CHOSEN)
    trace_id, rank, path, sha256, file_bytes, rank_source = _pick_trace(db, options.rank)
    lo, hi = db.con.execute("SELECT min(ts_us), max(ts_us + dur_us) FROM events WHERE trace_id = $t",
                            {"t": trace_id}).fetchone()
    if lo is None:
        raise InputError(f"{path}: the trace holds no events to slice")
    t0, t1, steps = float(lo), float(hi) + 1.0, ()
    notes: list[str] = []
    if options.steps is not None:
        t0, t1, steps = _step_window(db, trace_id, options.steps)
        missing = _gaps(options.steps, steps)
        if missing:
            notes.append(f"the trace has no ProfilerStep#{missing}: the slice holds steps {_ranges(list(steps))}")
    if options.window is not None:
        w0, w1 = options.window
        t0 = max(t0, w0) if w0 is not None else t0
        t1 = min(t1, w1) if w1 is not None else t1
    if t1 <= t0 or t1 <= lo or t0 >= hi:
        raise InputError(_empty_window(options, float(lo), float(hi)))
    plan = SlicePlan(int(trace_id), int(rank), str(path), sha256, file_bytes, rank_source, t0, t1, steps,
                     options.steps, notes=notes)
    if options.window is not None and steps:
        plan.steps = _steps_within(db, plan)
    return plan


def _empty_window(options: SliceOptions, lo: float, hi: float) -> str:
    w0, w1 = options.window or (None, None)
    asked = f"--window {'' if w0 is None else f'{w0:.3f}'}:{'' if w1 is None else f'{w1:.3f}'}"
    where = " and the steps asked" if options.steps is not None else ""
    return (f"{asked} holds nothing of the trace{where}: the trace spans [{lo:.3f}, {hi:.3f}] µs on its own "
            "clock (the ts_us of every table)")


def _steps_within(db: TraceDB, plan: SlicePlan) -> tuple[int, ...]:
    """The selected steps that lie wholly inside the (narrowed) window."""
    rows = db.con.execute(
        "SELECT DISTINCT step FROM steps WHERE trace_id = $t AND step IN (SELECT unnest($s)) "
        "AND ts_us >= $t0 AND end_us <= $t1 ORDER BY 1",
        {"t": plan.trace_id, "s": list(plan.steps), "t0": plan.t0, "t1": plan.t1}).fetchall()
    return tuple(int(r[0]) for r in rows)


def _keep(db: TraceDB, plan: SlicePlan) -> None:
    """Create TEMP table ``slice_kept`` (slice_kept.sql) and set ``plan.hi``."""
    lo, hi = plan.step_range or (None, None)
    db.con.execute(sql_text("slice_kept.sql", __package__), {"trace_id": plan.trace_id, "t0": plan.t0, "t1": plan.t1,
                                                 "step_lo": lo, "step_hi": hi})
    end = db.scalar(
        "SELECT max(ts_us + dur_us) FROM events WHERE trace_id = $t AND cat IN (SELECT unnest($c)) "
        "AND event_id IN (SELECT event_id FROM slice_kept)", {"t": plan.trace_id, "c": list(GPU_AND_RUNTIME)})
    plan.hi = max(plan.t1, float(end)) if end is not None else plan.t1


def _flow_index(db: TraceDB, plan: SlicePlan) -> FlowIndex:
    """Per (pid, tid): the kept complete events' starts, sorted, and the running maximum of their
    ends (an event encloses ``ts`` when some start <= ts has a running end >= ts)."""
    rows = db.con.execute(
        "SELECT pid, tid, ts_us, ts_us + dur_us FROM events WHERE trace_id = $t AND name IS DISTINCT FROM '[memory]' "
        "AND event_id IN (SELECT event_id FROM slice_kept) ORDER BY pid, tid, ts_us",
        {"t": plan.trace_id}).fetchall()
    index: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for pid, tid, ts, end in rows:
        starts, ends = index.setdefault((str(pid), str(tid)), ([], []))
        starts.append(ts)
        ends.append(max(end, ends[-1]) if ends else end)
    return FlowIndex(index)


@lru_cache(maxsize=4096)
def _id_value(text: str | None) -> int | str | None:
    """A pid/tid as the trace had it: an int where the text is one, else the text."""
    if text is None:
        return None
    body = text[1:] if text[:1] == "-" else text
    if body.isdigit() and body.isascii() and str(int(text)) == text:
        return int(text)
    return text


def _row_events(db: TraceDB, plan: SlicePlan, counts: dict[str, int]) -> Iterator[bytes]:
    """The kept rows as Chrome events, in file order: ``X`` events, ``[memory]`` as ``i`` (thread scope)."""
    cur = db.con.execute(  # the connection itself: its TEMP views and tables are not on a cursor
        "SELECT cat, name, pid, tid, ts_us, dur_us, args FROM events WHERE trace_id = $t "
        "AND event_id IN (SELECT event_id FROM slice_kept) ORDER BY event_id", {"t": plan.trace_id})
    while batch := cur.fetchmany(FETCH_ROWS):
        for cat, name, pid, tid, ts, dur, args in batch:
            counts["rows"] = counts.get("rows", 0) + 1
            yield _row_event(cat, name, pid, tid, ts, dur, args)


def _row_event(cat: str | None, name: str | None, pid: str | None, tid: str | None, ts: float, dur: float,
               args: str | None) -> bytes:
    instant = name == MEMORY_EVENT and dur == 0
    event: dict[str, Any] = {"ph": "i", "s": "t"} if instant else {"ph": "X"}
    for key, value in (("cat", cat), ("name", name), ("pid", _id_value(pid)), ("tid", _id_value(tid))):
        if value is not None:
            event[key] = value
    event["ts"] = ts
    if not instant:
        event["dur"] = dur
    if args is not None:
        event["args"] = msgspec.Raw(args.encode())
    return _ENC.encode(event)


def _made_flows(db: TraceDB, plan: SlicePlan, counts: dict[str, int]) -> Iterator[bytes]:
    """Without the original file: one ``ac2g`` flow per kept launch call and GPU operation pair."""
    rows = db.con.execute(
        "WITH k AS (SELECT * FROM events WHERE trace_id = $t AND event_id IN (SELECT event_id FROM slice_kept) "
        "AND correlation IS NOT NULL) "
        "SELECT g.correlation, r.pid, r.tid, r.ts_us, g.pid, g.tid, g.ts_us FROM k g JOIN k r USING (correlation) "
        "WHERE g.cat IN (SELECT unnest($g)) AND r.cat IN ('cuda_runtime', 'cuda_driver') "
        "QUALIFY row_number() OVER (PARTITION BY g.event_id ORDER BY r.event_id) = 1 "
        "ORDER BY g.correlation, g.event_id",
        {"t": plan.trace_id, "g": list(GPU_OPS)}).fetchall()
    for corr, lpid, ltid, lts, pid, tid, ts in rows:
        yield _ENC.encode({"ph": "s", "id": corr, "pid": _id_value(lpid), "tid": _id_value(ltid), "ts": lts,
                           "cat": "ac2g", "name": "ac2g"})
        yield _ENC.encode({"ph": "f", "id": corr, "pid": _id_value(pid), "tid": _id_value(tid), "ts": ts,
                           "cat": "ac2g", "name": "ac2g", "bp": "e"})
        counts["flows"] = counts.get("flows", 0) + 2


QUEUE_PAGE = 1024
"""Operations of a stream read at a time while counting those queued at the slice's start (CUDA's
queue holds 1024 launches per stream, so one page nearly always ends the count)."""


def _queued_at(db: TraceDB, trace_id: int, stream: int, lo: float) -> int:
    """Operations of ``stream`` launched before ``lo`` that start at or after it (a stream runs
    them in launch order: the first ones from ``lo`` on, up to one launched at or after ``lo``)."""
    after_ts, after_id, queued = lo, -1, 0
    while True:
        rows = db.con.execute("SELECT * FROM slice_queue_next($t, $s, $ts, $id, $n)",
                              {"t": trace_id, "s": stream, "ts": after_ts, "id": after_id, "n": QUEUE_PAGE}).fetchall()
        for _start, _eid, launch in rows:
            if launch is None:
                continue  # not launched by a queueing call: never in the series
            if launch >= lo:
                return queued
            queued += 1
        if len(rows) < QUEUE_PAGE:
            return queued
        after_ts, after_id = rows[-1][0], rows[-1][1]


def queue_series(db: TraceDB, trace_id: int, lo: float, hi: float) -> dict[int, tuple[Any, list[tuple[float, int]]]]:
    """Per stream: its pid and the launch queue length over [lo, hi] (µs): ``(lo, level in force
    at lo)`` then ``(t, level after every change at t)`` (analyses/slice/slice_queue.sql)."""
    db.con.execute(sql_text("slice_queue.sql", __package__))
    pairs = db.con.execute("SELECT * FROM slice_queue_pairs($t, $lo, $hi)",
                           {"t": trace_id, "lo": lo, "hi": hi}).fetchall()
    changes: dict[int, dict[float, int]] = {}
    pids: dict[int, Counter[Any]] = {}
    for stream, pid, start, launch in pairs:
        per = changes.setdefault(stream, {})
        pids.setdefault(stream, Counter())[pid] += 1
        if lo <= launch <= hi:
            per[launch] = per.get(launch, 0) + 1
        if lo <= start <= hi:
            per[start] = per.get(start, 0) - 1
    later = dict(db.con.execute("SELECT stream, any_value(pid) FROM slice_queue_ops($t) WHERE ts_us >= $lo "
                                "GROUP BY stream", {"t": trace_id, "lo": lo}).fetchall())
    out: dict[int, tuple[Any, list[tuple[float, int]]]] = {}
    for stream in sorted(set(later) | set(changes)):
        level = _queued_at(db, trace_id, stream, lo)
        series = [(lo, level)]
        for t, d in sorted(changes.get(stream, {}).items()):
            level += d
            series.append((t, level))
        out[stream] = (pids[stream].most_common(1)[0][0] if stream in pids else later[stream], series)
    return out


def _counters(db: TraceDB, plan: SlicePlan, counts: dict[str, int]) -> Iterator[bytes]:
    """Counter events: queue length per stream, allocated/reserved bytes per device."""
    for stream, (pid, series) in queue_series(db, plan.trace_id, plan.t0, plan.hi).items():
        if len(series) == 1 and series[0][1] == 0:
            continue  # a stream idle over the whole slice
        for ts, length in series:
            counts["counters"] = counts.get("counters", 0) + 1
            yield _ENC.encode({"ph": "C", "name": f"Queue length (stream {stream})", "pid": _id_value(pid),
                               "ts": ts, "args": {"launches": length}})
    params = {"trace_id": plan.trace_id, "lo": plan.t0, "hi": plan.hi}
    rows = db.con.execute(sql_text("slice_memory.sql", __package__), params).fetchall()
    for device, pid, ts, _eid, allocated, reserved in rows:
        values = {"allocated_bytes": allocated}
        if reserved is not None:
            values["reserved_bytes"] = reserved
        counts["counters"] = counts.get("counters", 0) + 1
        yield _ENC.encode({"ph": "C", "name": f"Memory ({device})", "pid": _id_value(pid), "ts": ts, "args": values})


def _metadata(db: TraceDB, plan: SlicePlan, notes: list[str]) -> dict[str, Any]:
    text = db.scalar("SELECT metadata FROM traces WHERE trace_id = $t", {"t": plan.trace_id})
    try:
        meta = _DEC.decode(text) if text else {}
    except msgspec.DecodeError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    meta.pop("traceEvents", None)
    meta["traceReportSlice"] = {
        "source": plan.path, "rank": plan.rank, "steps": list(plan.steps),
        "window_us": [plan.t0, plan.t1], "notes": notes,
    }
    return meta


def slice_trace(db: TraceDB, options: SliceOptions) -> SliceResult:
    """Cut one trace of ``db`` to ``options``' selection (see the module docstring).

    Returns a :class:`SliceResult` whose ``events`` are written by
    :func:`trace_report.present.slice.write_chrome_trace`. The original file, when read, is read
    here (before anything is written): a file that changed since the ingest is not used.
    Raises :class:`UsageError` / :class:`InputError` as :func:`plan_slice`."""
    plan = plan_slice(db, options)
    _keep(db, plan)
    notes = list(plan.notes)
    source: SourceEvents | None = None
    if options.source:
        source = read_source(plan.path, plan.sha256, plan.file_bytes, _flow_index(db, plan), plan.t0, plan.hi)
        notes.extend(source.notes)
        if not source.ok:
            source = None
    else:
        notes.append("--no-source: the slice has no process/thread names (ph M) and its flows are made from "
                     "the correlation of each launch call and GPU operation")
    if plan.rank and plan.rank_source != "distributedInfo":
        notes.append(f"the trace's rank {plan.rank} came from its {plan.rank_source or 'default'}: a re-ingest "
                     "reads the slice's rank from its file name (e.g. rank-3.step.json.gz)")
    if db.scalar("SELECT bool_or(NOT totals_known) FROM memory_events WHERE trace_id = $t", {"t": plan.trace_id}):
        notes.append("this trace's [memory] events carry no 'Total Allocated': re-ingested, the slice's allocated "
                     "bytes start from its own first event; its 'Memory (...)' counter tracks hold the whole "
                     "trace's running sum")
    counts: dict[str, int] = {}
    result = SliceResult(plan, _metadata(db, plan, notes), iter(()), counts, notes)
    result.events = _events(db, plan, options, source, counts)
    return result


def _events(db: TraceDB, plan: SlicePlan, options: SliceOptions, source: SourceEvents | None,
            counts: dict[str, int]) -> Iterator[bytes]:
    if source is not None:
        counts["metadata_events"] = len(source.metadata_events)
        yield from source.metadata_events
    yield from _row_events(db, plan, counts)
    if source is not None:
        counts["other_events"] = len(source.other_events)
        counts["flows"] = source.n_flow_events
        yield from source.other_events
        yield from source.flow_events()
    else:
        yield from _made_flows(db, plan, counts)
    if options.counters:
        yield from _counters(db, plan, counts)
