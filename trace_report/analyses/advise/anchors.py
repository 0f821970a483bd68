"""advise's findings whose rule is another tool's, each stated as that tool states it.

- ``sync_memcpy`` / ``sync_memset``: nsys analyze's cuda_memcpy_sync ("synchronous memory
  transfers that block the host"; host-to-device transfers of 64 KB or less left out) and
  cuda_memset_sync ("synchronous memset operations with pinned host memory or Unified Memory
  region"), Nsight Systems User Guide, "Expert System Rules" (``anchors_sync.sql``).
- ``optimizer_single_tensor``, ``grad_not_set_to_none``, ``conv_bias_before_batchnorm``,
  ``matmul_dims_not_aligned``: PyTorch's pattern matcher (torch/profiler/_pattern_matcher.py:
  OptimizerSingleTensorPattern, GradNotSetToNonePattern, Conv2dBiasFollowedByBatchNorm2dPattern,
  MatMulDimInFP16Pattern), which reports any match (``anchors_patterns.sql``); the last two need
  record_shapes, and a note says so once when no operator has shapes.
- ``stragglers``: a rank slower than the fastest on the same ProfilerSteps (HTA and TraceLens
  compare step time across ranks; view ``step_stragglers``, what ``breakdown --stragglers`` lists).
- ``kernel_variance``: kernels with CV > 1 and >= 10 calls (TraceLens' rule; table macro
  ``kernel_variance_of``, what ``kernel-variance`` lists), collective kernels left out: a
  collective's duration includes its wait for the other ranks (NCCL kernels spin until every rank
  joins), which ``exposed_communication`` and ``stragglers`` already count.
- ``long_gpu_gaps``: nsys analyze's gpu_gaps (GPU Starvation): the GPU idle > 500 ms between its
  first and last operation (``anchors_gaps.sql``).

The numbers of these rules (64 KB, 500 ms, CV > 1, 10 calls) are the defaults of
:class:`~trace_report.analyses.advise.checks.Thresholds`, with the other findings' thresholds.

Savings (ms per step) where a source supports one: ``grad_not_set_to_none`` the GPU time of the
zeroing kernels (set_to_none skips them: torch.optim.Optimizer.zero_grad); ``stragglers`` what
the other ranks waited for the rank on the steps it was the slowest. The others are NaN: the
tools report no estimate (``kernel_variance``: the calls of one kernel may differ in shape, so
their time above the median is no waste), and the idle time a synchronous call or a long gap causes is already
the saving of host_sync, launch_bound or low_gpu_utilization.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from trace_report.analyses.advise.checks import LINKS, Checker, RankFacts, Thresholds, most_text, ms_text, pct_text
from trace_report.formats.names import short_kernel_name
from trace_report.store.views import sql_text

PATTERN_TEXT = {
    "optimizer_single_tensor": (
        "Optimizer running its single-tensor implementation",
        "calls of the single-tensor optimizer loop (PyTorch's OptimizerSingleTensorPattern)",
        "Pass foreach=True (or fused=True) to the optimizer: one multi-tensor kernel per group instead "
        "of several per parameter", LINKS["tuning"]),
    "grad_not_set_to_none": (
        "Gradients zeroed instead of set to None",
        "aten::zero_ calls inside zero_grad (PyTorch's GradNotSetToNonePattern)",
        "optimizer.zero_grad(set_to_none=True) (the default from PyTorch 2.0): no memset per gradient",
        "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
        "#use-parameter-grad-none-instead-of-model-zero-grad-or-optimizer-zero-grad"),
    "conv_bias_before_batchnorm": (
        "Conv2d bias before BatchNorm2d",
        "biased aten::conv2d calls whose Conv2d module is followed by a BatchNorm2d "
        "(PyTorch's Conv2dBiasFollowedByBatchNorm2dPattern)",
        "Conv2d(..., bias=False) where a BatchNorm2d follows: the normalisation cancels the bias",
        "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
        "#disable-bias-for-convolutions-directly-followed-by-a-batch-norm"),
    "matmul_dims_not_aligned": (
        "FP16/BF16 matmul dimensions not a multiple of 8",
        "16-bit aten::mm/bmm/addmm calls with a dimension not a multiple of 8 (PyTorch's MatMulDimInFP16Pattern)",
        "Pad the matmul dimensions (hidden sizes, vocabulary, sequence length) to multiples of 8 so "
        "that tensor cores take whole tiles", LINKS["amp"]),
}


@dataclass
class AnchorFacts:
    """One rank's anchor numbers: ``sync`` and ``patterns`` rows by finding (columns of
    ``anchors_sync.sql`` / ``anchors_patterns.sql``), ``gaps`` (``anchors_gaps.sql``),
    ``stragglers`` (view ``step_stragglers`` summed over the rank's steps), ``variable``
    (``kernel_variance_of``'s variable kernels: rows of name, calls, total_us, p50_us, cv)."""

    sync: dict[str, dict] = field(default_factory=dict)
    patterns: dict[str, dict] = field(default_factory=dict)
    gaps: dict = field(default_factory=dict)
    stragglers: dict = field(default_factory=dict)
    variable: list[dict] = field(default_factory=list)
    note: str | None = None


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> list[dict]:
    rel = con.execute(sql, params)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]


def load_anchor_facts(con: duckdb.DuckDBPyConnection, ids: list[int], facts: dict[int, RankFacts],
                      th: Thresholds | None = None) -> None:
    """Set every rank's ``anchors`` (:class:`AnchorFacts`): one query per rule, with the rules'
    thresholds of ``th`` (:class:`Thresholds`); ``note`` says when no operator of the traces has
    shapes ("Input Dims", record_shapes=True)."""
    th = th or Thresholds()
    out = {r: AnchorFacts() for r in facts}
    pkg = __package__
    for row in _rows(con, sql_text("anchors_sync.sql", pkg), {"ids": ids, "h2d_min_bytes": th.sync_h2d_min_bytes}):
        if row["rank"] in out:
            out[row["rank"]].sync[row["finding"]] = row
    for row in _rows(con, sql_text("anchors_patterns.sql", pkg), {"ids": ids}):
        if row["rank"] in out:
            out[row["rank"]].patterns[row["finding"]] = row
    for row in _rows(con, sql_text("anchors_gaps.sql", pkg), {"ids": ids, "min_gap_us": th.gpu_gap_us}):
        if row["rank"] in out:
            out[row["rank"]].gaps = row
    for row in _rows(con, "SELECT rank, count(*) AS steps, avg(behind_pct) AS behind_pct, "
                     "sum(behind_us) FILTER (WHERE slowest) AS waited_us, count(*) FILTER (WHERE slowest) AS slowest, "
                     "max(ranks) AS ranks FROM step_stragglers WHERE ranks > 1 AND list_contains($ids, trace_id) "
                     "GROUP BY rank", {"ids": ids}):
        if row["rank"] in out:
            out[row["rank"]].stragglers = row
    for row in _rows(con, "SELECT rank, name, calls, total_us, p50_us, cv "
                     "FROM kernel_variance_of(NULL, true, $n, $cv) v WHERE variable "
                     "AND NOT EXISTS (SELECT 1 FROM kernel_classes c WHERE c.name = v.name "
                     "AND list_contains(c.classes, 'collective')) "
                     "ORDER BY rank, total_us DESC, name", {"n": th.variance_min_calls, "cv": th.variance_cv}):
        if row["rank"] in out:
            out[row["rank"]].variable.append(row)
    shapes = con.execute("SELECT count(*) FROM (SELECT 1 FROM cpu_ops WHERE list_contains($ids, trace_id) "
                         "AND op_shapes_recorded(json_extract(args, '$.\"Input Dims\"')) LIMIT 1)",
                         {"ids": ids}).fetchall()[0][0]
    for r, f in facts.items():
        out[r].note = None if shapes else ("conv_bias_before_batchnorm and matmul_dims_not_aligned not checked: no "
                                           "operator shapes (torch.profiler.profile(record_shapes=True))")
        f.anchors = out[r]


def check_anchors(check: Checker, f: RankFacts) -> None:
    """Add the rank's anchor findings (``f.anchors``) to ``check`` (thresholds: ``check.th``, the
    rules in the module docstring), and the note about missing shapes once."""
    a = f.anchors
    if not isinstance(a, AnchorFacts):
        return
    if a.note and a.note not in check.notes:
        check.notes.append(a.note)
    _sync(check, f, a)
    _patterns(check, f, a)
    _stragglers(check, f, a)
    _variance(check, f, a)
    _gaps(check, f, a)


def _sync(check: Checker, f: RankFacts, a: AnchorFacts) -> None:
    for finding, what, api in (("sync_memcpy", "copies", "cudaMemcpyAsync"), ("sync_memset", "memsets",
                                                                                "cudaMemsetAsync")):
        row = a.sync.get(finding)
        if not row:
            continue
        n, us = int(row["calls"]), float(row["blocked_us"] or 0.0)
        rule = f"cuda_memcpy_sync; host-to-device copies of {check.th.sync_h2d_min_bytes // 1024} KB or less left " \
            "out" if finding == "sync_memcpy" \
            else "cuda_memset_sync; pinned or managed memory"
        check._add(f, finding, f"Synchronous {what[:-1]} calls block the host", n, "calls", 0.0, None,
                   f"{n} synchronous {what} blocked the CPU {ms_text(us)} in the trace "
                   f"({most_text(row['top'], row['top_n'], row['top_us'], row['where'])}); nsys analyze's {rule}",
                   f"Use {api} on a stream (with pinned host memory), and synchronise once where the result is "
                   "needed", LINKS["sync"])


def _patterns(check: Checker, f: RankFacts, a: AnchorFacts) -> None:
    for finding, (title, what, how, link) in PATTERN_TEXT.items():
        row = a.patterns.get(finding)
        if not row:
            continue
        n, gpu = int(row["calls"]), float(row["gpu_us"] or 0.0)
        saving = gpu if finding == "grad_not_set_to_none" else None
        check._add(f, finding, title, n, "calls", 0.0, saving,
                   f"{n} {what}, {ms_text(float(row['cpu_us'] or 0.0))} on the CPU and {ms_text(gpu)} of GPU "
                   f"work launched from them ({most_text(row['top'], row['top_n'], row['top_us'], row['where'])})",
                   how, link)


def _stragglers(check: Checker, f: RankFacts, a: AnchorFacts) -> None:
    s = a.stragglers
    if not s or not s.get("slowest"):
        return
    pct = float(s["behind_pct"] or 0.0)
    check.checked.append(f"rank {f.rank} behind the fastest rank {pct_text(pct)} of step time on average")
    if pct <= check.th.min_saving_pct:
        return
    waited = float(s["waited_us"] or 0.0)
    check._add(f, "stragglers", "A rank slower than the others", pct, "% behind the fastest rank",
               check.th.min_saving_pct, waited,
               f"rank {f.rank} was the slowest of {int(s['ranks'])} ranks on {int(s['slowest'])} of {int(s['steps'])} "
               f"steps, {pct_text(pct)} behind the fastest on average; the others waited {ms_text(waited)} in all for "
               "it (trace-report breakdown --stragglers)",
               "Compare this rank's breakdown with a fast rank's (trace-report compare): uneven data or "
               "work per rank, a slower GPU or host, or contention on its node", LINKS["ddp"])


def _variance(check: Checker, f: RankFacts, a: AnchorFacts) -> None:
    if not a.variable or f.trace_gpu_us <= 0:
        return
    us = sum(float(v["total_us"]) for v in a.variable)
    pct = 100.0 * us / f.trace_gpu_us  # kernel_variance_of's calls are the whole traces'; so is their share
    check.checked.append(f"variable kernels {pct_text(pct)} of GPU time")
    if pct <= check.th.min_saving_pct:
        return
    above = sum(max(0.0, float(v["total_us"]) - int(v["calls"]) * float(v["p50_us"])) for v in a.variable)
    top = a.variable[0]
    most = most_text(short_kernel_name(str(top["name"])), top["calls"], top["total_us"], None)
    check._add(f, "kernel_variance", "Kernels whose duration varies from call to call", pct, "% of GPU time",
               check.th.min_saving_pct, None,
               f"{len(a.variable)} kernel names with CV > {check.th.variance_cv:g} over >= "
               f"{check.th.variance_min_calls} calls (TraceLens' rule) "
               f"take {pct_text(pct)} of GPU time, {ms_text(above)} of it above their median "
               f"({most}, CV {float(top['cv']):.2f}); "
               "trace-report kernel-variance lists them",
               "Look at the slow calls in the timeline: dynamic shapes (pad or bucket them), clocks or a "
               "concurrent stream", LINKS["tuning"])


def _gaps(check: Checker, f: RankFacts, a: AnchorFacts) -> None:
    g = a.gaps
    if not g:
        return
    longest = float(g["longest_us"])
    gap = check.th.gpu_gap_us
    check._add(f, "long_gpu_gaps", f"The GPU idle for more than {gap / 1e3:g} ms", longest / 1e3, "ms (longest gap)",
               gap / 1e3, None,
               f"{int(g['gaps'])} periods with no GPU operation longer than {ms_text(gap)} between the "
               f"first and last one, {ms_text(float(g['gap_us']))} in all, the longest {ms_text(longest)} "
               f"(nsys analyze's gpu_gaps)",
               "Find the CPU work in the gap (trace-report breakdown, the timeline): checkpointing, evaluation, "
               "logging or data loading between steps", LINKS["tuning"])
