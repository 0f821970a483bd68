"""Estimate FLOPs and minimum DRAM bytes of GEMM, convolution and attention operators from the
shapes a Chrome trace records with ``record_shapes=True``, and the GPU kernel time they launched.
Every row is an *estimate* (``source = 'estimate'``).

FLOP and bytes are the operator cost model's (view ``op_costs``, ``store/sql/views_op_cost.sql``:
torch.utils.flop_counter's formulas, and every tensor read or written once), the one ``ops`` and
``modules`` read too.

Whether an operator ran on tensor cores (its ``precision``: ``*_tensor`` or not) is the class
``tensor_core`` of the kernel-class rules (``store/sql/views_kernel_classes.sql``, macro
``kernel_class_matches``) for any kernel it launched: the same fact ``flags`` and ``advise`` read,
so the three agree on every kernel name.

Only the outermost operator of the model in a nest is counted (``aten::linear``, not also its
``aten::addmm``). GPU time = the kernels whose launch (runtime call, joined by ``correlation``)
lies inside the operator's interval on its thread, else the kernels carrying the operator's
``External id``.

With a region (``forward``, ...), only the operators whose CPU interval lies inside a marker or
span of that region of the ``regions`` view (``store/sql/views_regions.sql``) are kept, each
with the ProfilerStep (``step``, ``window_id``) it belongs to.
"""

from __future__ import annotations

import json
import math

import duckdb
import pandas as pd
import pyarrow as pa

from trace_report.errors import InputError
from trace_report.store.cache import PerTrace, traces_of_rank
from trace_report.store.kept_views import materialized

REGIONS = ("forward", "loss", "backward", "optimizer_step")
ESTIMATE_COLUMNS = ["trace_id", "event_id", "op", "input_dims", "dtype", "precision", "flop", "bytes",
                    "time_s", "n_kernels", "ai_flop_per_byte", "achieved_flop_per_s", "source", "note"]


# A kernel name's tensor-core fact: class tensor_core of the kernel-class rules (the cuda_core
# veto included) on a GPU of compute capability {cc}. The only definition the estimate uses.
_TENSOR_CORE_SQL = ("coalesce(list_contains(list_transform(kernel_class_matches({name}, {cc}), "
                    "lambda x: x.class), 'tensor_core'), false)")


def tensor_core_of(con: duckdb.DuckDBPyConnection, names: list[str],
                   compute_capability: float | None = None) -> dict[str, bool]:
    """Whether each kernel name is a tensor-core kernel, by the rule :func:`estimate_ops` applies
    to the kernels an operator launched (class ``tensor_core`` of ``kernel_class_matches``)."""
    rows = con.execute(
        f"SELECT n, {_TENSOR_CORE_SQL.format(name='n', cc='$cc')} FROM unnest($names) AS t(n)",
        {"names": list(names), "cc": compute_capability}).fetchall()
    return {n: bool(tc) for n, tc in rows}


def precision_of(dtype: str | None, tensor_core: bool | None) -> str | None:
    """Roofline precision class from the operator dtype and whether any kernel it launched is a
    tensor-core kernel (:func:`tensor_core_of`; None = no kernel)."""
    tensor = bool(tensor_core)
    if dtype == "double":
        return "fp64_tensor" if tensor else "fp64"
    if dtype in ("c10::Half", "c10::BFloat16"):
        return "fp16_tensor" if tensor else "fp16"
    if dtype == "float":
        return "tf32_tensor" if tensor else "fp32"
    return None


def _outermost(ops: pd.DataFrame) -> pd.DataFrame:
    """Drop candidate operators nested inside another candidate on the same thread."""
    keep = []
    for _, g in ops.sort_values(["ts_us", "dur_us"], ascending=[True, False]).groupby(
            ["trace_id", "pid", "tid"], sort=False):
        open_end = -math.inf
        for idx, ts, end in zip(g.index, g["ts_us"], g["ts_us"] + g["dur_us"], strict=True):
            if ts >= open_end:
                keep.append(idx)
                open_end = end
            # else: nested inside the kept operator that is still open
    return ops.loc[sorted(keep)]


_KERNEL_TIME = """
WITH o AS (SELECT * FROM _estimate_ops),
-- the operators around each launch call: _outermost leaves no two operators of a thread
-- overlapping, so they are the zero-length ones at the call's time and, of the others, the latest
-- starting at or before it and the earliest ending at or after it (two when one ends where the next
-- starts): ASOF joins, not a range join of every operator to every call on its thread
-- (the kernels read from gpu_ops: the same rows, kept as a table by the commands that run several analyses)
positive AS (SELECT *, ts_us + dur_us AS end_us FROM o WHERE dur_us > 0),
around AS (
    SELECT o.trace_id, o.event_id, r.correlation
    FROM runtime_calls r ASOF JOIN positive o
      ON o.trace_id = r.trace_id AND o.pid = r.pid AND o.tid = r.tid AND r.ts_us >= o.ts_us
    WHERE r.ts_us <= o.end_us
    UNION
    SELECT o.trace_id, o.event_id, r.correlation
    FROM runtime_calls r ASOF JOIN positive o
      ON o.trace_id = r.trace_id AND o.pid = r.pid AND o.tid = r.tid AND r.ts_us <= o.end_us
    WHERE r.ts_us >= o.ts_us
    UNION
    SELECT o.trace_id, o.event_id, r.correlation
    FROM o JOIN runtime_calls r ON r.trace_id = o.trace_id AND r.pid = o.pid AND r.tid = o.tid AND r.ts_us = o.ts_us
    WHERE o.dur_us = 0
),
by_launch AS (
    SELECT a.event_id, a.trace_id, k.event_id AS kid, k.dur_us, k.name
    FROM around a JOIN gpu_ops k ON k.trace_id = a.trace_id AND k.correlation = a.correlation AND k.cat = 'kernel'
),
by_ext AS (
    SELECT o.event_id, o.trace_id, k.event_id AS kid, k.dur_us, k.name
    FROM o JOIN gpu_ops k ON k.trace_id = o.trace_id AND k.external_id = o.external_id AND k.cat = 'kernel'
    WHERE NOT EXISTS (SELECT 1 FROM by_launch b WHERE b.trace_id = o.trace_id AND b.event_id = o.event_id)
),
k AS (SELECT DISTINCT * FROM (SELECT * FROM by_launch UNION ALL SELECT * FROM by_ext)),
kc AS (SELECT k.*, t.cc FROM k LEFT JOIN device_arch t ON t.trace_id = k.trace_id),
tc AS (SELECT name, cc, {tensor_core} AS tensor_core FROM (SELECT DISTINCT name, cc FROM kc))
SELECT kc.trace_id, kc.event_id, sum(kc.dur_us) AS kernel_us, count(*) AS n_kernels,
       bool_or(tc.tensor_core) AS tensor_core
FROM kc JOIN tc ON tc.name = kc.name AND tc.cc IS NOT DISTINCT FROM kc.cc
GROUP BY kc.trace_id, kc.event_id
""".format(tensor_core=_TENSOR_CORE_SQL.format(name="name", cc="cc"))


# The region interval (marker or span of the regions view) each operator lies in, on its
# process and thread when the marker names them; the innermost one when markers nest.
_IN_REGION = """
SELECT o.trace_id, o.event_id, r.window_id, r.step
FROM _estimate_ops o JOIN regions r
  ON r.trace_id = o.trace_id AND r.region = $region
 AND o.ts_us >= r.ts_us AND o.ts_us + o.dur_us <= r.end_us
 AND (r.pid IS NULL OR r.pid = o.pid) AND (r.tid IS NULL OR r.tid = o.tid)
QUALIFY row_number() OVER (PARTITION BY o.trace_id, o.event_id ORDER BY r.ts_us DESC) = 1
"""


def estimate_ops(con: duckdb.DuckDBPyConnection, region: str | None = None) -> pd.DataFrame:
    """One row per outermost GEMM/convolution/attention operator: :data:`ESTIMATE_COLUMNS`.

    ``flop`` (FLOP), ``bytes`` (minimum DRAM bytes), ``time_s`` (GPU kernel seconds, NULL when
    the operator launched no kernel, e.g. CPU-only traces), ``precision`` (roofline class),
    ``note`` (why a row has no FLOP count). With ``region`` (one of :data:`REGIONS`), only the
    operators inside that region of a step, plus ``window_id`` (the ProfilerStep's event id,
    -1 for a trace without steps), ``step`` and ``region``.

    Without ``region``, each trace's rows are kept beside the database
    (:data:`KEPT`): a
    trace's rows come from its own operators and kernels alone, and computing them is a visible
    part of ``roofline`` and of the report on a large trace.
    """
    if region is not None and region not in REGIONS:
        raise InputError(f"unknown region {region!r}: choose one of {', '.join(REGIONS)}")
    if region is None:
        return KEPT.rows(con, traces_of_rank(con, None)).to_pandas()
    return _estimate(con, region, None)


_OPERATORS = """
SELECT trace_id, event_id, name, pid, tid, ts_us, dur_us, external_id, input_dims_json, dtype, flop, bytes, note
FROM op_costs
WHERE dur_us IS NOT NULL AND ($ids IS NULL OR list_contains($ids, trace_id))
ORDER BY trace_id, event_id
"""
"""The calls of the operators of the cost model with a duration, and their counts."""


def _estimate(con: duckdb.DuckDBPyConnection, region: str | None, ids: list[int] | None) -> pd.DataFrame:
    """:func:`estimate_ops` computed, of the traces ``ids`` (None: every trace in view)."""
    # view op_costs (store/sql/views_op_cost.sql), kept beside the database from the second command
    # on (its JSON is most of the cost)
    with materialized(con, ("op_costs",)):
        ops = con.execute(_OPERATORS, {"ids": ids}).df()
    extra = ["window_id", "step", "region"] if region else []
    if ops.empty:
        return pd.DataFrame(columns=ESTIMATE_COLUMNS + extra)
    ops = _outermost(ops).reset_index(drop=True)
    counted = ["input_dims_json", "dtype", "flop", "bytes", "note"]
    if region:
        con.register("_estimate_ops", ops.drop(columns=counted))
        try:
            inside = con.execute(_IN_REGION, {"region": region}).df()
        finally:
            con.unregister("_estimate_ops")
        ops = ops.merge(inside, on=["trace_id", "event_id"], how="inner").assign(region=region)
        if ops.empty:
            return pd.DataFrame(columns=ESTIMATE_COLUMNS + extra)
    con.register("_estimate_ops", ops.drop(columns=counted))
    try:
        times = con.execute(_KERNEL_TIME).df()
    finally:
        con.unregister("_estimate_ops")
    ops = ops.merge(times, on=["trace_id", "event_id"], how="left")
    return pd.DataFrame(_estimate_columns(ops, extra), columns=ESTIMATE_COLUMNS + extra)


def _number(value: object) -> float | None:
    """A float of a frame cell, None for NULL/NaN."""
    return None if value is None or pd.isna(value) else float(value)


def _estimate_columns(ops: pd.DataFrame, extra: list[str]) -> dict[str, list]:
    """The estimate's columns, one value per operator of ``ops`` (the columns of :data:`_OPERATORS`;
    ``kernel_us``, ``n_kernels``, ``tensor_core`` of :data:`_KERNEL_TIME`)."""
    cols: dict[str, list] = {c: [] for c in ESTIMATE_COLUMNS + extra}
    shown: dict[object, str] = {}
    kernel_us, n_kernels, tensor = (ops[c].tolist() for c in ("kernel_us", "n_kernels", "tensor_core"))
    for i, (name, dims, dtype, flop, nbytes, note) in enumerate(zip(
            *(ops[c].tolist() for c in ("name", "input_dims_json", "dtype", "flop", "bytes", "note")), strict=True)):
        if dims not in shown:  # "Input Dims" as json.dumps writes it ("null" when absent)
            shown[dims] = json.dumps(json.loads(dims) if isinstance(dims, str) else None)
        flop, nbytes = _number(flop), _number(nbytes)
        dtype = dtype if isinstance(dtype, str) else None
        us = kernel_us[i]
        time_s = us * 1e-6 if us is not None and not math.isnan(us) else None
        tc = tensor[i]
        cols["op"].append(name)
        cols["input_dims"].append(shown[dims])
        cols["dtype"].append(dtype)
        cols["precision"].append(precision_of(dtype, bool(tc) if pd.notna(tc) else None))
        cols["flop"].append(flop)
        cols["bytes"].append(nbytes)
        cols["time_s"].append(time_s)
        cols["n_kernels"].append(int(n_kernels[i]) if pd.notna(n_kernels[i]) else 0)
        cols["ai_flop_per_byte"].append(flop / nbytes if flop and nbytes else None)
        cols["achieved_flop_per_s"].append(flop / time_s if flop is not None and time_s else None)
        cols["note"].append(note if isinstance(note, str) else None)
    n = len(ops)
    cols.update(trace_id=ops["trace_id"].tolist(), event_id=ops["event_id"].tolist(), source=["estimate"] * n,
                **{c: ops[c].tolist() for c in extra})
    return cols


def _estimate_table(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    return pa.Table.from_pandas(_estimate(con, None, ids), preserve_index=False)


KEPT = PerTrace("roofline_estimate", _estimate_table, __name__, reads=("op_costs",))
"""The estimate rows without a region, kept per trace beside a database
(:class:`~trace_report.store.cache.PerTrace`)."""
