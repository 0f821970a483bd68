"""Repeated kernel sequences per launching operator: fusion candidates for torch.compile.

As HTA's ``get_frequent_cuda_kernel_sequences``.

A launching operator is the outermost CPU operator around a launch call on its thread (with
``operator``: the outermost CPU event whose name contains that text, HTA's ``operator_name``). Each
call of it launched a sequence of GPU operations (kernels, memcpy, memset), in GPU start order; a
sequence is the operator's name and those names (HTA's pattern). Per sequence: ``count`` (calls),
``total_us`` (their GPU time), ``mean_us``, ``pct`` (of the GPU time in the selection), ``cpu_us``
(the calls' own duration) and ``fusible``: every operation is an elementwise or reduction kernel
(the kernel classes of ``views_kernel_classes.sql``), so one fused kernel could replace the
sequence. Sequences of ``min_length``..``max_length`` operations launched at least ``min_count``
times are shown, most GPU time first. The queries are ``analyses/sequences/sequences.sql`` (one row per
operator call; the rule, stated in full) and ``analyses/sequences/sequence_stats.sql`` (the grouping).

Source: HTA 0.6.1 ``hta/analyzers/cuda_kernel_analysis.py`` (CudaKernelAnalysis.
get_frequent_cuda_kernel_sequences; defaults in ``hta/trace_analysis.py``: min_pattern_len 3,
top_k 5). Differences, on purpose: no operator name is needed (HTA requires one); HTA keeps only
the matches at the shallowest depth of the whole rank, here the outermost match on each launch's
thread counts (HTA drops the backward pass's ``aten::`` ops when the forward has shallower ones);
a maximum length and a minimum count (HTA lists count 1 too); ordered by GPU time, not count. On
the operators HTA keeps, count, GPU time and CPU time equal HTA's (``tests/analyses/sequences/test_sequences.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import RANK, STEPS_ONLY, Command, Opt, ReportTable, computed
from trace_report.errors import UsageError

MIN_LENGTH = 2
"""Shortest sequence shown: one operation alone is nothing to fuse (HTA's min_pattern_len is 3)."""
MAX_LENGTH = 8
"""Longest sequence shown: past this an operator is a region (a whole optimizer step), not a pattern."""
MIN_COUNT = 2
"""A sequence launched once is not repeated."""

COLUMNS = ["rank", "operator", "length", "count", "total_us", "mean_us", "pct", "cpu_us", "fusible",
           "fusible_kernels", "kernels"]
FUSIBLE_CLASSES = ("elementwise", "reduction")


@dataclass(frozen=True)
class SequenceOptions:
    """``rank``: only that rank; ``operator``: launching operators are the CPU events whose name
    contains this text (HTA's operator_name; None: every cpu_op); ``min_length`` / ``max_length``:
    the GPU operations per call shown; ``min_count``: calls per sequence shown; ``steps_only``: HTA's
    step selection (:class:`~trace_report.analyses.overlap.OverlapOptions`)."""

    rank: Annotated[int | None, RANK] = None
    operator: Annotated[str | None, Opt(
        "Launching operators are the outermost CPU events (cpu_op, user_annotation, python_function) whose name "
        "contains this text, as HTA's operator_name (default: the outermost cpu_op of each launch).")] = None
    min_length: Annotated[int, Opt("Shortest sequence shown, in GPU operations per operator call.", min=1)] = \
        MIN_LENGTH
    max_length: Annotated[int, Opt("Longest sequence shown, in GPU operations per operator call.", min=1)] = \
        MAX_LENGTH
    min_count: Annotated[int, Opt("Show sequences launched at least this many times (1: HTA's list).", min=1)] = \
        MIN_COUNT
    steps_only: Annotated[bool, STEPS_ONLY] = True

    def check(self) -> None:
        """:func:`check_options`: called before any input is read."""
        check_options(self)


def check_options(opts: SequenceOptions) -> None:
    """Raise :class:`~trace_report.errors.UsageError` for options no trace can satisfy (before any is read)."""
    if opts.operator is not None and not opts.operator.strip():
        raise UsageError("the operator name must not be empty")
    if opts.min_length < 1:
        raise UsageError(f"the minimum length must be 1 or more (got {opts.min_length})")
    if opts.max_length < opts.min_length:
        raise UsageError(f"the maximum length ({opts.max_length}) is below the minimum length ({opts.min_length})")
    if opts.min_count < 1:
        raise UsageError(f"the minimum count must be 1 or more (got {opts.min_count})")


COMMAND = Command(
    name="sequences",
    options=SequenceOptions,
    compute="compute:sequences",
    title="Kernel sequences",
    help="Repeated kernel sequences: per launching operator (the outermost CPU operator around the launch call), "
         "the GPU operations one call launched in order, counted over the calls as HTA's "
         "get_frequent_cuda_kernel_sequences counts them: count, GPU time (total_us, mean_us, pct), the calls' "
         "CPU time (cpu_us), and fusible when every operation is an elementwise or reduction kernel (a fusion "
         "candidate for torch.compile). Most GPU time first.",
    examples=("trace-report sequences traces/run-42 --limit 10",
              "trace-report sequences traces/run-42 --operator autograd::engine --min-length 3 -f json"),
    full_names=True,
    display="trace_report.present.cells:kernel_text",
    report=ReportTable("Repeated kernel sequences (trace-report sequences)", notes=False),
)

__getattr__ = computed(__name__, ("sequences", "sequence_calls", "call_query", "call_rows"))
