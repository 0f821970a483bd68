"""Differences between two traces, runs or databases (A, then B): per kernel or per region.

``trace-report compare A B``: kernel or region differences B - A, after a headline (step time and
GPU time, A -> B); ``--fail-if`` rules exit 3 when broken.

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method
(``tr.open(A).compare(B, by="region")``) and docs/cli.md are made from it
(:mod:`trace_report.declare`). The computation is :mod:`.compute` (its Ray variant :mod:`.ray`), the
headline and the rules' verdicts :mod:`.gate`; the command line's own body (the headline first, a
Markdown summary, exit 3 on a broken rule) is :func:`trace_report.cli.compare.main`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from trace_report.analyses.compare.rules import parse_rule
from trace_report.declare import RANK, Chart, Command, Opt, Pair, computed


@dataclass(frozen=True)
class CompareOptions:
    """``by``: ``kernel`` or ``region``; ``rank``: only that rank on both sides (else every
    rank, summed); ``per_step``: counts and times per ProfilerStep of each side; ``per_step``
    None: per step for regions, totals for kernels. ``match``: ``exact`` names or ``short`` names
    (kernel level). ``steps_only``: kernel level, only GPU operations launched inside a
    ProfilerStep (HTA's iteration rule: the runtime call with the same ``correlation`` starts in
    the step; operations without a launch are left out). ``fail_if``: the gate's rules
    (:mod:`~trace_report.analyses.compare.gate`, ``'step_time>+5%'``), judged with the headline."""

    by: Annotated[Literal["kernel", "region"], Opt(
        "kernel: per GPU operation name; region: per step region.", ("--by",))] = "kernel"
    rank: Annotated[int | None, RANK] = None
    per_step: Annotated[bool | None, Opt(
        "Counts and times per ProfilerStep of each side (default: per step for --by region, totals for --by "
        "kernel).", ("--per-step/--no-per-step",))] = None
    match: Annotated[Literal["exact", "short"], Opt(
        "kernel: pair by exact name, or by short name (argument lists and nested templates elided: kernels that "
        "only differ by PyTorch version pair up).", ("--match",))] = "exact"
    steps_only: Annotated[bool, Opt(
        "kernel: only GPU operations launched inside a ProfilerStep (HTA TraceDiff's rule).", ("--steps-only",))] \
        = False
    fail_if: Annotated[tuple[str, ...], Opt(
        "Exit 3 when B breaks this rule against A (repeatable): METRIC OP CHANGE. METRIC: step_time (mean step "
        "time: the longer of the ProfilerStep's CPU span and the GPU's step period), gpu_time (GPU busy time per "
        "step, in the GPU's step period), kernel:GLOB (time per step of the GPU operations whose name matches, "
        "case-insensitive), region:NAME (wall time per step); OP: > or <; CHANGE: +5%, -3% (of A) or +2ms, "
        "+500us (B - A). A rule that cannot be judged is an error (exit 1).", ("--fail-if",), metavar="RULE")] = ()

    def __post_init__(self) -> None:
        if isinstance(self.fail_if, str):  # one rule
            object.__setattr__(self, "fail_if", (self.fail_if,))

    def check(self) -> None:
        """Raise :class:`~trace_report.errors.UsageError` for a rule that does not parse (before any
        input is read)."""
        for text in self.fail_if:
            parse_rule(text)


COMMAND = Command(
    name="compare",
    options=CompareOptions,
    compute="gate:judged",
    title="B - A",
    help="Kernel- or region-level differences B - A (time, count, share; new and vanished kernels), largest time "
         "difference first. Regions are compared per step by default.\n\n"
         "First a headline: step time (mean step time: the longer of the ProfilerStep's CPU span and the GPU's "
         "step period, the work launched in the step) and GPU time (GPU busy per step), A -> B, and the --fail-if "
         "rules with their verdicts: before the rows in table and markdown (markdown adds the top regressions: a "
         "summary for a pull-request comment), as note lines on stderr with csv and json. Exit status: 0, 3 when "
         "a --fail-if rule is broken, 1 for bad input or a rule that cannot be judged, 2 for a usage error.",
    examples=("trace-report compare runs/torch-2.0 runs/torch-2.4 --match short -n 20",
              "trace-report compare a.duckdb b.duckdb --engine ray (each side's traces in Ray tasks)",
              "trace-report compare main/ pr/ --fail-if 'step_time>+5%' --fail-if 'kernel:*gemm*>+10%' -f markdown"),
    full_names=True,
    ray="ray:judged_ray",
    chart=Chart(None, "Also write a chart (.html, .png or .svg)."),
    inputs=Pair("A (the reference): a trace, run folder, database or dataset (a local path, or an s3://, gs://, "
                "abfs:// URL of traces).", "B (compared with A), of any of the same kinds."),
    main="trace_report.cli.compare:main",
)

__getattr__ = computed(__name__, (
    "KERNEL_COLUMNS", "LEVELS", "MATCHES", "REGION_COLUMNS", "REGRESSION_COLUMNS", "CompareResult", "by_short_name",
    "check_side", "compare", "compare_kernels", "compare_regions", "diff_tables", "gpu_op_totals", "kernels_diff",
    "mismatch_warnings", "regions_diff", "regressions", "step_count"))
