"""Operator view: each CPU operator with its CPU time, the GPU time it launched, FLOP and TFLOP/s.

As torch-tb-profiler's Operator view and TraceLens' ops summary. One row per operator name
(per name and input shapes with ``by_shape``), ``aten::`` operators unless ``all_ops``:

- ``count``; ``self_cpu_us`` (µs of the operator minus its directly nested operators and
  annotations on the same thread, as ``self_cpu_time_total``); ``cpu_us`` (its whole duration);
- ``gpu_self_us``: µs of GPU operations (kernels, memcpy, memset) whose launch call (same
  ``correlation``) carries this operator's External id; ``gpu_us``: the same for the operator
  and every operator nested in it (what it caused on the GPU: ``aten::linear`` shows its
  ``aten::addmm``'s GEMM);
- ``flop``: FLOP by torch.utils.flop_counter's formulas from "Input Dims" (and stride, padding,
  dilation, output mask from "Concrete Inputs"): mm, addmm, bmm, baddbmm, convolution,
  convolution_backward, scaled-dot-product attention and its backward (view ``op_flops``,
  ``store/sql/views_ops.sql``); NULL where the trace has no shapes (``record_shapes=False``)
  or the operator is not one of these; ``tflop_per_s`` = flop / gpu_us over the calls with both.

The query is ``store/sql/ops.sql``, over the nesting of operators on their threads that
:func:`~trace_report.analyses.ops_nesting.nesting` finds in one sorted pass (O(n log n)), kept per
trace beside a database (:mod:`~trace_report.analyses.ops_nesting_kept`). The FLOP
of nested operators describe the same work (``aten::convolution`` and ``aten::_convolution``):
never add them up across rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from trace_report.analyses.ops_nesting_kept import kept_nesting
from trace_report.analyses.result import Result
from trace_report.errors import UsageError
from trace_report.store.kept_views import materialized
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

OPS_COLUMNS = ["name", "count", "self_cpu_us", "cpu_us", "gpu_self_us", "gpu_us", "flop", "tflop_per_s"]


@dataclass(frozen=True)
class OpsOptions:
    """``rank``: only that rank; ``by_shape``: one row per name and "Input Dims"; ``all_ops``: every
    CPU operator (``c10d::``, custom ops, autograd nodes), not only ``aten::``; ``limit``: rows."""

    rank: int | None = None
    by_shape: bool = False
    all_ops: bool = False
    limit: int | None = 30

    def __post_init__(self) -> None:
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise UsageError(f"limit {self.limit!r}: give a number of rows, 0 or more (None: all)")


def ops(db: TraceDB, options: OpsOptions | None = None) -> Result:
    """Rows as described in the module docstring (``input_dims`` after ``name`` with
    ``by_shape``), most GPU time first, then most self CPU time.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``.
    """
    opts = options or OpsOptions()
    db.check_rank(opts.rank)
    with materialized(db.con, ("op_flops",)):  # from the file kept beside the database from the 2nd run on
        frame = _operator_rows(db, opts)
    cols = OPS_COLUMNS[:1] + (["input_dims"] if opts.by_shape else []) + OPS_COLUMNS[1:]
    notes = []
    if frame.empty:
        notes.append("no CPU operators" + ("" if opts.all_ops else " named aten::") + " in the selection")
    elif not frame["counted"].any():
        notes.append("no FLOP: the trace has no input shapes of GEMM/convolution/attention operators "
                     "(profile with record_shapes=True)")
    else:
        notes.append("flop of nested operators (aten::convolution, aten::_convolution) count the same work: "
                     "do not add them across rows")
    if not opts.all_ops and not frame.empty:
        notes += _unlisted_gpu_time(db, opts.rank, float(frame["gpu_self_us"].fillna(0.0).sum()))
    frame = frame[cols].astype({"count": "int64"})
    if opts.limit is not None:
        frame = frame.head(opts.limit)
    return Result(frame.reset_index(drop=True), notes)


NESTING_RELATION = "_ops_nesting"
"""The name ``store/sql/ops.sql`` reads the nesting pass's rows under (registered for that query only,
so that the connection's views stay as trace-report made them)."""


def _operator_rows(db: TraceDB, opts: OpsOptions) -> pd.DataFrame:
    """The rows of ``store/sql/ops.sql`` (one per name, or name and shapes) with ``counted``."""
    rows = kept_nesting(db.con, opts.rank)
    db.con.register(NESTING_RELATION, rows)
    try:
        return db.con.execute(sql_text("ops.sql"),
                              {"rank": opts.rank, "all_ops": opts.all_ops, "by_shape": opts.by_shape}).df()
    finally:
        db.con.unregister(NESTING_RELATION)


UNLISTED_NOTE_PCT = 10.0
"""A note says how much GPU time the ``aten::`` rows leave out when it is more than this share."""


def _unlisted_gpu_time(db: TraceDB, rank: int | None, aten_us: float) -> list[str]:
    """A note when the ``aten::`` operators launched less than all but :data:`UNLISTED_NOTE_PCT` %
    of the GPU time (view ``gpu_time``: kernels + memcpy + memset): under ``torch.compile`` the
    kernels are launched by ``## Call CompiledFxGraph ...`` (a CUDA graph replay included), which
    is no ``aten::`` operator."""
    (total,) = db.con.execute("SELECT coalesce(sum(gpu_op_us), 0.0) FROM gpu_time WHERE $rank IS NULL OR rank = $rank",
                              {"rank": rank}).fetchone()
    if not total or 100.0 * (total - aten_us) / total <= UNLISTED_NOTE_PCT:
        return []
    pct = 100.0 * aten_us / total
    return [f"aten:: operators launched {aten_us:,.0f} of {total:,.0f} us of GPU time ({pct:.0f}%); "
            "the rest came from other operators (torch.compile's '## Call CompiledFxGraph ...', c10d::, custom "
            "ops) or from no operator: --all lists every operator"]
