"""Turn a decoded piece into rows of the ``events`` relation (``docs/schema.md``).

Normalisation happens here, vectorised with Arrow, in whichever process decoded the piece:
the 2020/2021 capitalised categories become the PyTorch 2.x names, a ``stream`` missing from
``args`` is taken from a ``tid`` of the form ``"stream 7"``, and Itanium-mangled names
(``_Z...``) are demangled (the raw names are returned so that ``kernel_names`` keeps them).
Secrets in every text column (``cat``, ``name``, ``pid``, ``tid``, ``args``) are replaced
(:mod:`trace_report.redact`): one RE2 screen over each column (over its distinct values where the
column is dictionary-encoded anyway: ``cat``, ``name``, ``pid``, ``tid``; over the rows the
compiled scanner marks for ``args``), the Python redaction only for the values it flags.

Numbers are checked here too (``docs/schema.md``, "Excluded and duplicate events"): rows with a
negative or non-finite duration, a non-finite timestamp or a duration over
:data:`ABSURD_DUR_US` are dropped in the piece; the rows that could be longer than the rest of the
trace, or lie far outside its span (the :data:`EDGE_ROWS` latest ends and earliest starts of
each piece), travel in :class:`PieceStats` so that :func:`implausible_events` can judge them once
the whole trace is read.
Exact duplicates are counted (and kept) by :func:`count_duplicates`, from a 64-bit key per row
that each piece computes where it is decoded (:func:`row_keys`, carried in :class:`PieceStats`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from trace_report import arrowcalls as ac
from trace_report.formats.names import demangle
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.redact import PRECHECK_PATTERN, Redaction, could_contain_secret, redact_json_text, redact_text
from trace_report.store.step_numbers import unread_steps

CATEGORY_NAMES = {
    "Kernel": "kernel",
    "Operator": "cpu_op",
    "Runtime": "cuda_runtime",
    "Driver": "cuda_driver",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
}
"""2020/2021 Kineto category spellings and the names PyTorch 1.13+ uses for them."""

PIECE_ID_BITS = 24
"""``event_id = piece_number << 24 | row``: increasing in file order, unique within a trace."""

ABSURD_DUR_US = 1e12
"""A duration over this (11.6 days) is a broken number, whatever the trace."""
OVERLONG_FACTOR = 2.0
OVERLONG_SLACK_US = 1e6
OVERLONG_FLOOR_US = 60e6
"""An event is longer than its trace when ``dur > OVERLONG_FACTOR * span + OVERLONG_SLACK_US``
and ``dur > OVERLONG_FLOOR_US``, ``span`` = max(ts + dur) - min(ts) over the trace's other
events. The factor keeps the events that enclose the whole trace (``PyTorch Profiler (0)``, a
CPU-only trace's step: barely longer than the trace in the real traces); the slack keeps tiny
traces of a few events; the floor (one minute) keeps a real ProfilerStep that encloses idle time
(HTA's triton example: a step many times longer than the events inside it)."""
MISPLACED_FACTOR = 10.0
MISPLACED_FLOOR_US = 86_400e6
"""A time stamp is outside its trace's plausible span when the event lies more than
``max(MISPLACED_FACTOR * span, MISPLACED_FLOOR_US)`` beyond the other events (rule in
:func:`misplaced_events`). The floor (one day) is over 6,000 times the longest of the 23 real
traces in ``../shared/data/traces`` (milliseconds to seconds, hta_triton_example the longest): a profiling
window is seconds to minutes. The broken values met are far beyond it (a ts of 2^64 us: 584,000
years; a ts of 0 beside epoch time stamps: 50 years). The factor keeps long captures with quiet
stretches: beside a recording of a week, an event must be ten weeks away."""
EDGE_ROWS = 16
"""Rows with the latest ends and the earliest starts kept per piece for :func:`implausible_events`."""
DUPLICATE_COLUMNS = ["cat", "name", "pid", "tid", "ts_us", "dur_us", "args"]
"""Two rows equal in all of these are exact duplicates."""
SMALL_SCREEN = 1024
"""Values of up to this many bytes in all (the dictionaries of categories, pids and tids) are
screened in Python (:func:`~trace_report.redact.could_contain_secret`, the same pattern): an
RE2 call compiles the pattern each time, more than so few bytes cost in Python (whose
``re`` is slower per byte: names and args always go to RE2)."""


class EdgeRow(NamedTuple):
    """A row that may be longer than the rest of its trace: ``end = ts + dur``."""

    end: float
    ts: float
    dur: float
    event_id: int
    name: str | None


def describe(row: EdgeRow | tuple[str | None, float, float]) -> str:
    """``'name' (ts 1.0 us, dur -5.0 us)``: one example event for a note."""
    name, ts, dur = (row.name, row.ts, row.dur) if isinstance(row, EdgeRow) else row
    return f"{name!r} (ts {ts!r} us, dur {dur!r} us)"


@dataclass
class PieceStats:
    """Counts that the ``traces`` row needs, gathered without querying the events again."""

    rows: int = 0
    n_events: int = 0
    n_missing_time: int = 0
    n_kernels: int = 0
    kernel_devices: Counter[int] = field(default_factory=Counter)
    mangled: dict[str, str] = field(default_factory=dict)
    redactions: Counter[str] = field(default_factory=Counter)
    """Events with a secret replaced, by ``kind@events.<column>`` (``name``, ``args``, ``cat``, ``pid``, ``tid``)."""
    n_bad_numbers: int = 0
    """Rows dropped for a negative, non-finite or over-:data:`ABSURD_DUR_US` duration or timestamp."""
    bad_example: tuple[str | None, float, float] | None = None
    late_ends: list[EdgeRow] = field(default_factory=list)
    early_starts: list[EdgeRow] = field(default_factory=list)
    n_not_objects: int = 0
    """Entries of ``traceEvents`` that are not JSON objects."""
    n_bad_utf8: int = 0
    """Invalid UTF-8 sequences replaced by U+FFFD."""
    n_unread_steps: int = 0
    """ProfilerStep events without a step number (:mod:`trace_report.store.step_numbers`), and the
    first one's name."""
    unread_step: str | None = None
    dup_keys: list[np.ndarray] = field(default_factory=list)
    """:func:`row_keys` of the piece's rows, sorted (uint64, one array per piece), for
    :func:`count_duplicates`: sorted where the piece is decoded, so that the driver only merges."""

    def add(self, other: PieceStats) -> None:
        self.rows += other.rows
        self.n_events += other.n_events
        self.n_missing_time += other.n_missing_time
        self.n_kernels += other.n_kernels
        self.kernel_devices.update(other.kernel_devices)
        self.mangled.update(other.mangled)
        self.redactions.update(other.redactions)
        self.n_bad_numbers += other.n_bad_numbers
        self.bad_example = self.bad_example or other.bad_example
        self.late_ends = sorted(self.late_ends + other.late_ends, key=lambda r: (-r.end, r.event_id))[:EDGE_ROWS]
        self.early_starts = sorted(self.early_starts + other.early_starts, key=lambda r: (r.ts, r.event_id))[:EDGE_ROWS]
        self.n_not_objects += other.n_not_objects
        self.n_unread_steps += other.n_unread_steps
        self.unread_step = self.unread_step or other.unread_step
        self.n_bad_utf8 += other.n_bad_utf8
        self.dup_keys.extend(other.dup_keys)


def arrow_of(values: np.ndarray) -> pa.Array:
    """A numeric (or bool) numpy array as an Arrow array without copying numbers. ``pa.array``
    on numpy imports ``numpy.ma`` (a cost in every ingest) to ask whether it is masked."""
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _normalise_categories(cat: pa.ChunkedArray | pa.Array, counts: Counter[str]) -> tuple[pa.Array, np.ndarray]:
    """``cat`` with Kineto's spellings made one (:data:`CATEGORY_NAMES`) and secrets redacted,
    and its :func:`_text_hashes` (from the same dictionary)."""
    enc = ac.dictionary_encode(cat).combine_chunks() if isinstance(cat, pa.ChunkedArray) else ac.dictionary_encode(cat)
    values = pa.array([CATEGORY_NAMES.get(v, v) for v in enc.dictionary.to_pylist()], pa.string())
    values = _redact_column(values, "cat", redact_text, counts, enc.indices)
    return ac.take(values, enc.indices), _dictionary_hashes(values, enc.indices)


def _screened_text(column: pa.Array, where: str, counts: Counter[str]) -> tuple[pa.Array, np.ndarray]:
    """A text column (``pid``, ``tid``) with secrets redacted, and its :func:`_text_hashes`:
    one dictionary for both (:func:`row_keys` would encode it anyway)."""
    enc = ac.dictionary_encode(column)
    dictionary = _redact_column(enc.dictionary, where, redact_text, counts, enc.indices)
    out = column if dictionary is enc.dictionary else ac.take(dictionary, enc.indices)
    return out, _dictionary_hashes(dictionary, enc.indices)


def _demangle_names(name: pa.Array, counts: Counter[str]) -> tuple[pa.Array, dict[str, str], np.ndarray]:
    """``name`` redacted and demangled, the mangled names met (raw -> demangled), and the
    :func:`_text_hashes` of the result."""
    enc = ac.dictionary_encode(name)
    dictionary = _redact_column(enc.dictionary, "name", redact_text, counts, enc.indices)
    uniques = dictionary.to_pylist()
    mangled = {u: demangle(u) for u in uniques if u is not None and u.startswith("_Z")}
    mangled = {raw: nice for raw, nice in mangled.items() if nice != raw}
    if not mangled:
        out = name if dictionary is enc.dictionary else ac.take(dictionary, enc.indices)
        return out, {}, _dictionary_hashes(dictionary, enc.indices)
    values = pa.array([mangled.get(u, u) if u is not None else None for u in uniques], pa.string())
    screened = _redact_column(values, "name", redact_text, counts, enc.indices)  # demangled text, judged again
    if screened is not values:
        values = screened
        mangled = {u: v for u, v in zip(uniques, values.to_pylist(), strict=True) if u in mangled}
    return ac.take(values, enc.indices), mangled, _dictionary_hashes(values, enc.indices)


def _screen(values: pa.Array, candidates: np.ndarray | None) -> pa.Array | None:
    """Rows of ``values`` that :data:`~trace_report.redact.PRECHECK_PATTERN` matches (bool
    array), or None for none. ``candidates`` (bool per row, from the compiled scanner) limits
    the RE2 pass to the rows it marks: the others cannot match."""
    if candidates is None and values.nbytes <= SMALL_SCREEN:
        flags = [v is not None and could_contain_secret(v) for v in values.to_pylist()]
        return pa.array(flags, pa.bool_()) if any(flags) else None
    if candidates is None:
        hits = ac.fill_null(ac.match_substring_regex(values, PRECHECK_PATTERN), False)
        return hits if ac.any(hits).as_py() else None
    rows = np.flatnonzero(candidates)
    if len(rows) == 0:
        return None
    found = ac.fill_null(ac.match_substring_regex(ac.take(values, arrow_of(rows)), PRECHECK_PATTERN), False)
    found_np = found.to_numpy(zero_copy_only=False)
    if not found_np.any():
        return None
    mask = np.zeros(len(values), dtype=bool)
    mask[rows[found_np]] = True
    return arrow_of(mask)


def _redact_column(values: pa.Array, column: str, redact: Callable[[str, str], tuple[str, list[Redaction]]],
                   counts: Counter[str], indices: pa.Array | None = None,
                   candidates: np.ndarray | None = None) -> pa.Array:
    """``values`` with secrets replaced; ``counts[kind@events.<column>]`` += events changed.

    Only rows that :data:`~trace_report.redact.PRECHECK_PATTERN` matches (one vectorised RE2
    pass, over the ``candidates`` rows only when given: see :func:`_screen`) are looked at in
    Python, each distinct value once. With ``indices``, ``values`` is a dictionary and each of
    its entries stands for the events whose index points at it."""
    if len(values) == 0 or values.null_count == len(values):
        return values
    hits = _screen(values, candidates)
    if hits is None:
        return values
    where = f"events.{column}"
    done: dict[str, tuple[str, set[str]]] = {}
    changed = []
    found_at: list[tuple[int, set[str]]] = []
    positions = ac.indices_nonzero(hits).to_pylist()
    for pos, text in zip(positions, ac.filter(values, hits).to_pylist(), strict=True):
        if text not in done:
            new, found = redact(text, where)
            done[text] = new, {f"{r.kind}@{where}" for r in found}
        new, kinds = done[text]
        changed.append(new)
        if kinds:
            found_at.append((pos, kinds))
    if not found_at:
        return values
    weight: dict[int, int] = {}
    if indices is not None:
        used = ac.value_counts(ac.drop_null(indices)).to_pylist()
        weight = {int(v["values"]): int(v["counts"]) for v in used}
    for pos, kinds in found_at:
        for kind in kinds:
            counts[kind] += weight.get(pos, 0) if indices is not None else 1
    return ac.replace_with_mask(values, hits, pa.array(changed, values.type))


def _stream_number(tid: str) -> int | None:
    try:
        return int(tid[len("stream "):])
    except ValueError:
        return None


def _stream(stream: pa.Array, tid: pa.Array) -> pa.Array:
    """``stream``, filled from a 2020/2021 ``tid`` such as ``"stream 7"`` where args lack it."""
    from_tid = ac.starts_with(tid, "stream ")
    mask = ac.and_kleene(ac.is_null(stream), ac.fill_null(from_tid, False))
    if not ac.any(mask).as_py():
        return stream
    values = stream.to_pylist()
    for i, (use, t) in enumerate(zip(mask.to_pylist(), tid.to_pylist(), strict=True)):
        if use:
            values[i] = _stream_number(t)
    return pa.array(values, pa.int64())


def _bad_numbers(ts: pa.Array, dur: pa.Array) -> pa.Array:
    """True where ``dur`` is negative, not finite or over :data:`ABSURD_DUR_US`, or ``ts`` is not
    finite (nulls are not judged here: a missing ``ts``/``dur`` is an error of its own)."""
    broken = ac.or_kleene(ac.invert(ac.is_finite(ts)), ac.invert(ac.is_finite(dur)))
    out_of_range = ac.or_kleene(ac.less(dur, 0.0), ac.greater(dur, ABSURD_DUR_US))
    return ac.fill_null(ac.or_kleene(broken, out_of_range), False)


def _edge_rows(table: pa.Table) -> tuple[list[EdgeRow], list[EdgeRow]]:
    """The :data:`EDGE_ROWS` rows with the latest ends and those with the earliest starts (rows
    with both ``ts_us`` and ``dur_us``; ties in order of ``event_id``)."""
    ts_col, dur_col = table.column("ts_us"), table.column("dur_us")
    ts = ts_col.to_numpy(zero_copy_only=False)
    dur = dur_col.to_numpy(zero_copy_only=False)
    event_id = table.column("event_id").to_numpy(zero_copy_only=False)
    if ts_col.null_count or dur_col.null_count:
        rows = np.flatnonzero(ac.and_(ac.is_valid(ts_col), ac.is_valid(dur_col)).to_numpy(zero_copy_only=False))
        ts, dur, event_id = ts[rows], dur[rows], event_id[rows]
    else:
        rows = np.arange(len(ts))
    if len(rows) == 0:
        return [], []
    end = ts + dur
    k = min(EDGE_ROWS, len(rows))

    def pick(key: np.ndarray) -> list[EdgeRow]:
        first = np.argpartition(key, k - 1)[:k] if len(key) > k else np.arange(len(key))
        first = first[np.lexsort((event_id[first], key[first]))]
        names = ac.take(table.column("name"), arrow_of(rows[first])).to_pylist()
        return [EdgeRow(float(end[i]), float(ts[i]), float(dur[i]), int(event_id[i]), n)
                for i, n in zip(first, names, strict=True)]

    return pick(-end), pick(ts)


def finalize(raw: pa.Table, trace_id: int, piece_number: int, n_events: int,
             n_missing: int, *, n_not_objects: int = 0, n_bad_utf8: int = 0,
             args_suspects: np.ndarray | None = None) -> tuple[pa.Table, PieceStats]:
    """Rows of ``events`` for one decoded piece (:data:`chrome.EVENT_SCHEMA`) and its stats;
    ``args_suspects``: :attr:`~trace_report.formats.kineto.Piece.args_suspects`."""
    n = raw.num_rows
    base = piece_number << PIECE_ID_BITS
    cols = {c: raw.column(c) for c in raw.column_names}
    cols = {c: (v.chunk(0) if v.num_chunks == 1 else v.combine_chunks()) for c, v in cols.items()}
    redactions: Counter[str] = Counter()
    cat, cat_hashes = _normalise_categories(cols["cat"], redactions)
    name, mangled, name_hashes = _demangle_names(cols["name"], redactions)
    pid, pid_hashes = _screened_text(cols["pid"], "pid", redactions)
    tid, tid_hashes = _screened_text(cols["tid"], "tid", redactions)
    args = _redact_column(cols["args"], "args", redact_json_text, redactions, candidates=args_suspects)
    table = pa.Table.from_arrays(
        [
            arrow_of(np.full(n, trace_id, dtype=np.int32)),
            arrow_of(np.arange(base, base + n, dtype=np.int64)),
            cat,
            name,
            pid,
            tid,
            cols["ts_us"],
            cols["dur_us"],
            _stream(cols["stream"], cols["tid"]),
            cols["device"],
            cols["correlation"],
            cols["external_id"],
            args,
        ],
        schema=EVENTS_SCHEMA,
    )
    bad = _bad_numbers(cols["ts_us"], cols["dur_us"])
    n_bad = int(ac.sum(bad).as_py() or 0)
    bad_example = None
    if n_bad:
        first = ac.filter(table, bad).slice(0, 1).to_pylist()[0]
        bad_example = (first["name"], first["ts_us"], first["dur_us"])
    if n_bad or cols["ts_us"].null_count or cols["dur_us"].null_count:  # no time: dropped, counted as n_missing
        keep = ac.and_(ac.invert(bad), ac.and_(ac.is_valid(cols["ts_us"]), ac.is_valid(cols["dur_us"])))
        table = ac.filter(table, keep)
        kept = keep.to_numpy(zero_copy_only=False)
        cat_hashes, name_hashes = cat_hashes[kept], name_hashes[kept]
        pid_hashes, tid_hashes = pid_hashes[kept], tid_hashes[kept]
    late_ends, early_starts = _edge_rows(table)
    n_unread_steps, unread_step = unread_steps([table])
    is_kernel = ac.fill_null(ac.equal(table.column("cat"), "kernel"), False)
    devices = ac.filter(table.column("device"), is_kernel)
    counts = ac.value_counts(ac.drop_null(devices)) if len(devices) else []
    stats = PieceStats(
        rows=table.num_rows,
        n_events=n_events,
        n_missing_time=n_missing,
        n_kernels=int(ac.sum(is_kernel).as_py() or 0),
        kernel_devices=Counter({int(c["values"]): int(c["counts"]) for c in counts.to_pylist()})
        if len(devices) else Counter(),
        mangled=mangled,
        redactions=redactions,
        n_bad_numbers=n_bad,
        bad_example=bad_example,
        late_ends=late_ends,
        early_starts=early_starts,
        n_not_objects=n_not_objects,
        n_bad_utf8=n_bad_utf8,
        n_unread_steps=n_unread_steps,
        unread_step=unread_step,
        dup_keys=[np.sort(row_keys(table, {"cat": cat_hashes, "name": name_hashes, "pid": pid_hashes,
                                           "tid": tid_hashes}))],
    )
    return table, stats


def _allowance(span: float) -> float:
    """How far beyond the other events an event may lie (µs), ``span`` their extent: see
    :data:`MISPLACED_FACTOR`."""
    return max(MISPLACED_FACTOR * span, MISPLACED_FLOOR_US)


def _misplaced_late(ends: list[EdgeRow], starts: list[EdgeRow], rows: int) -> list[EdgeRow]:
    """The largest group of latest-ending rows (see :func:`misplaced_events`) that all start
    past the rest's last end plus :func:`_allowance` of the rest's span, or []."""
    found: list[EdgeRow] = []
    for k in range(1, min(len(ends) - 1, EDGE_ROWS - 1, (rows - 1) // 2) + 1):
        group = ends[:k]
        ids = {r.event_id for r in group}
        first_ts = next((r.ts for r in starts if r.event_id not in ids), None)
        last_end = ends[k].end
        if first_ts is not None and min(r.ts for r in group) > last_end + _allowance(last_end - first_ts):
            found = group
    return found


def _misplaced_early(ends: list[EdgeRow], starts: list[EdgeRow], rows: int) -> list[EdgeRow]:
    """The mirror of :func:`_misplaced_late`: the earliest-starting rows that all end before the
    rest's first start minus the allowance."""
    found: list[EdgeRow] = []
    for k in range(1, min(len(starts) - 1, EDGE_ROWS - 1, (rows - 1) // 2) + 1):
        group = starts[:k]
        ids = {r.event_id for r in group}
        last_end = next((r.end for r in ends if r.event_id not in ids), None)
        first_ts = starts[k].ts
        if last_end is not None and max(r.end for r in group) < first_ts - _allowance(last_end - first_ts):
            found = group
    return found


def misplaced_events(ends: list[EdgeRow], starts: list[EdgeRow], rows: int) -> list[EdgeRow]:
    """Rows whose time stamp is outside the trace's plausible span, from its edge rows (``ends``:
    latest end first; ``starts``: earliest start first; ``rows``: the rows of the trace).

    Rule: a group of at most ``EDGE_ROWS - 1`` events at one end of the trace, and fewer than half
    of its events, is misplaced when every event of it starts more than
    ``X = max(MISPLACED_FACTOR * span, MISPLACED_FLOOR_US)`` after the other events' last end (or
    ends more than ``X`` before their first start), ``span`` = max(ts + dur) - min(ts) over those
    other events: ten times the trace's own length and at least one day away from all of it
    (:data:`MISPLACED_FACTOR`). The largest such group at each end is taken, so that outliers
    cannot shelter each other (two events at 2^64 us are both dropped). This is a trimmed range
    with the trim given in events, as ``[p0.1 - X, p99.9 + X]`` is with a percentile: the span is
    measured without the few extreme events, and the bulk of the trace (at least half of it, and
    every event past the 15 most extreme at each end) is never judged misplaced."""
    return _misplaced_late(ends, starts, rows) + _misplaced_early(ends, starts, rows)


def implausible_events(stats: PieceStats) -> list[EdgeRow]:
    """The rows of a whole trace (its merged :class:`PieceStats`) whose numbers cannot be true,
    to be left out with the piece-level ones (:attr:`PieceStats.n_bad_numbers`):

    - misplaced: a time stamp outside the trace's plausible span (:func:`misplaced_events`);
    - overlong: longer than the rest of the trace,
      ``dur > max(OVERLONG_FACTOR * span + OVERLONG_SLACK_US, OVERLONG_FLOOR_US)``,
      ``span`` = max(ts + dur) - min(ts) over its other rows (latest end first).

    Each row found leaves the span the next ones are judged against, so the misplaced rows are
    looked for first: one at 2^64 us would make every duration plausible. Such rows end after
    every other row or start before all of them, so only the edge rows need looking at; a trace
    with more than :data:`EDGE_ROWS` of them keeps the ones not reached.
    """
    ends, starts = list(stats.late_ends), list(stats.early_starts)
    found: list[EdgeRow] = []
    while True:
        out = misplaced_events(ends, starts, stats.rows - len(found)) or _one_overlong(ends, starts)
        if not out:
            return found
        found.extend(out)
        gone = {r.event_id for r in out}
        ends = [r for r in ends if r.event_id not in gone]
        starts = [r for r in starts if r.event_id not in gone]


def _one_overlong(ends: list[EdgeRow], starts: list[EdgeRow]) -> list[EdgeRow]:
    """The longest edge row longer than the rest of the trace (see :func:`implausible_events`), or []."""
    for row in sorted({*ends[:EDGE_ROWS], *starts[:EDGE_ROWS]}, key=lambda r: (-r.dur, r.event_id)):
        last_end = next((r.end for r in ends if r.event_id != row.event_id), None)
        first_ts = next((r.ts for r in starts if r.event_id != row.event_id), None)
        if last_end is None or first_ts is None:
            continue
        if row.dur > max(OVERLONG_FACTOR * (last_end - first_ts) + OVERLONG_SLACK_US, OVERLONG_FLOOR_US):
            return [row]
    return []


overlong_events = implausible_events
"""The former name (``ingest/pipeline`` imports it)."""


_KEY_MUL = np.uint64(0x9E3779B97F4A7C15)
KEY_COLUMNS = ["cat", "name", "pid", "tid", "ts_us", "dur_us", "correlation", "external_id", "args"]
"""The columns :func:`row_keys` reads: :data:`DUPLICATE_COLUMNS`, of which ``args`` only by its
length and the two ids taken from it (``correlation``, ``external_id``): hashing every ``args``
text would cost more than the rare exact comparison, while the ids and the length tell apart the
nested operators that share a name and their times (176 of the 681 k rows of the event-dense
benchmark trace shared a key without them, and made every piece be read again). The two ids must
be a function of the ``args`` text alone (both decoding paths of ``formats/kineto`` take them the
same way), so that equal rows keep equal keys."""


def _time_keys(table: pa.Table) -> np.ndarray:
    """One 64-bit key per row from the bits of ``ts_us`` and ``dur_us`` (equal rows, equal keys)."""
    ts = table.column("ts_us").to_numpy(zero_copy_only=False).astype(np.float64).view(np.uint64)
    dur = table.column("dur_us").to_numpy(zero_copy_only=False).astype(np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        return ts * _KEY_MUL ^ dur


def _int_keys(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer column (null -> -1), or the byte lengths of any other (text) column, as uint64."""
    if not pa.types.is_integer(column.type):
        column = ac.binary_length(column)
    return ac.fill_null(column, -1).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)


def _dictionary_hashes(values: pa.Array, indices: pa.Array) -> np.ndarray:
    """:func:`_text_hashes` of the column ``values.take(indices)``, one BLAKE2b per value."""
    hashes = np.array([int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little")
                       if v is not None else 0 for v in values.to_pylist()] + [0], dtype=np.uint64)
    return hashes[ac.fill_null(indices, len(values)).to_numpy(zero_copy_only=False)]


def _text_hashes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A 64-bit hash per row of a string column (null -> 0): BLAKE2b of each distinct value, so
    that equal texts get equal hashes in any process (unlike ``hash``)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    enc = ac.dictionary_encode(column)
    return _dictionary_hashes(enc.dictionary, enc.indices)


def row_keys(table: pa.Table, text_hashes: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """One 64-bit key per row over :data:`KEY_COLUMNS` (uint64; equal rows, equal keys). Rows that
    share a key are compared exactly by :func:`count_duplicates`: with the names, ids and ``args``
    lengths in the key, the nested operators that start and end together (common at microsecond
    resolution) no longer do. ``text_hashes``: :func:`_text_hashes` of some text columns, already
    computed (:func:`finalize` has them from its own dictionaries)."""
    known = text_hashes or {}
    key = _time_keys(table)
    with np.errstate(over="ignore"):
        for name in ("cat", "name", "pid", "tid"):
            hashes = known[name] if name in known else _text_hashes(table.column(name))
            key = key * _KEY_MUL ^ hashes
        for name in ("correlation", "external_id", "args"):
            key = key * _KEY_MUL ^ _int_keys(table.column(name))
    return key


def count_duplicates(tables: Callable[[list[str]], Iterable[pa.Table]],
                     keys: list[np.ndarray] | None = None) -> int:
    """Rows of one trace equal to an earlier row in every :data:`DUPLICATE_COLUMNS` column.

    ``tables(columns)`` yields the trace's events (those columns at least) piece by piece;
    ``keys``: the :func:`row_keys` of all its rows, each piece's sorted (:attr:`PieceStats.dup_keys`,
    computed where the pieces were decoded), else they are computed here from :data:`KEY_COLUMNS`. The exact
    comparison reads the pieces again only when some key occurs more than once, and then only the
    rows with such a key; in real traces that is few rows or none.
    """
    if keys is None:
        keys = [np.sort(row_keys(t)) for t in tables(KEY_COLUMNS)]
    if not keys:
        return 0
    every = np.concatenate(keys)
    # In place (np.unique(..., return_counts=True) held five arrays of this size: +0.37 GB at
    # 7.5 M rows); "stable" is timsort, which merges the sorted runs of the pieces (3x faster
    # than sorting their concatenation afresh).
    every.sort(kind="stable")
    repeated = every[1:] == every[:-1]
    if not repeated.any():
        return 0
    shared = np.unique(every[1:][repeated])
    del every, repeated
    wanted = arrow_of(shared.astype(np.uint64))
    parts = [ac.filter(t.select(DUPLICATE_COLUMNS), ac.is_in(arrow_of(row_keys(t)), wanted))
             for t in tables(KEY_COLUMNS)]
    rows = pa.concat_tables(parts)
    groups = rows.group_by(DUPLICATE_COLUMNS, use_threads=False).aggregate([([], "count_all")])
    return rows.num_rows - groups.num_rows


def empty_events() -> pa.Table:
    """A zero-row table with the ``events`` columns."""
    return EVENTS_SCHEMA.empty_table()
