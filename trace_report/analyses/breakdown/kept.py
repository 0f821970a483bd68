"""The step breakdown's rows per trace, kept beside a database by the ingest (traces of
:data:`~trace_report.cli.ingest.KEEP_AT_INGEST_MIN_EVENTS` events or more) or by the first query that computes them
(:mod:`trace_report.store.derived`: ``<db>.events/derived/breakdown-t<id>-<pieces>-<version>.parquet``).

One kept file per trace: the rows of :func:`~trace_report.analyses.breakdown.region_table` for that
trace (columns :data:`TABLE_COLUMNS`: µs and kernel counts per (window, region)) with its facts
(kernels and their summed ``dur_us`` per attribution basis, whether the trace has no GPU activity
or no ProfilerStep, its forward spans) as JSON in the Parquet schema's metadata. The rows are read
back exactly (float64 in, float64 out), so a breakdown from kept rows equals the computed one
(``tests/analyses/breakdown/test_breakdown_kept.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from trace_report.store.derived import derived_store

RegionPart = tuple[pd.DataFrame, dict]
"""One trace's :func:`~trace_report.analyses.breakdown.region_table` rows and facts."""

DERIVED_KIND = "breakdown"
"""The name of the breakdown's per-trace tables among a database's derived tables."""
TABLE_COLUMNS = ["trace_id", "window_id", "step", "region", "wall_us", "idle_us", "cpu_us", "kernels", "gpu_us"]
_FACTS_KEY = b"trace_report.breakdown_facts"


def kept_region_parts(con: duckdb.DuckDBPyConnection, ids: list[int],
                      compute: Callable[[list[int]], dict[int, RegionPart]], version: str | None
                      ) -> dict[int, RegionPart]:
    """The rows and facts of each trace of ``ids``: those kept beside the database behind ``con``
    for this code ``version``, the others from ``compute(missing ids)`` (in this process or in Ray
    tasks), then kept. ``version`` None: nothing is read or kept (everything computed)."""
    store = derived_store(con) if version else None
    if store is None or not version:
        return compute(ids)
    parts: dict[int, RegionPart] = {}
    for t in ids:
        kept = store.load(DERIVED_KIND, t, version)
        if kept is not None and (part := part_from_arrow(kept, t)) is not None:
            parts[t] = part
    missing = [t for t in ids if t not in parts]
    if missing:
        computed = compute(missing)
        for t in missing:
            parts[t] = computed[t]
            store.save(DERIVED_KIND, t, version, part_to_arrow(*computed[t]))
    return parts


def bases_frame(names: list, kernels: list, dur_us: list) -> pd.DataFrame:
    """The facts' ``bases``: ``kernels`` (int64) and ``dur_us`` (float64) indexed by basis."""
    return pd.DataFrame({"kernels": np.asarray(kernels, dtype=np.int64), "dur_us": np.asarray(dur_us, dtype=float)},
                        index=pd.Index(names, name="basis", dtype=object))


def empty_part(trace_id: int) -> RegionPart:
    """The part of a trace without events: no window, no GPU activity, no kernels."""
    table = pd.DataFrame({c: pd.Series(dtype=np.int64 if c in _INTEGERS else object if c == "region" else float)
                          for c in TABLE_COLUMNS})
    return table, {"bases": bases_frame([], [], []), "no_gpu": [trace_id], "no_steps": [], "fwd_spans": 0,
                   "overlaps": [0, 0]}


def part_to_arrow(table: pd.DataFrame, facts: dict) -> pa.Table:
    """One trace's rows with its facts as JSON in the schema's metadata."""
    bases = {str(b): [int(r["kernels"]), float(r["dur_us"])] for b, r in facts["bases"].iterrows()}
    meta = {"bases": bases, "no_gpu": bool(facts["no_gpu"]), "no_steps": bool(facts["no_steps"]),
            "fwd_spans": int(facts["fwd_spans"]), "overlaps": [int(n) for n in facts["overlaps"]]}
    out = pa.Table.from_pandas(table[TABLE_COLUMNS], preserve_index=False)
    return out.replace_schema_metadata({_FACTS_KEY: json.dumps(meta).encode()})


def part_from_arrow(kept: pa.Table, trace_id: int) -> RegionPart | None:
    """The rows and facts :func:`part_to_arrow` kept for ``trace_id``; None for a table that is
    not one (another layout, or another trace's rows)."""
    raw = (kept.schema.metadata or {}).get(_FACTS_KEY)
    if raw is None or kept.column_names != TABLE_COLUMNS or not _types_ok(kept.schema):
        return None
    try:
        table = kept.to_pandas()
        if len(table) and not (table["trace_id"] == trace_id).all():
            return None
        meta = json.loads(raw)
        bases = bases_frame(list(meta["bases"]), [k for k, _ in meta["bases"].values()],
                            [us for _, us in meta["bases"].values()])
        facts = {"bases": bases, "no_gpu": [trace_id] if meta["no_gpu"] else [],
                 "no_steps": [trace_id] if meta["no_steps"] else [], "fwd_spans": int(meta["fwd_spans"]),
                 "overlaps": [int(n) for n in meta["overlaps"]]}
    except (ValueError, KeyError, TypeError, AttributeError, pa.ArrowException):
        return None
    return table, facts


_INTEGERS = ("trace_id", "window_id", "kernels")


def _types_ok(schema: pa.Schema) -> bool:
    """Integer ids and counts, floating-point times and step, text region: what part_to_arrow writes."""
    for f in schema:
        if f.name in _INTEGERS:
            ok = pa.types.is_integer(f.type)
        elif f.name == "region":
            ok = pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        else:
            ok = pa.types.is_floating(f.type)
        if not ok:
            return False
    return True
