"""Estimate FLOPs and minimum DRAM bytes of GEMM and convolution operators from the shapes a
Chrome trace records with ``record_shapes=True`` (``Input Dims``, ``Input type``,
``Concrete Inputs`` in ``events.args`` of ``cpu_op`` events), and the GPU kernel time they
launched. Every row is an *estimate* (``source = 'estimate'``).

Whether an operator ran on tensor cores (its ``precision``: ``*_tensor`` or not) is the class
``tensor_core`` of the kernel-class rules (``store/sql/views_kernel_classes.sql``, macro
``kernel_class_matches``) for any kernel it launched: the same fact ``flags`` and ``advise`` read,
so the three agree on every kernel name.

Formulas (one multiply-add = 2 FLOP; bias and epilogue work ignored):

* ``mm`` [M,K]x[K,N], ``addmm`` (bias, [M,K], [K,N]): ``2*M*N*K``
* ``bmm``/``baddbmm`` [B,M,K]x[B,K,N]: ``2*B*M*N*K``; ``matmul``: broadcast batch x ``2*M*N*K``
* ``linear`` (x [..., K], W [N, K]): ``2 * prod(x[:-1]) * N * K``
* convolution (x [N, C, *S], W [Co, C/g, *k]): ``2 * N * Co * prod(S_out) * (C/g) * prod(k)``
  with ``S_out = floor((S + 2p - d(k-1) - 1)/s) + 1`` (PyTorch ``Conv2d`` docs); transposed:
  ``2 * N * C * prod(S) * (Co/g) * prod(k)``
* ``convolution_backward``: the forward count once for grad_input and once for grad_weight
  (per ``output_mask``)

Minimum bytes = every input and output tensor read or written once (element sizes from
``Input type``). Only the outermost such operator of a nest is counted (``aten::linear``, not
also its ``aten::addmm``). GPU time = the kernels whose launch (runtime call, joined by
``correlation``) lies inside the operator's interval on its thread, else the kernels carrying
the operator's ``External id``.

With a region (``forward``, ...), only the operators whose CPU interval lies inside a marker or
span of that region of the ``regions`` view (``store/sql/views_regions.sql``) are kept, each
with the ProfilerStep (``step``, ``window_id``) it belongs to.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from trace_report.errors import InputError
from trace_report.store.cache import PerTrace, traces_of_rank
from trace_report.store.kept_views import materialized

GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}
CONV_ARGS: dict[str, dict[str, int]] = {
    # argument positions in each operator's schema (native_functions.yaml)
    "aten::conv1d": {"stride": 3, "padding": 4, "dilation": 5, "groups": 6},
    "aten::conv2d": {"stride": 3, "padding": 4, "dilation": 5, "groups": 6},
    "aten::conv3d": {"stride": 3, "padding": 4, "dilation": 5, "groups": 6},
    "aten::convolution": {"stride": 3, "padding": 4, "dilation": 5, "transposed": 6, "output_padding": 7,
                          "groups": 8},
    "aten::_convolution": {"stride": 3, "padding": 4, "dilation": 5, "transposed": 6, "output_padding": 7,
                           "groups": 8},
    "aten::cudnn_convolution": {"padding": 2, "stride": 3, "dilation": 4, "groups": 5},
    "aten::miopen_convolution": {"padding": 3, "stride": 4, "dilation": 5, "groups": 6},
    "aten::mkldnn_convolution": {"padding": 3, "stride": 4, "dilation": 5, "groups": 6},
    "aten::convolution_backward": {"stride": 4, "padding": 5, "dilation": 6, "transposed": 7,
                                   "output_padding": 8, "groups": 9, "output_mask": 10},
    "aten::cudnn_convolution_backward": {"padding": 3, "stride": 4, "dilation": 5, "groups": 6,
                                         "output_mask": 10},
}
BACKWARD = {"aten::convolution_backward", "aten::cudnn_convolution_backward"}
ESTIMATED_OPS = GEMM_OPS | set(CONV_ARGS)
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8,
                 "int": 4, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
                 "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::complex<float>": 8}
REGIONS = ("forward", "loss", "backward", "optimizer_step")
ESTIMATE_COLUMNS = ["trace_id", "event_id", "op", "input_dims", "dtype", "precision", "flop", "bytes",
                    "time_s", "n_kernels", "ai_flop_per_byte", "achieved_flop_per_s", "source", "note"]


@dataclass(frozen=True)
class OpCount:
    """FLOP and minimum bytes of one operator call (None when the shapes do not allow it)."""

    flop: float | None
    bytes: float | None
    note: str | None = None


def _numel(dims: list[int]) -> int:
    return math.prod(int(d) for d in dims) if dims else 1


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    return [max(x, y) for x, y in zip(a, b, strict=True)]


def gemm_count(op: str, dims: list[list[int]], elem: int) -> OpCount:
    """FLOP and min bytes of ``mm``/``addmm``/``bmm``/``baddbmm``/``matmul``/``linear``."""
    if op == "aten::linear":
        x, w = dims[0], dims[1]
        m, k, n = _numel(x[:-1]), x[-1], w[0]
        extra = _numel(dims[2]) if len(dims) > 2 and dims[2] else 0
        return OpCount(2.0 * m * n * k, float(elem * (_numel(x) + _numel(w) + extra + m * n)))
    if op in ("aten::addmm", "aten::baddbmm"):
        bias, a, b = dims[0], dims[1], dims[2]
    else:
        bias, a, b = [], dims[0], dims[1]
    a2 = a if len(a) >= 2 else [1, *a]
    b2 = b if len(b) >= 2 else [*b, 1]
    batch = _numel(_broadcast(a2[:-2], b2[:-2]))
    m, k, n = a2[-2], a2[-1], b2[-1]
    out = batch * m * n
    bias_n = _numel(bias) if bias else 0
    return OpCount(2.0 * batch * m * n * k, float(elem * (_numel(a) + _numel(b) + bias_n + out)))


def _ints(text: str | None, n: int, default: int) -> list[int] | None:
    if text is None or text == "":
        return None
    try:
        value = json.loads(text.replace("True", "true").replace("False", "false"))
    except ValueError:
        return None
    if isinstance(value, bool):
        return [int(value)] * n
    if isinstance(value, int):
        return [value] * n
    if isinstance(value, list) and all(isinstance(v, (int, bool)) for v in value):
        return [int(v) for v in value] * (n if len(value) == 1 else 1) if value else [default] * n
    return None


def conv_count(op: str, dims: list[list[int]], concrete: list[str] | None, elem: int) -> OpCount:
    """FLOP and min bytes of a forward or backward convolution (formulas in the module doc)."""
    pos = CONV_ARGS[op]
    backward = op in BACKWARD
    if op == "aten::cudnn_convolution_backward":
        x, gy, w = dims[0], dims[1], dims[2]
    elif backward:
        gy, x, w = dims[0], dims[1], dims[2]
    else:
        x, w, gy = dims[0], dims[1], None
    if len(x) < 3 or len(w) != len(x):
        return OpCount(None, None, "unexpected input shapes")
    nsp = len(x) - 2

    def arg(name: str, default: int) -> list[int] | None:
        i = pos.get(name)
        if i is None:
            return [default] * nsp
        if concrete is None or i >= len(concrete):
            return None
        return _ints(concrete[i], nsp, default)

    groups = (arg("groups", 1) or [1])[0]
    transposed = bool((arg("transposed", 0) or [0])[0])
    if gy is None:
        stride, pad, dil = arg("stride", 1), _padding(op, concrete, pos, nsp, x, w), arg("dilation", 1)
        if stride is None or pad is None or dil is None:
            return OpCount(None, None, "stride/padding not recorded (no 'Concrete Inputs')")
        if transposed:
            outp = arg("output_padding", 0) or [0] * nsp
            s_out = [(s - 1) * st - 2 * p + d * (k - 1) + op_ + 1
                     for s, st, p, d, k, op_ in zip(x[2:], stride, pad, dil, w[2:], outp, strict=True)]
            gy = [x[0], w[1] * groups, *s_out]
        else:
            s_out = [(s + 2 * p - d * (k - 1) - 1) // st + 1
                     for s, st, p, d, k in zip(x[2:], stride, pad, dil, w[2:], strict=True)]
            gy = [x[0], w[0], *s_out]
    if transposed:
        macs = x[0] * x[1] * _numel(x[2:]) * (gy[1] // groups) * _numel(w[2:])
    else:
        macs = gy[0] * gy[1] * _numel(gy[2:]) * (x[1] // groups) * _numel(w[2:])
    tensors = _numel(x) + _numel(w) + _numel(gy)
    if not backward:
        return OpCount(2.0 * macs, float(elem * tensors))
    mask = arg("output_mask", 1) or [1, 1, 0]
    passes = int(bool(mask[0])) + int(bool(mask[1]))
    written = (_numel(x) if mask[0] else 0) + (_numel(w) if mask[1] else 0)
    return OpCount(2.0 * macs * passes, float(elem * (tensors + written)))


def _padding(op: str, concrete: list[str] | None, pos: dict[str, int], nsp: int,
             x: list[int], w: list[int]) -> list[int] | None:
    i = pos["padding"]
    if concrete is None or i >= len(concrete):
        return None
    text = concrete[i].strip().strip("'\"")
    if text == "valid":
        return [0] * nsp
    if text == "same":  # stride 1 by definition: output size = input size
        return [(k - 1) // 2 for k in w[2:]]
    return _ints(concrete[i], nsp, 0)


_COUNTED_ARGS = ("Input Dims", "Input dims", "Input type", "Concrete Inputs")
"""The args :func:`count_op` reads."""
_ARG_COLUMNS = [f"a{i}" for i in range(len(_COUNTED_ARGS))]
"""Their JSON text as :func:`estimate_ops` reads them from ``events.args`` (NULL: absent, or
args that are not JSON)."""


def count_op(op: str, args: dict[str, Any]) -> tuple[OpCount, str | None]:
    """(FLOP/bytes, dtype) of one ``cpu_op`` from its args; OpCount(None...) with a note when the
    shapes are missing or unusable."""
    dims = args.get("Input Dims") or args.get("Input dims")
    types = args.get("Input type") or []
    dtype = next((t for t in types if t in ELEMENT_BYTES), None)
    if not isinstance(dims, list) or len(dims) < 2 or not all(isinstance(d, list) for d in dims):
        return OpCount(None, None, "no 'Input Dims' (record_shapes=False?)"), dtype
    elem = ELEMENT_BYTES.get(dtype or "", 4)
    try:
        if op in GEMM_OPS:
            return gemm_count(op, dims, elem), dtype
        return conv_count(op, dims, args.get("Concrete Inputs"), elem), dtype
    except (IndexError, ValueError, TypeError, ZeroDivisionError):
        return OpCount(None, None, "unexpected input shapes"), dtype


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
kc AS (SELECT k.*, try_cast(t.compute_capability AS DOUBLE) AS cc
       FROM k LEFT JOIN traces t ON t.trace_id = k.trace_id),
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
    """One row per outermost GEMM/convolution operator: :data:`ESTIMATE_COLUMNS`.

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


def _estimate(con: duckdb.DuckDBPyConnection, region: str | None, ids: list[int] | None) -> pd.DataFrame:
    """:func:`estimate_ops` computed, of the traces ``ids`` (None: every trace in view)."""
    # view estimate_op_args (store/sql/views_ops.sql): the operators of ESTIMATED_OPS with their
    # _COUNTED_ARGS; kept beside the database from the second command on (its JSON is most of the cost)
    with materialized(con, ("estimate_op_args",)):
        ops = con.execute("SELECT * FROM estimate_op_args WHERE $ids IS NULL OR list_contains($ids, trace_id) "
                          "ORDER BY trace_id, event_id", {"ids": ids}).df()
    extra = ["window_id", "step", "region"] if region else []
    if ops.empty:
        return pd.DataFrame(columns=ESTIMATE_COLUMNS + extra)
    ops = _outermost(ops).reset_index(drop=True)
    if region:
        con.register("_estimate_ops", ops.drop(columns=_ARG_COLUMNS))
        try:
            inside = con.execute(_IN_REGION, {"region": region}).df()
        finally:
            con.unregister("_estimate_ops")
        ops = ops.merge(inside, on=["trace_id", "event_id"], how="inner").assign(region=region)
        if ops.empty:
            return pd.DataFrame(columns=ESTIMATE_COLUMNS + extra)
    con.register("_estimate_ops", ops.drop(columns=_ARG_COLUMNS))
    try:
        times = con.execute(_KERNEL_TIME).df()
    finally:
        con.unregister("_estimate_ops")
    ops = ops.merge(times, on=["trace_id", "event_id"], how="left")
    return pd.DataFrame(_estimate_columns(ops, extra), columns=ESTIMATE_COLUMNS + extra)


def _estimate_columns(ops: pd.DataFrame, extra: list[str]) -> dict[str, list]:
    """The estimate's columns, one value per operator of ``ops`` (its counted args as JSON text
    in ``a0``..``a3``, :data:`_COUNTED_ARGS`; ``kernel_us``, ``n_kernels``, ``tensor_core`` of
    :data:`_KERNEL_TIME`). :func:`count_op` reads those args alone, so each (operator, args)
    is counted once: a training loop repeats each GEMM/convolution every step."""
    counted: dict[tuple, tuple[OpCount, str | None, str]] = {}
    cols: dict[str, list] = {c: [] for c in ESTIMATE_COLUMNS + extra}
    texts = zip(*(ops[c].tolist() for c in _ARG_COLUMNS), strict=True)
    kernel_us, n_kernels, tensor = (ops[c].tolist() for c in ("kernel_us", "n_kernels", "tensor_core"))
    for i, (name, key) in enumerate(zip(ops["name"].tolist(), texts, strict=True)):
        got = counted.get((name, key))
        if got is None:
            args = {k: json.loads(t) for k, t in zip(_COUNTED_ARGS, key, strict=True) if isinstance(t, str)}
            got = counted[(name, key)] = (*count_op(name, args), json.dumps(args.get("Input Dims")))
        count, dtype, dims = got
        us = kernel_us[i]
        time_s = us * 1e-6 if us is not None and not math.isnan(us) else None
        tc = tensor[i]
        cols["op"].append(name)
        cols["input_dims"].append(dims)
        cols["dtype"].append(dtype)
        cols["precision"].append(precision_of(dtype, bool(tc) if pd.notna(tc) else None))
        cols["flop"].append(count.flop)
        cols["bytes"].append(count.bytes)
        cols["time_s"].append(time_s)
        cols["n_kernels"].append(int(n_kernels[i]) if pd.notna(n_kernels[i]) else 0)
        cols["ai_flop_per_byte"].append(count.flop / count.bytes if count.flop and count.bytes else None)
        cols["achieved_flop_per_s"].append(count.flop / time_s if count.flop is not None and time_s else None)
        cols["note"].append(count.note)
    n = len(ops)
    cols.update(trace_id=ops["trace_id"].tolist(), event_id=ops["event_id"].tolist(), source=["estimate"] * n,
                **{c: ops[c].tolist() for c in extra})
    return cols


def _estimate_table(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    return pa.Table.from_pandas(_estimate(con, None, ids), preserve_index=False)


KEPT = PerTrace("roofline_estimate", _estimate_table, __name__, reads=("estimate_op_args",))
"""The estimate rows without a region, kept per trace beside a database
(:class:`~trace_report.store.cache.PerTrace`)."""
