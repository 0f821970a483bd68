"""GPU-bound steps: where the GPU's own time goes, and the findings that shorten it.

When the GPU is busy most of the step (:attr:`GpuBoundThresholds.busy_pct`), idle-time fixes
cannot help much: the lever is the kernels. ``gpu_bound`` then says so and splits GPU time into
kernel groups (:data:`GROUPS`, from the kernel classes of ``store/sql/views_kernel_classes.sql``:
each GPU operation in the first group whose classes it has), names the largest, and estimates what
fusing the *fusible chains* would save: runs of two or more consecutive kernels on one stream
that are all elementwise, reduction, normalisation or copy kernels (not Inductor's, which are
fused already), between the GEMMs, convolutions and other kernels that end them. ``eager_softmax``
fires on its own, busy or not: softmax run as separate kernels, as eager attention runs it.

Facts come from the GPU operations launched inside advise's windows (views ``window_gpu_ops`` and
``window_gpu_op_names``, :mod:`trace_report.analyses.advise.window_gpu`) and ``kernel_classes``;
:func:`load` sets :attr:`RankFacts.gpu_work` and :attr:`RankFacts.compiled`
for every rank, :func:`check` adds the findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import duckdb

from trace_report.analyses.advise.checks import Checker, RankFacts, pct_text

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("communication", ("collective",)),
    ("attention", ("attention",)),
    ("gemm", ("gemm",)),
    ("convolution", ("convolution",)),
    ("softmax", ("softmax",)),
    ("norm", ("norm",)),
    ("copy", ("memcpy", "copy", "layout_conversion")),
    ("memset", ("memset",)),
    ("reduction", ("reduction",)),
    ("elementwise", ("elementwise",)),
)
"""Kernel groups in precedence order, each with the kernel classes that put a GPU operation in it;
an operation with none of them is ``other``."""
FUSIBLE_CLASSES = ("elementwise", "reduction", "norm", "copy")
"""Classes of the kernels a fusing compiler merges into one kernel (Inductor's pointwise,
reduction and normalisation fusion); a kernel with any other class ends a chain."""
CHAIN_BREAKERS = ("gemm", "convolution", "attention", "collective", "softmax", "triton")

LINKS_MORE = {
    "compile": "https://pytorch.org/docs/stable/generated/torch.compile.html",
    "sdpa": "https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html",
}


@dataclass(frozen=True)
class GpuBoundThresholds:
    """The thresholds and factors of :func:`check`, each with its reason (percentages are 0-100).

    - ``busy_pct``: the GPU is busy >= 80% of step time. Then its own time is at least 4x its idle
      time, so shortening kernels is the larger lever than removing idle time (Amdahl); under
      tb-profiler's 50% (``low_utilization_pct``) idle time is, and in between neither dominates.
    - ``fusion_speedup``: a fused chain runs 2x faster than its kernels one by one. Elementwise
      kernels are memory-bound (their time is their bytes over the memory bandwidth: the roofline
      model, Williams et al., CACM 2009); a chain of n such kernels, each reading one or two
      tensors and writing one, moves 2n to 3n tensors, the fused kernel n + 1 at most (inputs once,
      the output once): at least 1.5 times faster for n = 2, twice from n = 4. PyTorch 2's
      TorchInductor, which fuses these chains, measures 1.41 and 2.27 times (training, inference) geomean speed-ups on
      whole models, GEMMs included (Ansel et al., "PyTorch 2", ASPLOS 2024).
    - ``softmax_pct``: softmax kernels over 5% of GPU time, a share worth a rewrite of the
      attention (the same floor as ``layout_conversion_pct`` + rounding); ``attention_speedup``:
      FlashAttention runs attention 2-4x faster than the standard matmul-softmax-matmul
      (Dao et al., "FlashAttention", NeurIPS 2022); the saving counts only the softmax kernels,
      at the low end, 2x.
    - ``top_groups``: the groups the evidence lists by share.
    """

    busy_pct: float = 80.0
    fusion_speedup: float = 2.0
    softmax_pct: float = 5.0
    attention_speedup: float = 2.0
    top_groups: int = 5


GPU_BOUND = GpuBoundThresholds()


@dataclass
class GpuWork:
    """One rank's GPU time by kernel group (µs, the GPU operations of the rank's windows, view
    ``window_gpu_ops``), the longest GPU operation name of each group (``top``), the fusible
    chains (``chains``: how many, ``chain_kernels``, ``chain_us``, ``chain_names``: the names
    with most time in them) and the softmax kernels' time and top name."""

    groups: dict[str, float] = field(default_factory=dict)
    top: dict[str, str] = field(default_factory=dict)
    chains: int = 0
    chain_kernels: int = 0
    chain_us: float = 0.0
    chain_names: list[str] = field(default_factory=list)
    triton_us: float = 0.0


def _group_case() -> str:
    arms = " ".join(f"WHEN list_has_any(classes, {list(cs)!r}) THEN '{g}'" for g, cs in GROUPS)
    return f"CASE {arms} ELSE 'other' END"


def _groups(con: duckdb.DuckDBPyConnection, ids: list[int]) -> list[tuple]:
    return con.execute(
        "WITH n AS (SELECT t.rank, g.name, sum(g.dur_us) AS us, any_value(coalesce(c.classes, [])) AS classes "
        "  FROM window_gpu_op_names g JOIN traces t USING (trace_id) "
        "  LEFT JOIN kernel_classes c ON c.trace_id = g.trace_id AND c.name = g.name "
        "  WHERE list_contains($ids, g.trace_id) GROUP BY t.rank, g.name) "
        f"SELECT rank, {_group_case()} AS grp, sum(us), arg_max(name, us), "
        "  sum(us) FILTER (WHERE list_contains(classes, 'triton')) FROM n GROUP BY ALL",
        {"ids": ids}).fetchall()


def _chains(con: duckdb.DuckDBPyConnection, ids: list[int]) -> list[tuple]:
    """Per rank: chains, kernels in them, their time, the three names with most time in them."""
    return con.execute(
        "WITH k AS (SELECT g.trace_id, g.stream, g.ts_us, g.event_id, g.name, g.dur_us, "
        "    coalesce(list_has_any(c.classes, $fusible) AND NOT list_has_any(c.classes, $breakers), false) AS fusible "
        "  FROM window_gpu_ops g LEFT JOIN kernel_classes c ON c.trace_id = g.trace_id AND c.name = g.name "
        "  WHERE g.cat = 'kernel' AND list_contains($ids, g.trace_id)), "
        "r AS (SELECT *, count(*) FILTER (WHERE NOT fusible) OVER (PARTITION BY trace_id, stream "
        "    ORDER BY ts_us, event_id ROWS UNBOUNDED PRECEDING) AS run FROM k), "
        "c AS (SELECT trace_id, stream, run, count(*) AS n FROM r WHERE fusible GROUP BY ALL HAVING count(*) >= 2), "
        "m AS (SELECT t.rank, r.name, sum(r.dur_us) AS us FROM r JOIN c USING (trace_id, stream, run) "
        "  JOIN traces t ON t.trace_id = r.trace_id WHERE r.fusible GROUP BY ALL) "
        "SELECT s.rank, s.chains, s.kernels, m.us, m.names FROM "
        "  (SELECT t.rank, count(*) AS chains, sum(n) AS kernels FROM c JOIN traces t USING (trace_id) GROUP BY 1) s "
        "  JOIN (SELECT rank, sum(us) AS us, list(name ORDER BY us DESC)[1:3] AS names FROM m GROUP BY 1) m "
        "  USING (rank)",
        {"ids": ids, "fusible": list(FUSIBLE_CLASSES), "breakers": list(CHAIN_BREAKERS)}).fetchall()


def _compiled(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, int]:
    """Per rank: the CPU events of torch.compile's runtime (autograd ``CompiledFunction``,
    ``## Call CompiledFxGraph ... ##``, ``Torch-Compiled Region``; names as PyTorch records them)."""
    return {int(r): int(n) for r, n in con.execute(
        "SELECT t.rank, count(*) FROM events e JOIN traces t USING (trace_id) "
        "WHERE list_contains($ids, e.trace_id) AND e.cat IN ('cpu_op', 'user_annotation') "
        "AND (e.name IN ('CompiledFunction', 'CompiledFunctionBackward') OR e.name LIKE '## Call CompiledFxGraph%' "
        "     OR e.name LIKE 'Torch-Compiled Region%') GROUP BY 1", {"ids": ids}).fetchall() if r is not None}


def load(con: duckdb.DuckDBPyConnection, ids: list[int], facts: dict[int, RankFacts]) -> None:
    """Set each rank's :attr:`RankFacts.gpu_work` and :attr:`RankFacts.compiled` (the evidence
    that the run is compiled: Inductor's Triton kernels, torch.compile's runtime events; empty
    when none)."""
    work = {r: GpuWork() for r in facts}
    for r, grp, us, top, triton in _groups(con, ids):
        if r is not None and int(r) in work:
            w = work[int(r)]
            w.groups[str(grp)], w.top[str(grp)] = float(us or 0.0), str(top)
            w.triton_us += float(triton or 0.0)
    for r, chains, kernels, us, names in _chains(con, ids):
        if r is not None and int(r) in work:
            w = work[int(r)]
            w.chains, w.chain_kernels, w.chain_us, w.chain_names = int(chains), int(kernels), float(us), list(names)
    compiled = _compiled(con, ids)
    for r, f in facts.items():
        f.gpu_work = work[r]
        parts = []
        if work[r].triton_us > 0:
            parts.append(f"Inductor (Triton) kernels {pct_text(100 * work[r].triton_us / f.gpu_us)} of GPU time"
                         if f.gpu_us > 0 else "Inductor (Triton) kernels")
        if compiled.get(r):
            parts.append(f"{compiled[r]} torch.compile runtime events (CompiledFunction, CompiledFxGraph)")
        f.compiled = "; ".join(parts)


def kernel_label(name: str) -> str:
    """A kernel name short enough for a sentence: the function's last name, and for ATen's
    elementwise and reduce kernels the functor they run (``vectorized_elementwise_kernel
    (CUDAFunctor_add)``); at most 60 characters."""
    head = re.sub(r"^(void|std::\S+)\s+", "", name).replace("(anonymous namespace)::", "")
    base = re.split(r"[<(]", head, maxsplit=1)[0].split("::")[-1] or head
    if "elementwise_kernel" in base or "reduce_kernel" in base:
        m = re.search(r"(\w*(?:Functor|functor|Impl|_cuda|Ops?)\w*)", head[len(base):])
        if m:
            base = f"{base} ({m.group(1)})"
    return base[:60]


def _shares(w: GpuWork, n: int) -> str:
    total = sum(w.groups.values()) or 1.0
    ranked = sorted(((g, us) for g, us in w.groups.items() if us > 0), key=lambda x: -x[1])[:n]
    return ", ".join(f"{g} {pct_text(100 * us / total)}" for g, us in ranked)


def check(checker: Checker, f: RankFacts, th: GpuBoundThresholds = GPU_BOUND) -> None:
    """Add ``gpu_bound`` (the GPU busy >= ``busy_pct`` of step time) and ``eager_softmax`` (softmax
    kernels > ``softmax_pct`` of GPU time) to ``checker`` for rank ``f``."""
    w = f.gpu_work
    if w is None or f.gpu_us <= 0:
        return
    _eager_softmax(checker, f, w, th)
    if f.wall_us <= 0 or not f.idle:
        return
    busy = f.util_pct
    checker.checked.append(f"GPU busy {pct_text(busy)} of {f.time_word} (GPU-bound from {th.busy_pct:g}%)")
    if busy < th.busy_pct:
        return
    chain_pct = 100.0 * w.chain_us / f.gpu_us
    saving = w.chain_us * (1 - 1 / th.fusion_speedup)
    largest = max(w.groups, key=lambda g: w.groups[g]) if w.groups else "other"
    fusible = (f"fusible: {pct_text(chain_pct)} of GPU time ({f.per_step_ms(w.chain_us):.3g} ms per {f.per}) in "
               f"{w.chains / max(f.windows, 1):,.0f} chains per {f.per} of {w.chain_kernels / w.chains:.2g} "
               "elementwise/reduction/norm/copy kernels in a row between GEMMs and other kernels; the saving assumes "
               f"a fused chain runs {th.fusion_speedup:g}x faster" if w.chains else
               "no two elementwise/reduction/norm/copy kernels in a row: nothing left to fuse, no saving estimated")
    evidence = (f"the GPU ran kernels, copies or memsets {pct_text(busy)} of {f.time_word}, so the kernels set "
                f"the {f.per} time; GPU time by kernel class: {_shares(w, th.top_groups)} (largest: {largest}, most in "
                f"{kernel_label(w.top.get(largest, ''))}); {fusible}")
    if f.compiled:
        evidence += f"; the run is compiled ({f.compiled})"
    checker._add(f, "gpu_bound", "GPU-bound: kernel time sets the step time", busy, f"% of {f.time_word} GPU busy",
                 th.busy_pct, saving if w.chains else None, evidence, _gpu_bound_advice(f, w, largest),
                 LINKS_MORE["compile"])


def _gpu_bound_advice(f: RankFacts, w: GpuWork, largest: str) -> str:
    """What to change, naming this trace's kernels: the fusible chains first (torch.compile, or
    compiling the code outside the graph when the run is compiled), then the largest group."""
    top = kernel_label(w.top.get(largest, ""))
    then = {"gemm": "bf16/TF32 on tensor cores (trace-report flags), dimensions multiples of 8, "
                    "torch.compile(mode='max-autotune')",
            "convolution": "bf16 with channels_last on tensor cores (trace-report flags), "
                           "torch.backends.cudnn.benchmark = True",
            "attention": "it is fused already; a shorter sequence or a lower precision",
            "softmax": "fused attention (scaled_dot_product_attention)",
            "communication": "overlap or fewer collectives (trace-report overlap)"}.get(
        largest, "its kernels in trace-report top-kernels")
    largest_text = f"the largest class, {largest} ({top}): {then}"
    if not w.chains:
        return f"No fusible chains: start from {largest_text}"
    names = ", ".join(dict.fromkeys(kernel_label(n) for n in w.chain_names))
    if f.compiled:
        return (f"Already compiled, yet chains of eager kernels remain ({names}): find the graph breaks "
                f"(TORCH_LOGS=graph_breaks) and compile that code too; then {largest_text}")
    return f"Fuse the elementwise/norm/copy chains ({names}) with torch.compile(model); then {largest_text}"


def _eager_softmax(check: Checker, f: RankFacts, w: GpuWork, th: GpuBoundThresholds) -> None:
    us = w.groups.get("softmax", 0.0)
    pct = 100.0 * us / f.gpu_us
    check.checked.append(f"softmax kernels {pct_text(pct)} of GPU time")
    if pct <= th.softmax_pct:
        return
    fused = w.groups.get("attention", 0.0)
    check._add(f, "eager_softmax", "Attention computed eagerly (separate softmax kernels)", pct, "% of GPU time",
               th.softmax_pct, us * (1 - 1 / th.attention_speedup),
               f"{check._per_step(f, us)} in softmax kernels ({kernel_label(w.top.get('softmax', ''))}), "
               f"{pct_text(f.pct_of_step(us))} of {f.time_word}; fused attention kernels (flash, memory-efficient) "
               f"{pct_text(100 * fused / f.gpu_us)} of GPU time: the attention scores are written to memory, "
               "softmaxed and read back",
               f"Replace the matmul-softmax-matmul attention with torch.nn.functional.scaled_dot_product_attention "
               f"(flash or memory-efficient kernels), e.g. attn_implementation='sdpa' in Hugging Face models; the "
               f"kernel to remove: {kernel_label(w.top.get('softmax', ''))}", LINKS_MORE["sdpa"])
