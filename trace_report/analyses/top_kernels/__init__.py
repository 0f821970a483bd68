"""Top kernels: GPU operations (kernels, memcpy, memset) by name, by total time.

CPU operators by self time when there are none (``trace-report top-kernels``; the computation:
:mod:`.compute`).

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method and
docs/cli.md are made from it (:mod:`trace_report.declare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import BY_RANK, RANK, Command, Opt, computed
from trace_report.errors import UsageError

VIEWS = ("gpu_ops",)
"""The analysis views top-kernels reads (``top_kernels.sql``; the CPU fallback reads ``events``):
a database gets these alone, with the views they read (:func:`trace_report.cli.options.load`)."""
STEPS_ONLY_VIEWS = ("steps_only_gpu_ops", "steps")
"""And with ``steps_only``: ``top_kernels.sql`` over ``steps_only_gpu_ops``, ``steps`` for its check."""


@dataclass(frozen=True)
class TopKernelsOptions:
    """``limit`` rows (per rank with ``by_rank``; None = all); ``rank`` selects one rank;
    ``steps_only``: HTA's iteration rule (view ``steps_only_gpu_ops``: GPU operations launched
    before the last ProfilerStep starts); ``trace_ids``: only these traces (one run of several);
    ``kernels_only``: hide the memcpy/memset rows (the note says how much GPU time they hold;
    ``pct_of_gpu_time`` keeps its denominator)."""

    limit: Annotated[int | None, Opt("Rows (per rank with --by-rank).", ("--limit", "-n"), min=1)] = 20
    rank: Annotated[int | None, RANK] = None
    by_rank: Annotated[bool, BY_RANK] = False
    steps_only: Annotated[bool, Opt("Only GPU operations launched before the last ProfilerStep starts (HTA's "
                                    "rule: it drops the last step and operations without a launch).",
                                    ("--steps-only",))] = False
    trace_ids: Annotated[tuple[int, ...] | None, Opt("Only these traces (one run of several).", cli=False)] = None
    kernels_only: Annotated[bool, Opt("Hide the memcpy/memset rows (a note gives their names, time and share of "
                                      "GPU time); pct_of_gpu_time stays of all GPU time.",
                                      ("--kernels-only",))] = False

    def __post_init__(self) -> None:
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise UsageError(f"limit {self.limit!r}: give a number of rows, 0 or more (None: all)")

    def views(self) -> tuple[str, ...]:
        """The analysis views these options read."""
        return (*VIEWS, *(STEPS_ONLY_VIEWS if self.steps_only else ()))


COMMAND = Command(
    name="top-kernels",
    options=TopKernelsOptions,
    compute="compute:top_kernels_table",
    title="Top kernels",
    help="Rank GPU kernels, memcpy and memset by total time (CPU operators by self time on traces\n"
         "without any GPU operation).\n\n"
         "Also reads an `nsys stats -r cuda_gpu_kern_sum --format csv` file directly.\n"
         "kind is kernel, memcpy or memset (cpu_op for CPU operators); pct_of_gpu_time is of all GPU\n"
         "time (kernels + memcpy + memset), as in flags and HTA, so the rows sum to 100 without a limit.\n"
         "--kernels-only hides the memcpy/memset rows. With --engine ray each trace is aggregated by a\n"
         "Ray task and the partial sums merged here (same rows).",
    examples=("trace-report top-kernels traces/run-42 --by-rank -f json",
              "trace-report top-kernels trace.json --kernels-only",
              "trace-report top-kernels runs.duckdb --engine ray --ray-address auto"),
    views=VIEWS,
    full_names=True,
    ray="ray:top_kernels_table_ray",
    direct="compute:kernel_summary",
)

__getattr__ = computed(__name__, (
    "CPU_COLUMNS", "KERNEL_COLUMNS", "MEMORY_KINDS", "NO_KERNELS_NOTE", "STEPS_ONLY_NOTE", "TopKernelsResult",
    "TopKernelsTable", "cpu_self_time", "rows_from_frame", "top_kernels", "top_kernels_sql", "top_kernels_table"))
