"""Operator view: each CPU operator with its CPU time, the GPU time it launched, FLOP and TFLOP/s.

As torch-tb-profiler's Operator view and TraceLens' ops summary. One row per operator name
(per name and input shapes with ``by_shape``), ``aten::`` operators unless ``all_ops``:

- ``count``; ``self_cpu_us`` (µs of the operator minus its directly nested operators and
  annotations on the same thread, as ``self_cpu_time_total``); ``cpu_us`` (its whole duration);
- ``gpu_self_us``: µs of GPU operations (kernels, memcpy, memset) whose launch call (same
  ``correlation``) carries this operator's External id; ``gpu_us``: the same for the operator
  and every operator nested in it (what it caused on the GPU: ``aten::linear`` shows its
  ``aten::addmm``'s GEMM);
- ``flop``: FLOP of the operator cost model (view ``op_costs``, ``store/sql/views_op_cost.sql``:
  torch.utils.flop_counter's formulas from "Input Dims" and "Concrete Inputs"): mm, addmm, bmm,
  baddbmm, matmul, linear, the convolutions and convolution_backward, scaled-dot-product attention
  and its backward; NULL where the trace has no shapes (``record_shapes=False``) or the operator
  is not one of these; ``tflop_per_s`` = flop / gpu_us over the calls with both.

The query is ``analyses/ops/ops.sql``, over the nesting of operators on their threads that
:func:`~trace_report.analyses.ops.nesting.nesting` finds in one sorted pass (O(n log n)), kept per
trace beside a database (:mod:`~trace_report.analyses.ops.nesting_kept`). The FLOP
of nested operators describe the same work (``aten::linear`` and its ``aten::addmm``):
never add them up across rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import RANK, Command, Opt, computed
from trace_report.errors import UsageError

OPS_COLUMNS = ["name", "count", "self_cpu_us", "cpu_us", "gpu_self_us", "gpu_us", "flop", "tflop_per_s"]


@dataclass(frozen=True)
class OpsOptions:
    """``rank``: only that rank; ``by_shape``: one row per name and "Input Dims"; ``all_ops``: every
    CPU operator (``c10d::``, custom ops, autograd nodes), not only ``aten::``; ``limit``: rows."""

    rank: Annotated[int | None, RANK] = None
    by_shape: Annotated[bool, Opt("One row per operator and input shapes.")] = False
    all_ops: Annotated[bool, Opt("Every CPU operator, not only aten::.", ("--all",))] = False
    limit: Annotated[int | None, Opt("Rows.", ("--limit", "-n"), min=1)] = 30

    def __post_init__(self) -> None:
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise UsageError(f"limit {self.limit!r}: give a number of rows, 0 or more (None: all)")


COMMAND = Command(
    name="ops",
    options=OpsOptions,
    compute="compute:ops",
    title="Operators",
    help="Operators (aten::) with self CPU time, the GPU time of the kernels they launched (directly, and with "
         "nested operators), FLOP from input shapes (GEMM, convolution, attention) and TFLOP/s.",
    examples=("trace-report ops trace.json.gz --by-shape -n 20",),
)

__getattr__ = computed(__name__, ("ops",))
