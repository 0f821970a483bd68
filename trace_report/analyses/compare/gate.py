"""The headline of ``compare`` and the performance gate of ``compare --fail-if`` (docs/analysis.md).

Headline, per ProfilerStep of each side, each number from the one view that defines it (view
``step_time``, read through :func:`~trace_report.analyses.common.utilization.step_times`: the step as
the GPU sees it, the denominator of advise's and the report's "% of step time"):

- step time: mean step time (µs) = the view's summed ``step_us`` / steps, where a step lasts the
  longer of its ProfilerStep's CPU span and the GPU's step period (the work launched in the step,
  by correlation id), so that a GPU that falls behind a CPU running ahead makes steps longer;
  None on a side without ProfilerStep.
- GPU time: GPU busy time per step (µs) = the view's ``gpu_busy_us`` (union of the GPU operations'
  intervals, kernels + memcpy + memset, inside each step's GPU period) / steps; a trace without
  ProfilerStep counts as one step, its busy time over its first-to-last GPU operation span (view
  ``gpu_utilization``); None without GPU operations. Summed over ranks (``rank`` None), both are
  means over every rank's steps.

Rules: ``METRIC OP CHANGE`` (:data:`~trace_report.analyses.compare.rules.GRAMMAR`, read by
:func:`~trace_report.analyses.compare.rules.parse_rule`). ``METRIC`` is ``step_time``, ``gpu_time``,
``kernel:GLOB`` (the per-step time of the GPU operations whose name matches the shell pattern,
:func:`fnmatch.fnmatchcase` on lower-cased names, summed; names as the kernel comparison shows
them, so ``--match short`` matches short names) or ``region:NAME`` (the region's wall time per
step, the step breakdown's). ``CHANGE`` is relative (``+5%``: 100 * (B - A) / A) or absolute
(``+2ms``, ``+500us``: B - A). A rule is broken when the change of B against A is ``OP`` its
``CHANGE``: ``step_time>+5%`` breaks when B's step time is more than 5 % above A's,
``gpu_time<-10%`` when it dropped by more than 10 %. A metric that is 0 in A and not in B has an
infinite relative change. A rule whose metric neither side has (no ProfilerStep, no GPU
operation, a pattern that matches nothing) cannot be judged: :class:`InputError`, never a pass.
A ``gpu_time`` rule where one side has no GPU operation at all (a CPU-only trace) is not judged
either: its verdict says so in ``note`` and neither breaks nor passes the gate (a GPU time that
does not exist is no 0 µs to compare with).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pandas as pd

from trace_report.analyses.common.utilization import gpu_utilization, step_times
from trace_report.analyses.compare import CompareOptions
from trace_report.analyses.compare.compute import CompareResult, compare, mismatch_warnings
from trace_report.analyses.compare.rules import Rule, parse_rule
from trace_report.errors import InputError
from trace_report.store.tracedb import TraceDB


@dataclass(frozen=True)
class Side:
    """One side's headline: ``steps`` (ProfilerSteps, and one per trace without them), ``step_us``
    (mean step time as the GPU sees it, µs; None without ProfilerStep) and ``gpu_us`` (GPU busy
    time per step, µs; None without GPU operations)."""

    steps: int
    step_us: float | None
    gpu_us: float | None


@dataclass(frozen=True)
class Headline:
    """Step time and GPU time of A and of B (see the module docstring); ``warnings``: why A and B
    may not be two runs of one workload (:func:`~trace_report.analyses.compare.mismatch_warnings`)."""

    a: Side
    b: Side
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A judged rule: the metric on each side (µs per step), the change (percent when the rule is
    relative, else µs; ``inf`` when A is 0 and B is not), whether the rule is ``broken``, and
    ``matched``: the GPU operation names a ``kernel:`` pattern matched (0 for other metrics);
    ``note``: why the rule was not judged (``change`` NaN, not ``broken``), None when it was."""

    rule: Rule
    a_us: float
    b_us: float
    change: float
    broken: bool
    matched: int = 0
    note: str | None = None


def side(db: TraceDB, rank: int | None = None) -> Side:
    """The headline numbers of one side (views ``step_time`` and ``gpu_utilization``, see the module
    docstring). Raises :class:`UsageError` for an unknown rank."""
    util = gpu_utilization(db, rank, by_step=True)
    spans = util[util["basis"] == "gpu_span"]
    timed = step_times(db, rank)
    steps = len(timed) + len(spans)
    if not steps:
        return Side(0, None, None)
    busy = pd.concat([timed["gpu_busy_us"], spans["busy_us"]]).dropna()
    return Side(steps, float(timed["step_us"].sum()) / steps if spans.empty else None,
                float(busy.sum()) / steps if len(busy) else None)


def headline(a: TraceDB, b: TraceDB, rank: int | None = None) -> Headline:
    """Step time and GPU time of A and B (:func:`side`), and the warnings of :func:`mismatch_warnings`."""
    return Headline(side(a, rank), side(b, rank), tuple(mismatch_warnings(a, b, rank)))


def needs(rules: list[Rule]) -> set[str]:
    """The metrics the rules read (a subset of :data:`~trace_report.analyses.compare.rules.METRICS`)."""
    return {r.metric for r in rules}


def change(rule: Rule, a_us: float, b_us: float) -> float:
    """B against A as the rule measures it: percent of A (``inf``/``-inf`` when A is 0 and B is
    not, 0 when both are), else µs."""
    if not rule.relative:
        return b_us - a_us
    if a_us == 0:
        return 0.0 if b_us == 0 else math.copysign(math.inf, b_us)
    return 100.0 * (b_us - a_us) / a_us


def judge(rule: Rule, a_us: float, b_us: float, matched: int = 0) -> Verdict:
    """The :class:`Verdict` of one rule on its metric's values."""
    moved = change(rule, a_us, b_us)
    broken = moved > rule.limit if rule.op == ">" else moved < rule.limit
    return Verdict(rule, a_us, b_us, moved, broken, matched)


def _headline_values(rule: Rule, head: Headline) -> tuple[float, float]:
    field = "step_us" if rule.metric == "step_time" else "gpu_us"
    a, b = getattr(head.a, field), getattr(head.b, field)
    if rule.metric == "step_time" and (a is None or b is None):
        raise InputError(f"--fail-if {rule.text!r}: {'A' if a is None else 'B'} has no ProfilerStep, so no step time")
    if a is None and b is None:
        raise InputError(f"--fail-if {rule.text!r}: neither A nor B has GPU operations")
    return a or 0.0, b or 0.0


def kernel_values(rule: Rule, kernels: CompareResult) -> tuple[float, float, int]:
    """Per-step time (µs) of the GPU operations matching the rule's pattern on A and B, and how
    many names matched. Raises :class:`InputError` when none matches."""
    frame = kernels.frame[kernels.frame["kind"] != "cpu_op"]
    pattern = rule.target.lower()
    hit = frame[[fnmatch.fnmatchcase(str(n).lower(), pattern) for n in frame["name"]]]
    if hit.empty:
        raise InputError(f"--fail-if {rule.text!r}: no GPU operation of A or B matches {rule.target!r}")
    da, db_ = (1, 1) if kernels.per_step else (max(kernels.a_steps, 1), max(kernels.b_steps, 1))
    return float(hit["a_total_us"].sum()) / da, float(hit["b_total_us"].sum()) / db_, len(hit)


def region_values(rule: Rule, regions: CompareResult) -> tuple[float, float]:
    """Per-step wall time (µs) of the rule's region on A and B."""
    row = regions.frame[regions.frame["region"] == rule.target]
    if row.empty:
        raise InputError(f"--fail-if {rule.text!r}: no region {rule.target!r} in A or B")
    da, db_ = (1, 1) if regions.per_step else (max(regions.a_steps, 1), max(regions.b_steps, 1))
    return float(row["a_wall_us"].iloc[0]) / da, float(row["b_wall_us"].iloc[0]) / db_


def evaluate(rules: list[Rule], head: Headline, kernels: CompareResult | None = None,
             regions: CompareResult | None = None) -> list[Verdict]:
    """Judge every rule, in order: step and GPU time from ``head``, ``kernel:`` rules from the
    kernel-level comparison ``kernels``, ``region:`` rules from the region-level ``regions``
    (either per step or totals; their step counts make them per step).

    Raises :class:`InputError` for a rule that cannot be judged (module docstring) and
    :class:`ValueError` when a comparison the rules need is not given."""
    out = []
    for rule in rules:
        if rule.metric == "gpu_time" and (head.a.gpu_us is None) != (head.b.gpu_us is None):
            missing = "A" if head.a.gpu_us is None else "B"
            out.append(Verdict(rule, head.a.gpu_us or 0.0, head.b.gpu_us or 0.0, math.nan, False,
                               note=f"{missing} has no GPU operations: its GPU time cannot be compared"))
        elif rule.metric in ("step_time", "gpu_time"):
            out.append(judge(rule, *_headline_values(rule, head)))
        elif rule.metric == "kernel":
            if kernels is None:
                raise ValueError("kernel rules need the kernel-level comparison")
            a_us, b_us, n = kernel_values(rule, kernels)
            out.append(judge(rule, a_us, b_us, n))
        else:
            if regions is None:
                raise ValueError("region rules need the region-level comparison")
            out.append(judge(rule, *region_values(rule, regions)))
    return out


@dataclass
class Judged:
    """What ``compare`` gives: the comparison at ``options.by`` (``result``), the ``headline`` and
    the verdict of each ``fail_if`` rule, in order. ``frame`` and ``notes`` are the comparison's;
    ``warnings`` the headline's; ``broken``: the rules the gate fails on."""

    result: CompareResult
    headline: Headline
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        return self.result.frame

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    @property
    def warnings(self) -> list[str]:
        return list(self.headline.warnings)

    @property
    def broken(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.broken]

    def attrs(self) -> dict[str, Any]:
        """The headline and the verdicts as plain data (the notebook frame's ``attrs``): ``headline``
        (:class:`Headline`'s fields), ``verdicts`` (:class:`Verdict`'s, the rule's nested), ``gate``
        (``passed``, ``failed``, or None without rules)."""
        gate = None if not self.verdicts else "failed" if self.broken else "passed"
        return {"headline": asdict(self.headline), "verdicts": [asdict(v) for v in self.verdicts], "gate": gate}


Analysis = Callable[[TraceDB, TraceDB, CompareOptions], CompareResult]


def judged(a: TraceDB, b: TraceDB, options: CompareOptions | None = None, analysis: Analysis = compare) -> Judged:
    """The comparison of B against A at ``options.by`` (``analysis``: :func:`compare`, or its Ray
    variant), the headline and the verdicts of ``options.fail_if``; a rule on the other level
    (``kernel:`` with ``by='region'``, ``region:`` with ``by='kernel'``) runs that comparison too.

    Raises :class:`UsageError` for a rule that does not parse, :class:`InputError` for one that
    cannot be judged (and as :func:`compare` does)."""
    opts = options or CompareOptions()
    rules = [parse_rule(text) for text in opts.fail_if]
    result = analysis(a, b, opts)
    head = headline(a, b, opts.rank)
    need = needs(rules)
    other = {lvl: analysis(a, b, replace(opts, by=lvl)) for lvl in ("kernel", "region")
             if lvl in need and lvl != opts.by}
    kernels = result if opts.by == "kernel" else other.get("kernel")
    regions = result if opts.by == "region" else other.get("region")
    return Judged(result, head, evaluate(rules, head, kernels, regions))
