"""The step breakdown's rows per trace as one Arrow table, the form in which they are kept beside
a database (:class:`~trace_report.store.cache.PerTrace`, kind ``breakdown``).

The rows of :func:`~trace_report.analyses.common.breakdown_regions.region_table` for each trace (columns
:data:`TABLE_COLUMNS`: µs and kernel counts per (window, region)), then one row per trace holding
its facts (kernels and their summed ``dur_us`` per attribution basis, whether the trace has no GPU
activity or no ProfilerStep, its forward spans) as JSON in the ``facts`` column, every other column
NULL, so that a trace without a window is kept too. The rows are read back exactly (float64 in,
float64 out), so a breakdown from kept rows equals the computed one
(``tests/analyses/breakdown/test_breakdown_kept.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

RegionPart = tuple[pd.DataFrame, dict]
"""One trace's :func:`~trace_report.analyses.common.breakdown_regions.region_table` rows and facts."""

TABLE_COLUMNS = ["trace_id", "window_id", "step", "region", "wall_us", "idle_us", "cpu_us", "kernels", "gpu_us"]
_INTEGERS = ("trace_id", "window_id", "kernels")
SCHEMA = pa.schema([(c, pa.int64() if c in _INTEGERS else pa.string() if c == "region" else pa.float64())
                    for c in TABLE_COLUMNS] + [("facts", pa.string())])
"""The kept table's columns: :data:`TABLE_COLUMNS` then ``facts`` (JSON, on each trace's facts row)."""


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


def parts_to_arrow(parts: dict[int, RegionPart]) -> pa.Table:
    """The rows of every trace of ``parts``, then one facts row per trace (module docstring)."""
    frames = [table[TABLE_COLUMNS] for table, _ in parts.values() if len(table)]
    tables = [pa.Table.from_pandas(pd.concat(frames, ignore_index=True).assign(facts=None), schema=SCHEMA,
                                   preserve_index=False)] if frames else []  # one conversion, not one per trace
    facts = pa.table({"trace_id": pa.array(list(parts), pa.int64()),
                      "facts": [_facts_json(f) for _, f in parts.values()]})
    tables.append(pa.table([facts["trace_id"] if c == "trace_id" else facts["facts"] if c == "facts"
                            else pa.nulls(len(parts), SCHEMA.field(c).type) for c in SCHEMA.names], schema=SCHEMA))
    return pa.concat_tables(tables)


def parts_from_arrow(kept: pa.Table, ids: list[int]) -> dict[int, RegionPart]:
    """The rows and facts of each of ``ids`` in a table :func:`parts_to_arrow` made; a trace
    without a facts row gets :func:`empty_part`."""
    is_facts = pc.is_valid(kept["facts"])
    rows = kept.filter(pc.invert(is_facts)).select(TABLE_COLUMNS).cast(SCHEMA.remove(len(TABLE_COLUMNS)))
    frame = rows.to_pandas()
    facts = kept.filter(is_facts)
    meta = dict(zip(facts["trace_id"].to_pylist(), facts["facts"].to_pylist(), strict=True))
    by_trace = dict(tuple(frame.groupby("trace_id", sort=False))) if len(frame) else {}
    out: dict[int, RegionPart] = {}
    for t in ids:
        if t not in meta:
            out[t] = empty_part(t)
            continue
        table = by_trace.get(t, empty_part(t)[0]).reset_index(drop=True)
        out[t] = table, _facts_from_json(meta[t], t)
    return out


def _facts_json(facts: dict) -> str:
    bases = {str(b): [int(r["kernels"]), float(r["dur_us"])] for b, r in facts["bases"].iterrows()}
    return json.dumps({"bases": bases, "no_gpu": bool(facts["no_gpu"]), "no_steps": bool(facts["no_steps"]),
                       "fwd_spans": int(facts["fwd_spans"]), "overlaps": [int(n) for n in facts["overlaps"]]})


def _facts_from_json(raw: str, trace_id: int) -> dict:
    meta = json.loads(raw)
    bases = bases_frame(list(meta["bases"]), [k for k, _ in meta["bases"].values()],
                        [us for _, us in meta["bases"].values()])
    return {"bases": bases, "no_gpu": [trace_id] if meta["no_gpu"] else [],
            "no_steps": [trace_id] if meta["no_steps"] else [], "fwd_spans": int(meta["fwd_spans"]),
            "overlaps": [int(n) for n in meta["overlaps"]]}
