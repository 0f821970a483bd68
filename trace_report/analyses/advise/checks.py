"""The checks behind ``advise``: one method per finding, each from the numbers of one rank.

Every value a check compares comes from a SQL view (``store/sql/views_verdicts.sql``,
``views_step_numbers.sql``, ``overlap.sql``, the kernel classes) through :class:`RankFacts`, so
``breakdown``, ``flags``, ``overlap`` and ``top-kernels`` show the same figures. Each finding
carries ``est_saving_ms_per_step``: what fixing it would save per step, estimated as the
module docstring of :mod:`trace_report.analyses.advise` states (docs/analysis.md, "advise").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from trace_report.analyses.advise.culprits import CPU_WORK, loader_text
from trace_report.analyses.common.iterations import INFERRED
from trace_report.analyses.common.variance import CV_THRESHOLD, MIN_CALLS

ADVICE_COLUMNS = ["rank", "finding", "title", "value", "unit", "threshold", "est_saving_ms_per_step",
                  "saving_pct_of_step", "per", "evidence", "recommendation", "link"]
"""``per``: what ``est_saving_ms_per_step`` is per (:attr:`RankFacts.per`); ``saving_pct_of_step`` is a
share of its :data:`PER_TIME`."""

PER_TIME = {"step": "step time", "iteration": "iteration time", "trace": "the first-to-last GPU op span"}
"""What "% of ..." is a share of, by ``per``: the windows' time (``RankFacts.step_us``)."""

STARTUP_ADVICE = ("Profile steady steps: torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, "
                  "active=3)) and prof.step() each iteration, or run a few warm-up iterations (and torch.compile's "
                  "first call) before profiling starts")
"""What ``startup_in_window`` recommends, wherever the one-time work lies."""
LINKS = {
    "pinned": "https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
    "ddp": "https://pytorch.org/docs/stable/notes/ddp.html",
    "sync": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization",
    "data": "https://pytorch.org/docs/stable/data.html#memory-pinning",
    "graphs": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    "layout": "https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html",
    "amp": "https://pytorch.org/docs/stable/amp.html",
    "tf32": "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices",
    "memory": "https://pytorch.org/docs/stable/checkpoint.html",
    "tuning": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "schedule": "https://pytorch.org/docs/stable/profiler.html#torch.profiler.schedule",
}


@dataclass(frozen=True)
class Thresholds:
    """Every threshold and estimate factor of the checks, with its reason (percentages are 0-100).

    - ``min_saving_pct``: a finding whose estimated saving is under 2% of step time is left out
      unless ``all_findings`` (below that, run-to-run noise is of the same size).
    - ``data_loading_pct``: DataLoader > 5% of step time (torch-tb-profiler ``RunProfileData``).
    - ``pageable_pct``, ``exposed_comm_pct``, ``layout_conversion_pct``, ``fp32_gemm_pct``: the share
      of GPU time (of the operations launched inside the windows, view ``window_gpu_ops``) above
      which the finding is considered at all; 2%, the same floor as the saving.
    - ``min_tensor_core_cc``: tensor cores exist from compute capability 7.0 (Volta);
      ``tf32_cc``: TF32 from 8.0 (Ampere whitepaper), tb-profiler's rule otherwise.
    - ``launch_path_pct``: launch_bound rather than cpu_bound when >= 50% of the CPU time the GPU
      waited on (view ``launch_cpu_split_of``) went to issuing operations, launch calls and
      dispatch: most of the wait then goes with fewer launches (CUDA graphs: one launch for many
      operations, PyTorch's "Accelerating PyTorch with CUDA Graphs"; HTA's launch statistics
      measure the same per-launch cost), the rest is CPU work of its own. HTA's share of
      operations shorter than their launch (``get_cuda_kernel_launch_stats``) stays as evidence
      only: it compares the GPU's speed with the launch call, not what the CPU did meanwhile, and
      named one batch-1 BERT inference differently on an H100 and an MI300X.
    - ``dispatch_us``: an event (operator, Python function, non-launch runtime call) or a stretch
      outside every event whose own time is at most 100 µs counts as the fixed cost of issuing one
      operation: Python binding, autograd and ATen dispatch, the allocator and the launch call
      take a few µs each on a current host (5-25 µs per eager operator in all), which the
      profiler's per-event cost and an older host multiply; longer is host work of its own.
      torch.compile's wrappers (CompiledFunction, '## Call CompiledFxGraph') count as dispatch
      whatever their length: their generated Python launches the compiled kernels one by one.
    - ``launch_max_mean_queue``: the launch queue of the busiest stream holds on average fewer
      than 10 operations (view of HTA's queue length): with more, the CPU is ahead of the GPU and
      the GPU is never waiting for the next launch for long (its
      waits with no launch call under way are the CPU's other work: ``cpu_bound`` still).
    - ``low_utilization_pct``: GPU busy < 50% of step time (tb-profiler: utilization < 0.5).
    - ``min_recorded_pct``: the events recorded inside the windows (CPU operators, Python functions,
      runtime calls, GPU operations; view ``window_recorded``) cover under 2% of their time: the
      profile shows nothing of the rest (the CPU ran code the profiler does not record, or
      waited), so the GPU's idle time there has no cause the trace can show and low utilisation is
      not judged; the same 2% floor as ``min_saving_pct`` (what the trace does show could not save
      more).
    - ``memory_pct``: peak allocated > 90% of device memory (tb-profiler memory recommendation).
    - ``startup_dominant_pct``: one-time start-up work (:mod:`trace_report.analyses.advise.startup`)
      over half of step time is what the window mostly measured, so ``startup_in_window`` is
      listed first whatever the other savings; under ``min_saving_pct`` it is left out as noise.
    - ``pinned_speedup``: a copy from pinned memory runs about 2x faster than from pageable memory
      (NVIDIA, "How to Optimize Data Transfers in CUDA C/C++": 5.3 vs 12 GB/s on PCIe; a
      pageable copy is staged through a pinned buffer by the driver), so the saving is half the
      pageable copy time; more when ``non_blocking`` then overlaps it with computation.
    - ``tensor_core_speedup``: a GEMM/convolution moved from CUDA cores to tensor cores (TF32 or
      16-bit) taken as 2x faster, well under the peak ratios (A100: FP32 19.5 vs TF32 156
      TFLOP/s) because real layers are often memory-bound.

    The anchors' rules (:mod:`trace_report.analyses.advise.anchors`), each as its tool sets it:

    - ``sync_h2d_min_bytes``: nsys analyze's cuda_memcpy_sync leaves out host-to-device copies of
      64 KB or less (Nsight Systems User Guide, "Expert System Rules").
    - ``gpu_gap_us``: nsys analyze's gpu_gaps (GPU Starvation) default, the GPU idle > 500 ms.
    - ``variance_cv``, ``variance_min_calls``: TraceLens' variable kernel, CV > 1 over >= 10 calls
      (:mod:`trace_report.analyses.common.variance`, the ``kernel-variance`` defaults).
    - ``stragglers`` and ``kernel_variance`` are listed above ``min_saving_pct``; PyTorch's pattern
      matcher (torch/profiler/_pattern_matcher.py) reports any match, so its four findings have
      no threshold.
    """

    min_saving_pct: float = 2.0
    data_loading_pct: float = 5.0
    pageable_pct: float = 2.0
    exposed_comm_pct: float = 2.0
    layout_conversion_pct: float = 2.0
    fp32_gemm_pct: float = 2.0
    min_tensor_core_cc: float = 7.0
    tf32_cc: float = 8.0
    launch_path_pct: float = 50.0
    dispatch_us: float = 100.0
    launch_max_mean_queue: float = 10.0
    low_utilization_pct: float = 50.0
    memory_pct: float = 90.0
    startup_dominant_pct: float = 50.0
    min_recorded_pct: float = 2.0
    pinned_speedup: float = 2.0
    tensor_core_speedup: float = 2.0
    sync_h2d_min_bytes: int = 64 * 1024
    gpu_gap_us: float = 500_000.0
    variance_cv: float = CV_THRESHOLD
    variance_min_calls: int = MIN_CALLS


@dataclass
class RankFacts:
    """One rank's numbers, each read from its view (µs unless named otherwise).

    ``windows``/``wall_us``/``busy_us``/``basis``: view ``analysis_windows`` (ProfilerSteps, else
    the iterations inferred from what repeats, else the GPU span); ``step_us``: step time as the GPU
    sees it (view ``step_time``, summed), the denominator of every "% of step time" (a CPU running
    ahead of the GPU makes the steps longer than their CPU spans); ``idle``: view
    ``gpu_idle_by_cause``; ``gpu_us``: GPU time (kernels + memcpy + memset) of the operations
    launched inside the windows (view ``window_gpu_ops``,
    :mod:`trace_report.analyses.advise.window_gpu`), the denominator of every "% of GPU time", and
    ``trace_gpu_us`` the whole traces' (view ``gpu_time``); ``classes``: GPU time per kernel class
    in the windows, as flags sums it; ``launch``: view ``launch_bound``; ``cpu_split``: table macro
    ``launch_cpu_split_of`` (what the CPU did while the GPU waited for a launch); ``mean_queue``: the busiest
    stream's mean launch-queue length (queue.sql); ``comm_us`` / ``overlap_us``: HTA's overlap of
    the windows' operations (macro ``comp_comm_overlap_of``); ``syncs``: view
    ``host_syncs_by_rank``; ``pageable``: view ``pageable_copies_by_rank``;
    ``data_loading_wall_us``: the breakdown's data_loading region;
    ``startup_us``/``startup_evidence``: one-time work inside the windows (view
    ``startup_in_windows``) and its longest calls; ``cc``/``amd``/``device_inferred``: view
    ``device_arch`` (the evidence when the compute capability was inferred from kernel names);
    ``gpu_work``/``compiled``: GPU time by kernel group and the evidence of torch.compile
    (:func:`trace_report.analyses.advise.gpu_bound.load`); ``ranks``: ranks in the selection."""

    rank: int
    windows: int = 0
    wall_us: float = 0.0
    busy_us: float = 0.0
    step_us: float = 0.0
    basis: str = "ProfilerStep"
    idle: dict = field(default_factory=dict)
    gpu_us: float = 0.0
    trace_gpu_us: float = 0.0
    classes: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    cuda_core_gemm_us: float = 0.0
    cuda_core_gemm_names: str = ""
    launch: dict = field(default_factory=dict)
    cpu_split: dict = field(default_factory=dict)
    culprits: dict = field(default_factory=dict)  # by finding: the operator behind it (view culprit_launches)
    loader: dict = field(default_factory=dict)  # the DataLoader's iterator event and pin_memory operators
    mean_queue: float | None = None
    comm_us: float = 0.0
    overlap_us: float = 0.0
    syncs: dict = field(default_factory=dict)
    pageable: dict = field(default_factory=dict)
    data_loading_wall_us: float = 0.0
    data_loading_window_us: float = 0.0
    cc: float | None = None
    amd: bool = False
    device_inferred: str | None = None
    startup_us: float = 0.0
    startup_evidence: str = ""
    startup_first: str = ""  # the longest one-time call, as startup.evidence_text gives it
    window_us: float = 0.0  # the profiled windows (first to last event of each trace), summed
    window_startup_us: float = 0.0  # the one-time work in them, inside the analysed windows or not
    eligible_ops: int = 0
    hta_idle: dict = field(default_factory=dict)
    anchors: object = None  # advise.anchors.AnchorFacts: the rules of other tools
    gpu_work: Any = None
    compiled: str = ""
    ranks: int = 1
    steady: str = ""  # the windows these facts cover when they are a steady part ("steps 2-6"), else ""
    recorded_us: float | None = None  # view window_recorded: at least the time the windows' events cover

    def unrecorded(self, th: Thresholds) -> bool:
        """Whether the events recorded in the windows cover under ``th.min_recorded_pct`` of their time."""
        return self.recorded_us is not None and self.wall_us > 0 and \
            100.0 * self.recorded_us / self.wall_us < th.min_recorded_pct

    def hta_idle_text(self) -> str:
        """HTA's per-stream idle breakdown summed over the rank's streams (view gpu_idle_breakdown)."""
        total = sum(self.hta_idle.values())
        if total <= 0:
            return ""
        parts = ", ".join(f"{k.replace('_', ' ')} {100 * v / total:.0f}%" for k, v in sorted(self.hta_idle.items()))
        return f"; HTA's idle breakdown over the streams: {parts}"

    @property
    def cc_text(self) -> str:
        """``compute capability 8.0``, with the kernel-name evidence when it was inferred."""
        inferred = f" (no deviceProperties; inferred: {self.device_inferred})" if self.device_inferred else ""
        return f"compute capability {self.cc:.1f}{inferred}"

    @property
    def per(self) -> str:
        """What one window is (view ``iterations``): ``step`` (a ProfilerStep), ``iteration`` (without
        them, inferred from what repeats: basis ``inferred: <name>``) or ``trace`` (neither: the
        trace's GPU span, one window, so a figure "per window" is per trace)."""
        if self.basis == "ProfilerStep":
            return "step"
        return "iteration" if self.basis.startswith(INFERRED) else "trace"

    @property
    def time_word(self) -> str:
        """What "% of ..." is a share of: ``step time``, ``iteration time`` or the GPU span."""
        return PER_TIME[self.per]

    def per_step_ms(self, us: float) -> float:
        return us / max(self.windows, 1) / 1e3

    def pct_of_step(self, us: float) -> float:
        """``us`` in % of step time as the GPU sees it (``step_us``; ``wall_us`` when unknown)."""
        step = self.step_us or self.wall_us
        return 100.0 * us / step if step > 0 else 0.0

    @property
    def util_pct(self) -> float:
        """GPU utilisation (view ``gpu_utilization``): busy time / wall time of the same windows."""
        return 100.0 * self.busy_us / self.wall_us if self.wall_us > 0 else 0.0


_COMPILED_LAUNCH = ("Already compiled: replay the compiled graphs as CUDA graphs, torch.compile(model, "
                    "mode='reduce-overhead'), with static input shapes (no graph breaks in the step: "
                    "TORCH_LOGS=graph_breaks); fused or foreach optimizers, larger batches")


def _startup_advice(f: RankFacts) -> str:
    """:data:`STARTUP_ADVICE`, naming the longest one-time call of this trace when known."""
    first = f.startup_first.split(" (later:")[0]
    return f"Keep the one-time work out of the profiled steps (here {first}): {STARTUP_ADVICE}" if first else \
        STARTUP_ADVICE


def _first(names: str) -> str:
    """The first of the ``, ``-joined kernel names (``cuda_core_gemm_names``) up to its template or
    argument list, or ``none named``."""
    return re.split(r"[<(,]", names.removeprefix("void "), maxsplit=1)[0].strip() if names else "none named"


def ms_text(us: float) -> str:
    """A duration for people, 3-4 significant digits: µs below 1 ms, else ms."""
    if abs(us) < 1000:
        return f"{us:.3g} us"
    ms = us / 1e3
    return f"{ms:,.1f} ms" if ms >= 10 else f"{ms:.3g} ms"


def pct_text(x: float) -> str:
    return f"{x:.3g}%" if x < 10 else f"{x:.1f}%"


def most_text(name: object, count: object, us: object, where: object, what: str = "calls") -> str:
    """``most: NAME (N calls, T) in WHERE``: the name with the most time, its count and time, and
    the user annotation or module it sat in most (left out when none encloses it)."""
    if not name:
        return "most: unknown"
    inside = f" in {str(where)[:80]}" if where else ""
    return f"most: {name} ({int(count or 0)} {what}, {ms_text(float(us or 0.0))} in all){inside}"


class Checker:
    """Runs the checks on one rank's :class:`RankFacts` and collects finding rows."""

    def __init__(self, th: Thresholds):
        self.th = th
        self.rows: list[dict] = []
        self.checked: list[str] = []
        self.notes: list[str] = []
        self.saving_us: dict[tuple[int, str], float] = {}  # unrounded, per rank and finding
        self.steady: dict[int, str] = {}  # per rank: its steady part, where the other findings were computed

    def _add(self, f: RankFacts, finding: str, title: str, value: float, unit: str, threshold: float,
             saving_us: float | None, evidence: str, recommendation: str, link: str) -> None:
        saving = None if saving_us is None else max(0.0, saving_us)
        if f.steady:
            evidence = f"{evidence}; on the steady part: {f.steady}"
        self.saving_us[(f.rank, finding)] = saving or 0.0
        self.rows.append({
            "rank": f.rank, "finding": finding, "title": title, "value": round(float(value), 3), "unit": unit,
            "threshold": threshold,
            "est_saving_ms_per_step": math.nan if saving is None else round(f.per_step_ms(saving), 3),
            "saving_pct_of_step": math.nan if saving is None else round(f.pct_of_step(saving), 3), "per": f.per,
            "evidence": evidence, "recommendation": recommendation, "link": link})

    def _per_step(self, f: RankFacts, us: float) -> str:
        return f"{ms_text(us / max(f.windows, 1))} per {f.per}"

    # --- GPU work that could be cheaper -------------------------------------------------------

    def pageable_memcpy(self, f: RankFacts) -> None:
        us = float(f.pageable.get("pageable_us") or 0.0)
        if f.gpu_us <= 0:
            return
        pct = 100.0 * us / f.gpu_us
        self.checked.append(f"pageable copies {pct_text(pct)} of GPU time")
        if pct <= self.th.pageable_pct:
            return
        n = int(f.pageable.get("copies") or 0)
        p = f.pageable
        most = most_text(p.get("top_name"), p.get("top_copies"), p.get("top_us"), p.get("top_where"), "copies")
        self._add(f, "pageable_memcpy", "Pageable host<->device copies", pct, "% of GPU time", self.th.pageable_pct,
                  us * (1 - 1 / self.th.pinned_speedup),
                  f"{n / max(f.windows, 1):.3g} copies and {self._per_step(f, us)} from or to pageable host memory "
                  f"({most}); {pct_text(f.pct_of_step(us))} of {f.time_word}; "
                  "the driver stages each through a pinned buffer, blocking the CPU, at about half the bandwidth",
                  f"Pin the host memory of the {f.pageable.get('top_name')} copies and copy asynchronously: "
                  "DataLoader(pin_memory=True) (or "
                  "tensor.pin_memory()), then .to(device, non_blocking=True); keep data already on the GPU "
                  "in GPU memory across steps", LINKS["pinned"])

    def exposed_communication(self, f: RankFacts) -> None:
        if f.comm_us <= 0 or f.gpu_us <= 0:
            return
        exposed = max(0.0, f.comm_us - f.overlap_us)
        pct = 100.0 * exposed / f.gpu_us
        self.checked.append(f"exposed communication {pct_text(pct)} of GPU time")
        if pct <= self.th.exposed_comm_pct:
            return
        self._add(f, "exposed_communication", "Communication not overlapped with computation", pct,
                  "% of GPU time", self.th.exposed_comm_pct, exposed,
                  f"communication kernels {ms_text(f.comm_us)} ({pct_text(100 * f.comm_us / f.gpu_us)} of GPU time), "
                  "of which "
                  f"{pct_text(100 * exposed / f.comm_us)} ({self._per_step(f, exposed)}) ran while no computation "
                  "kernel did (trace-report overlap: "
                  f"{pct_text(100 * f.overlap_us / f.comm_us)} overlapped); an exposed collective also includes the "
                  "wait for the slowest rank",
                  "Overlap communication with the backward pass: DDP(bucket_cap_mb=...) smaller buckets start "
                  "all-reduce earlier, gradient_as_bucket_view=True, no_sync() for gradient accumulation"
                  + ("; check for stragglers with trace-report breakdown --stragglers" if f.ranks > 1 else
                     "; profile every rank to tell a slow rank from slow communication"), LINKS["ddp"])

    def layout(self, f: RankFacts) -> None:
        if f.gpu_us <= 0:
            return
        conv = float(f.classes.get("layout_conversion", 0.0))
        pct = 100.0 * conv / f.gpu_us
        self.checked.append(f"layout conversions {pct_text(pct)} of GPU time")
        if pct <= self.th.layout_conversion_pct:
            return
        c = f.culprits.get("layout_conversions", {})
        around = f" around {c['name']}" + (f" in {c['where']}" if c.get("where") else "") if c.get("name") else ""
        launched = most_text(c.get("name"), c.get("n"), c.get("us"), c.get("where"), "kernels")
        self._add(f, "layout_conversions", "NCHW<->NHWC layout conversions", pct, "% of GPU time",
                  self.th.layout_conversion_pct, conv,
                  f"{self._per_step(f, conv)} in cuDNN nchwToNhwc/nhwcToNchw (or MIOpen batched_transpose) "
                  f"kernels around NHWC tensor-core kernels ({launched} launched them)",
                  f"Keep activations in NHWC{around}: model.to(memory_format=torch.channels_last) and the same for "
                  "the inputs", LINKS["layout"])

    def tensor_cores(self, f: RankFacts) -> None:
        """``fp32_without_tf32`` on NVIDIA sm80+ (GEMM/convolution kernels on CUDA cores), else
        ``no_tensor_cores`` (cc >= 7.0, no tensor-core kernel while GEMM/conv kernels or
        tensor-core-eligible operators exist; tb-profiler's rule)."""
        cc = f.cc
        if cc is None or math.isnan(cc) or cc < self.th.min_tensor_core_cc or f.gpu_us <= 0:
            return
        if cc >= self.th.tf32_cc and not f.amd:
            us = f.cuda_core_gemm_us
            pct = 100.0 * us / f.gpu_us
            self.checked.append(f"FP32 GEMM/convolution on CUDA cores {pct_text(pct)} of GPU time")
            if pct > self.th.fp32_gemm_pct:
                self._add(f, "fp32_without_tf32", "FP32 GEMM/convolution without TF32", pct, "% of GPU time",
                          self.th.fp32_gemm_pct, us * (1 - 1 / self.th.tensor_core_speedup),
                          f"{f.cc_text}; {self._per_step(f, us)} in GEMM/convolution kernels that "
                          f"run on CUDA cores ({f.cuda_core_gemm_names})",
                          f"Allow TF32 for these kernels ({_first(f.cuda_core_gemm_names)}): "
                          "torch.backends.cuda.matmul.allow_tf32 = True (or "
                          "torch.set_float32_matmul_precision('high')) and torch.backends.cudnn.allow_tf32 = True; "
                          "or autocast to bf16", LINKS["tf32"])
            return
        tc = float(f.classes.get("tensor_core", 0.0))
        eligible = float(f.classes.get("gemm", 0.0)) + float(f.classes.get("convolution", 0.0))
        self.checked.append(f"tensor-core time {ms_text(tc)}")
        if tc == 0 and (eligible > 0 or f.eligible_ops > 0):
            pct = 100.0 * eligible / f.gpu_us
            self._add(f, "no_tensor_cores", "No tensor-core (matrix-core) kernels", pct,
                      "% of GPU time in GEMM/conv kernels", 0.0, eligible * (1 - 1 / self.th.tensor_core_speedup),
                      f"{f.cc_text}; {self._per_step(f, eligible)} GEMM/convolution kernel time "
                      f"({f.eligible_ops} tensor-core-eligible operator calls), none on tensor cores",
                      f"Use automatic mixed precision for the GEMMs/convolutions ({_first(f.cuda_core_gemm_names)}): "
                      "torch.autocast(device_type='cuda', dtype=torch.float16) with "
                      "a GradScaler (bf16 where supported)", LINKS["amp"])

    # --- what the GPU waits for ----------------------------------------------------------------

    def data_loading(self, f: RankFacts) -> None:
        if f.wall_us <= 0:
            return
        window = f.data_loading_window_us or f.wall_us
        pct = 100.0 * f.data_loading_wall_us / window if f.data_loading_wall_us and window > 0 else 0.0
        idle = float(f.idle.get("data_loading_idle_us") or 0.0)
        where = "the span" if f.per == "trace" else f.time_word
        self.checked.append(f"data loading {pct_text(pct)} of {where}")
        if pct <= self.th.data_loading_pct:
            return
        seen, how = loader_text(f.loader)
        self._add(f, "data_loading", "Waiting for the input pipeline", pct,
                  "% of the trace's span" if f.per == "trace" else f"% of {f.time_word}", self.th.data_loading_pct,
                  idle, f"{self._per_step(f, f.data_loading_wall_us)} in the DataLoader (enumerate(DataLoader)#, "
                  f"__next__){seen}; the GPU was idle {ms_text(idle / max(f.windows, 1))} of it",
                  how, LINKS["data"])

    def host_sync(self, f: RankFacts) -> None:
        idle = float(f.idle.get("host_sync_idle_us") or 0.0)
        calls = int(f.syncs.get("calls") or 0)
        if f.wall_us <= 0 or not calls:
            return
        pct = f.pct_of_step(idle)
        self.checked.append(f"GPU idle after host syncs {pct_text(pct)} of {f.time_word}")
        if pct <= self.th.min_saving_pct:
            return
        blocked = float(f.syncs.get("blocked_us") or 0.0)
        y = f.syncs
        most = most_text(y.get("top_call"), y.get("top_calls"), y.get("top_us"), y.get("top_where"))
        self._add(f, "host_sync", "CPU-GPU synchronisation in the loop", pct, f"% of {f.time_word}",
                  self.th.min_saving_pct, idle,
                  f"{calls / max(f.windows, 1):.3g} synchronising calls per "
                  f"{f.per} ({most}) blocked "
                  f"the CPU {pct_text(f.pct_of_step(blocked))} of {f.time_word}; "
                  f"{int(f.idle.get('host_sync_periods') or 0)} times the GPU ran out of work during one and stayed "
                  f"idle {self._per_step(f, idle)} until the CPU launched again",
                  f"Remove synchronisation from the loop (here {f.syncs.get('top_call')}): no loss.item(), .cpu(), "
                  "print(tensor) or "
                  "torch.cuda.synchronize() per step (accumulate on the GPU, read every N steps); "
                  "non_blocking copies to pinned memory", LINKS["sync"])

    def launch_bound(self, f: RankFacts) -> None:
        idle = float(f.idle.get("launch_idle_us") or 0.0)
        ops = int(f.launch.get("gpu_ops") or 0)
        if f.wall_us <= 0 or not ops:
            return
        pct = f.pct_of_step(idle)
        short = float(f.launch.get("shorter_pct") or 0.0)
        queue = f.mean_queue
        deep = queue is not None and queue >= self.th.launch_max_mean_queue
        mean = queue if queue is None else f"{queue:.3g}"
        self.checked.append(f"GPU waiting for launches {pct_text(pct)} of {f.time_word}, {short:.0f}% of GPU ops "
                            f"shorter than their launch, mean launch queue {mean}")
        if pct <= self.th.min_saving_pct:
            return
        if deep:
            if not self._cpu_work(f, queue):
                self.notes.append(f"rank {f.rank}: the GPU waited for the CPU {pct_text(pct)} of {f.time_word} "
                                  f"({self._per_step(f, idle)}), yet its launch queue is deep (mean {queue:.3g} "
                                  "operations: the CPU is ahead most of the time): not launch-bound; trace-report "
                                  "breakdown shows the regions where it waits")
            return
        evidence = (f"the GPU was idle {self._per_step(f, idle)} with no work queued, until the next launch "
                    f"({int(f.idle.get('launch_periods') or 0)} times); mean launch queue "
                    f"{queue if queue is None else f'{queue:.3g}'} operations; {ops / max(f.windows, 1):,.0f} GPU ops "
                    f"per {f.per}, {short:.0f}% shorter than their launch (median GPU op "
                    f"{f.launch.get('median_gpu_us') or 0:.3g} us vs launch call "
                    f"{f.launch.get('median_launch_us') or 0:.3g} us){f.hta_idle_text()}")
        graph_ops = int(f.launch.get("graph_ops") or 0)
        if graph_ops:
            evidence += (f"; {graph_ops / max(f.windows, 1):,.0f} more GPU ops per {f.per} replayed from CUDA/HIP "
                         "graphs (not counted above)")
        if f.compiled:
            evidence += f"; the run is compiled ({f.compiled}): the CPU time is Inductor's launch path"
        share, split = self._launch_split(f)
        if share >= self.th.launch_path_pct:
            how = ("Capture more of the step in CUDA graphs (the optimizer step, the loss, the input copy), "
                   "fused or foreach optimizers, larger batches" if graph_ops else _COMPILED_LAUNCH if f.compiled else
                   "Cut CPU time per GPU operation: CUDA graphs or torch.compile(mode='reduce-overhead'), fused "
                   "or foreach optimizers (foreach=True / fused=True), zero_grad(set_to_none=True), larger batches")
            c = f.culprits.get("launch_bound", {})
            if c.get("name"):
                most = most_text(c["name"], c.get("n"), c.get("us"), c.get("where"), "launches")
                evidence += f"; by launch-call time, {most}"
                how += f" (start with {c['name']}" + (f" in {c['where']})" if c.get("where") else ")")
            self._add(f, "launch_bound", "The GPU waits for kernel launches", pct, f"% of {f.time_word}",
                      self.th.min_saving_pct, idle, f"{evidence}; {split}", how, LINKS["graphs"])
        else:
            top = f.cpu_split.get("top_name")
            self._add(f, "cpu_bound", "The GPU waits for the CPU", pct, f"% of {f.time_word}",
                      self.th.min_saving_pct, idle,
                      f"{evidence}; {split}: work on the CPU of its own, not the cost of launching",
                      f"Cut the CPU work the GPU waits on, here {top}: "
                      + CPU_WORK.get(str(f.cpu_split.get("top_kind")), CPU_WORK["python"])
                      + ("; then " + _COMPILED_LAUNCH[0].lower() + _COMPILED_LAUNCH[1:] if f.compiled and not graph_ops
                         else ""),
                      LINKS["graphs"] if f.compiled else LINKS["tuning"])

    def _launch_split(self, f: RankFacts) -> tuple[float, str]:
        """The share (%) of the CPU time the GPU waited on that went to issuing operations (view
        ``launch_cpu_split_of``: launch calls, and dispatch of at most ``dispatch_us`` per event),
        100 when unknown, and the evidence sentence naming the biggest other item."""
        s = f.cpu_split
        cpu = float(s.get("cpu_us") or 0.0)
        if cpu <= 0:
            return 100.0, "what the CPU did not recorded"
        launch, dispatch = float(s.get("launch_us") or 0.0), float(s.get("dispatch_us") or 0.0)
        share = 100.0 * (launch + dispatch) / cpu
        parts = ", ".join(f"{k} {pct_text(100.0 * float(s.get(c) or 0.0) / cpu)}" for k, c in (
            ("operators' own work", "op_us"), ("other runtime calls", "runtime_us"),
            ("Python or other host code", "python_us")))
        text = (f"of the CPU time the GPU waited on (the launching thread, {self._per_step(f, cpu)}), "
                f"{pct_text(share)} went to issuing operations (launch calls {pct_text(100.0 * launch / cpu)}, "
                f"dispatch of <= {self.th.dispatch_us:g} us per event {pct_text(100.0 * dispatch / cpu)}), "
                f"the rest to {parts}")
        if s.get("top_name"):
            text += f" ({most_text(s['top_name'], s.get('top_n'), s.get('top_us'), None, 'times')})"
        return share, text

    def _cpu_work(self, f: RankFacts, queue: float) -> bool:
        """``cpu_bound`` from the GPU idle with nothing queued and no launch call under way (view
        ``gpu_idle_by_cause``, ``cpu_wait_idle_us``): the CPU was running operators, Python or other
        host work, and the GPU could only wait. A launch queue that is deep elsewhere (the CPU ahead
        while it launches) does not shorten that time, so it is CPU-bound time whatever the queue's
        mean; it is what a queue-deep trace's launch idle is reported as. Whether it fired."""
        us = float(f.idle.get("cpu_wait_idle_us") or 0.0)
        pct = f.pct_of_step(us)
        if pct <= self.th.min_saving_pct:
            return False
        n = int(f.idle.get("cpu_wait_periods") or 0)
        longest = float(f.idle.get("cpu_wait_max_us") or 0.0)
        self._add(f, "cpu_bound", "The GPU waits for the CPU", pct, f"% of {f.time_word}", self.th.min_saving_pct, us,
                  f"the GPU was idle {self._per_step(f, us)} with no work queued and no launch call under way "
                  f"({n} times, the longest {ms_text(longest)}): the CPU was running operators, Python or other "
                  f"host work before it launched the next GPU operation; elsewhere the launch queue is deep (mean "
                  f"{queue:.3g} operations), so launching is not what it waits for",
                  "Find the CPU work before the GPU's next operation (trace-report ops, the CPU rows of the timeline; "
                  "py-spy): move preprocessing off the critical path (DataLoader workers, a separate thread or "
                  "the GPU), overlap it with the previous step's GPU work", LINKS["tuning"])
        return True


    def startup(self, f: RankFacts) -> None:
        """One-time work (context creation, first calls, compilation, module loading) inside the
        windows: the profile measured start-up rather than steady steps."""
        if f.wall_us <= 0:
            return
        if f.startup_us <= 0:
            self._startup_before(f)
            return
        pct = f.pct_of_step(f.startup_us)
        where = f.time_word
        self.checked.append(f"one-time start-up work {pct_text(pct)} of {where}")
        if pct <= self.th.min_saving_pct:
            return
        self._add(f, "startup_in_window", "One-time start-up work inside the profiled window", pct, f"% of {where}",
                  self.th.min_saving_pct, f.startup_us,
                  f"{ms_text(f.startup_us)} of the {ms_text(f.wall_us)} analysed is work a steady step never repeats: "
                  f"{f.startup_evidence}; " + (f"the window-based findings are computed on the steady part: {s}"
                                               if (s := self.steady.get(f.rank)) else
                                               "the figures of the other findings include it"),
                  _startup_advice(f), LINKS["schedule"])

    def _startup_before(self, f: RankFacts) -> None:
        """One-time work outside every analysed window (before the first inferred iteration):
        the steps are steady, but the profiled window mostly measured start-up. No per-step saving
        (NaN); listed first when it is most of the window."""
        if f.window_us <= 0 or f.window_startup_us <= 0:
            return
        pct = 100.0 * f.window_startup_us / f.window_us
        self.checked.append(f"one-time start-up work {pct_text(pct)} of the profiled window, outside the {f.per}s")
        if pct <= self.th.startup_dominant_pct:
            return
        self._add(f, "startup_in_window", "One-time start-up work inside the profiled window", pct,
                  "% of the profiled window", self.th.startup_dominant_pct, None,
                  f"{ms_text(f.window_startup_us)} of the {ms_text(f.window_us)} profiled is work a steady "
                  f"{f.per} never repeats, all of it before the first {f.per}: {f.startup_evidence}; the other "
                  f"findings are computed on the {f.windows} {f.per}s after it",
                  _startup_advice(f), LINKS["schedule"])

    def utilization(self, f: RankFacts, explained_us: float) -> None:
        """Low utilisation as a symptom: its saving is the idle time no other finding explains."""
        if f.wall_us <= 0 or not f.idle:
            return
        busy_pct = f.util_pct
        basis = f.time_word
        self.checked.append(f"GPU busy {pct_text(busy_pct)} of {basis}")
        if busy_pct >= self.th.low_utilization_pct:
            return
        if f.unrecorded(self.th):
            self.notes.append(f"rank {f.rank}: the events recorded in the {f.per}s (CPU operators, runtime calls, "
                              f"GPU operations) cover at most {ms_text(f.recorded_us or 0.0)} of their "
                              f"{ms_text(f.wall_us)}: the profile shows nothing of the rest, so the GPU's idle time "
                              "has no cause to report; utilisation not judged")
            return
        idle = float(f.idle.get("idle_us") or 0.0)
        rest = max(0.0, idle - explained_us)
        causes = ", ".join(f"{k} {ms_text(float(f.idle.get(c) or 0) / max(f.windows, 1))}" for k, c in (
            ("data loading", "data_loading_idle_us"), ("after host syncs", "host_sync_idle_us"),
            ("waiting for launches", "launch_idle_us"), ("other", "other_idle_us")))
        self._add(f, "low_gpu_utilization", "Low GPU utilisation", busy_pct, f"% of {basis} GPU busy",
                  self.th.low_utilization_pct, rest,
                  f"the GPU ran kernels, copies or memsets {pct_text(busy_pct)} of {basis}; its idle time per "
                  f"{f.per}: {causes}{f.hta_idle_text()}; the saving "
                  "counts the idle time no other finding explains",
                  "Find what the GPU waits for: trace-report breakdown (idle_us per region), trace-report hta idle, "
                  "the timeline of one step (trace-report report); then raise the batch size", LINKS["tuning"])

    def memory(self, f: RankFacts, peaks: pd.DataFrame) -> None:
        for p in peaks.itertuples(index=False):
            if not p.capacity_bytes or math.isnan(p.allocated_bytes):
                continue
            pct = 100.0 * p.allocated_bytes / p.capacity_bytes
            self.checked.append(f"GPU{p.device} peak memory {pct_text(pct)} of capacity")
            if pct > self.th.memory_pct:
                self._add(f, "memory_near_capacity", "GPU memory near capacity", pct, "% of device memory",
                          self.th.memory_pct, None,
                          f"GPU{p.device}: peak allocated {p.allocated_bytes / 2**30:,.2f} GiB of "
                          f"{p.capacity_bytes / 2**30:,.2f} GiB",
                          "Free memory for larger batches: activation checkpointing (torch.utils.checkpoint), "
                          "mixed precision, smaller activations", LINKS["memory"])
