"""The computation of ``ops`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

import pandas as pd

from trace_report.analyses.common.result import Result
from trace_report.analyses.ops import OPS_COLUMNS, OpsOptions
from trace_report.analyses.ops.nesting_kept import kept_nesting
from trace_report.store.kept_views import materialized
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text


def ops(db: TraceDB, options: OpsOptions | None = None) -> Result:
    """Rows as described in the module docstring (``input_dims`` after ``name`` with
    ``by_shape``), most GPU time first, then most self CPU time.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``.
    """
    opts = options or OpsOptions()
    db.check_rank(opts.rank)
    with materialized(db.con, ("op_costs",)):  # from the file kept beside the database from the 2nd run on
        frame = _operator_rows(db, opts)
    cols = OPS_COLUMNS[:1] + (["input_dims"] if opts.by_shape else []) + OPS_COLUMNS[1:]
    notes = []
    if frame.empty:
        notes.append("no CPU operators" + ("" if opts.all_ops else " named aten::") + " in the selection")
    elif not frame["counted"].any():
        notes.append("no FLOP: the trace has no input shapes of GEMM/convolution/attention operators "
                     "(profile with record_shapes=True)")
    else:
        notes.append("flop of nested operators (aten::linear, aten::addmm) count the same work: "
                     "do not add them across rows")
    if not opts.all_ops and not frame.empty:
        notes += _unlisted_gpu_time(db, opts.rank, float(frame["gpu_self_us"].fillna(0.0).sum()))
    frame = frame[cols].astype({"count": "int64"})
    if opts.limit is not None:
        frame = frame.head(opts.limit)
    return Result(frame.reset_index(drop=True), notes)


NESTING_RELATION = "_ops_nesting"
"""The name ``analyses/ops/ops.sql`` reads the nesting pass's rows under (registered for that query only,
so that the connection's views stay as trace-report made them)."""


def _operator_rows(db: TraceDB, opts: OpsOptions) -> pd.DataFrame:
    """The rows of ``analyses/ops/ops.sql`` (one per name, or name and shapes) with ``counted``."""
    rows = kept_nesting(db.con, opts.rank)
    db.con.register(NESTING_RELATION, rows)
    try:
        return db.con.execute(sql_text("ops.sql", __package__),
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
