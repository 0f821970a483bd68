"""Turn a decoded piece into rows of the ``events`` relation (``docs/schema.md``).

Normalisation happens here, vectorised with Arrow, in whichever process decoded the piece:
the 2020/2021 capitalised categories become the PyTorch 2.x names, a ``stream`` missing from
``args`` is taken from a ``tid`` of the form ``"stream 7"``, and Itanium-mangled names
(``_Z...``) are demangled (the raw names are returned so that ``kernel_names`` keeps them).
Secrets in ``name`` and ``args`` are replaced (:mod:`trace_report.redact`): one RE2 screen over
each column, the Python redaction only for the rows it flags.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from trace_report.formats.names import demangle
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.redact import PRECHECK_PATTERN, Redaction, redact_json_text, redact_text

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
    """Events with a secret replaced, by ``kind@events.name`` / ``kind@events.args``."""

    def add(self, other: PieceStats) -> None:
        self.rows += other.rows
        self.n_events += other.n_events
        self.n_missing_time += other.n_missing_time
        self.n_kernels += other.n_kernels
        self.kernel_devices.update(other.kernel_devices)
        self.mangled.update(other.mangled)
        self.redactions.update(other.redactions)


def _normalise_categories(cat: pa.ChunkedArray | pa.Array) -> pa.Array:
    enc = pc.dictionary_encode(cat).combine_chunks() if isinstance(cat, pa.ChunkedArray) else pc.dictionary_encode(cat)
    values = [CATEGORY_NAMES.get(v, v) for v in enc.dictionary.to_pylist()]
    return pc.take(pa.array(values, pa.string()), enc.indices)


def _demangle_names(name: pa.Array, counts: Counter[str]) -> tuple[pa.Array, dict[str, str]]:
    enc = pc.dictionary_encode(name)
    dictionary = _redact_column(enc.dictionary, "name", redact_text, counts, enc.indices)
    uniques = dictionary.to_pylist()
    mangled = {u: demangle(u) for u in uniques if u is not None and u.startswith("_Z")}
    mangled = {raw: nice for raw, nice in mangled.items() if nice != raw}
    if not mangled:
        return (name if dictionary is enc.dictionary else pc.take(dictionary, enc.indices)), {}
    values = pa.array([mangled.get(u, u) if u is not None else None for u in uniques], pa.string())
    return pc.take(values, enc.indices), mangled


def _redact_column(values: pa.Array, column: str, redact: Callable[[str, str], tuple[str, list[Redaction]]],
                   counts: Counter[str], indices: pa.Array | None = None) -> pa.Array:
    """``values`` with secrets replaced; ``counts[kind@events.<column>]`` += events changed.

    Only rows that :data:`~trace_report.redact.PRECHECK_PATTERN` matches (one vectorised RE2
    pass) are looked at in Python, each distinct value once. With ``indices``, ``values`` is a
    dictionary and each of its entries stands for the events whose index points at it."""
    if len(values) == 0 or values.null_count == len(values):
        return values
    hits = pc.fill_null(pc.match_substring_regex(values, PRECHECK_PATTERN), False)
    if not pc.any(hits).as_py():
        return values
    where = f"events.{column}"
    done: dict[str, tuple[str, set[str]]] = {}
    changed = []
    found_at: list[tuple[int, set[str]]] = []
    positions = pc.indices_nonzero(hits).to_pylist()
    for pos, text in zip(positions, pc.filter(values, hits).to_pylist(), strict=True):
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
        used = pc.value_counts(indices.drop_null()).to_pylist()
        weight = {int(v["values"]): int(v["counts"]) for v in used}
    for pos, kinds in found_at:
        for kind in kinds:
            counts[kind] += weight.get(pos, 0) if indices is not None else 1
    return pc.replace_with_mask(values, hits, pa.array(changed, values.type))


def _stream_number(tid: str) -> int | None:
    try:
        return int(tid[len("stream "):])
    except ValueError:
        return None


def _stream(stream: pa.Array, tid: pa.Array) -> pa.Array:
    """``stream``, filled from a 2020/2021 ``tid`` such as ``"stream 7"`` where args lack it."""
    from_tid = pc.starts_with(tid, "stream ")
    mask = pc.and_kleene(pc.is_null(stream), pc.fill_null(from_tid, False))
    if not pc.any(mask).as_py():
        return stream
    values = stream.to_pylist()
    for i, (use, t) in enumerate(zip(mask.to_pylist(), tid.to_pylist(), strict=True)):
        if use:
            values[i] = _stream_number(t)
    return pa.array(values, pa.int64())


def finalize(raw: pa.Table, trace_id: int, piece_number: int, n_events: int,
             n_missing: int) -> tuple[pa.Table, PieceStats]:
    """Rows of ``events`` for one decoded piece (:data:`chrome.EVENT_SCHEMA`) and its stats."""
    n = raw.num_rows
    base = piece_number << PIECE_ID_BITS
    cols = {c: raw.column(c).combine_chunks() for c in raw.column_names}
    cat = _normalise_categories(cols["cat"])
    redactions: Counter[str] = Counter()
    name, mangled = _demangle_names(cols["name"], redactions)
    args = _redact_column(cols["args"], "args", redact_json_text, redactions)
    table = pa.Table.from_arrays(
        [
            pa.array([trace_id] * n, pa.int32()) if n else pa.array([], pa.int32()),
            pa.array(range(base, base + n), pa.int64()),
            cat,
            name,
            cols["pid"],
            cols["tid"],
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
    is_kernel = pc.fill_null(pc.equal(cat, "kernel"), False)
    devices = pc.filter(cols["device"], is_kernel)
    counts = pc.value_counts(devices.drop_null()) if len(devices) else []
    stats = PieceStats(
        rows=n,
        n_events=n_events,
        n_missing_time=n_missing,
        n_kernels=int(pc.sum(is_kernel).as_py() or 0),
        kernel_devices=Counter({int(c["values"]): int(c["counts"]) for c in counts.to_pylist()})
        if len(devices) else Counter(),
        mangled=mangled,
        redactions=redactions,
    )
    return table, stats


def empty_events() -> pa.Table:
    """A zero-row table with the ``events`` columns."""
    return EVENTS_SCHEMA.empty_table()
