"""Recommendations with the measured numbers behind them (docs/analysis.md).

Each check measures a value per rank and compares it with a threshold (:class:`Thresholds`, the
one place defaults live). A finding row is emitted only when the threshold is crossed; when none
is, the result has no rows and a note lists what was checked. The checks and their sources:

- ``data_loading``: data-loading share of step wall time > 5% (torch-tb-profiler
  ``RunProfileData.analyze``: DataLoader > 5% of step time).
- ``no_tensor_cores``: compute capability >= 7.0, tensor-core kernel time == 0 while GEMM or
  convolution kernels (or tensor-core-eligible operators, tb-profiler ``TC_OP_Allowlist``) exist
  (tb-profiler: ``computeMajor >= 7 and tc_used_ratio == 0 and tc_eligible_ops_kernel_ratio > 0``).
- ``layout_conversions``: cuDNN NCHW<->NHWC conversion kernels > 2% of GPU time (docs/analysis.md).
- ``launch_bound``: >= 100 GPU operations per step, >= 50% of them shorter than the CPU call that
  launched them (HTA ``get_cuda_kernel_launch_stats``: kernels + memcpy + memset shorter than their
  launch; view ``launch_bound``, which leaves out operations replayed from CUDA graphs: one
  ``cudaGraphLaunch`` serves them all), and the GPU busy < 80% of step time.
- ``low_gpu_utilization``: GPU busy < 50% of step time (tb-profiler: utilization < 0.5), or of the
  first-to-last GPU op span when a trace has no ProfilerStep (view ``gpu_utilization``, the
  figure the report headline shows).
- ``memory_near_capacity``: peak ``Total Allocated`` of ``[memory]`` events > 90% of the device's
  ``totalGlobalMem`` (tb-profiler memory recommendation). Needs ``[memory]`` instant events in
  ``events``; silent without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from trace_report.analyses.kernel_classes import FlagsOptions, flags
from trace_report.analyses.regions import BreakdownOptions, breakdown, selected_traces, trace_ids
from trace_report.analyses.utilization import gpu_utilization, launch_stats
from trace_report.store.tracedb import TraceDB

ADVICE_COLUMNS = ["rank", "finding", "value", "threshold", "unit", "evidence", "recommendation"]

# Operators whose kernels could use tensor cores (torch-tb-profiler TC_OP_Allowlist, abridged).
TC_ELIGIBLE_OPS = (
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
    "aten::cudnn_convolution", "aten::conv_transpose2d", "aten::addmm", "aten::addmv", "aten::matmul",
    "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
)


@dataclass(frozen=True)
class Thresholds:
    """Thresholds of the checks (percentages are 0-100)."""

    data_loading_pct: float = 5.0
    min_tensor_core_cc: float = 7.0
    layout_conversion_pct: float = 2.0
    launch_bound_min_kernels_per_step: float = 100.0
    launch_bound_short_pct: float = 50.0
    launch_bound_max_busy_pct: float = 80.0
    low_utilization_pct: float = 50.0
    memory_pct: float = 90.0


@dataclass
class AdviceResult:
    """``frame``: findings (:data:`ADVICE_COLUMNS`); ``notes``: what was checked or skipped."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)



def _dur(us: float) -> str:
    """A duration for people: µs below 1 ms, else ms."""
    return f"{us:,.1f} us" if abs(us) < 1000 else f"{us / 1e3:,.1f} ms"


def _finding(rank: object, finding: str, value: float, threshold: float, unit: str, evidence: str,
             recommendation: str) -> dict:
    return {"rank": rank, "finding": finding, "value": round(float(value), 3), "threshold": threshold,
            "unit": unit, "evidence": evidence, "recommendation": recommendation}


def memory_peaks(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pd.DataFrame:
    """Peak ``Total Allocated`` / ``Total Reserved`` bytes per (trace, GPU) from ``[memory]`` events,
    with the device's ``totalGlobalMem`` from the trace metadata (``deviceProperties``)."""
    peaks = con.execute(
        "SELECT trace_id, CAST(json_extract(args, '$.\"Device Id\"') AS BIGINT) AS device, "
        "       max(CAST(json_extract(args, '$.\"Total Allocated\"') AS DOUBLE)) AS allocated_bytes, "
        "       max(CAST(json_extract(args, '$.\"Total Reserved\"') AS DOUBLE)) AS reserved_bytes "
        "FROM events WHERE name = '[memory]' AND list_contains($ids, trace_id) "
        "  AND CAST(json_extract(args, '$.\"Device Id\"') AS BIGINT) >= 0 GROUP BY ALL",
        {"ids": ids}).df()
    meta = dict(con.execute("SELECT trace_id, metadata FROM traces").fetchall())
    peaks["capacity_bytes"] = [_capacity(meta.get(t), d) for t, d in zip(peaks["trace_id"], peaks["device"],
                                                                         strict=True)]
    return peaks


def _capacity(metadata: str | None, device: int) -> float | None:
    try:
        props = json.loads(metadata or "{}").get("deviceProperties") or []
    except (TypeError, ValueError):
        return None
    for p in props:
        if p.get("id") == device and p.get("totalGlobalMem"):
            return float(p["totalGlobalMem"])
    return None


def _tc_eligible_ops(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, int]:
    rows = con.execute("SELECT trace_id, count(*) FROM cpu_ops WHERE list_contains($ids, trace_id) "
                       "AND list_contains($ops, name) GROUP BY 1", {"ids": ids, "ops": list(TC_ELIGIBLE_OPS)})
    return dict(rows.fetchall())


class _Checker:
    """Runs every check for one rank and collects findings and notes."""

    def __init__(self, th: Thresholds):
        self.th = th
        self.rows: list[dict] = []
        self.checked: list[str] = []

    def data_loading(self, rank: object, bd: pd.DataFrame) -> None:
        wall = bd["wall_us"].sum()
        dl = bd.loc[bd["region"] == "data_loading", "wall_us"].sum()
        if wall <= 0:
            return
        pct = 100.0 * dl / wall
        self.checked.append(f"data loading {pct:.1f}% of step time")
        if pct > self.th.data_loading_pct:
            self.rows.append(_finding(
                rank, "data_loading", pct, self.th.data_loading_pct, "% of step time",
                f"{_dur(dl)} of {_dur(wall)} step time is data loading",
                "Set DataLoader(num_workers>0, pin_memory=True, persistent_workers=True) and prefetch "
                "the next batch; see https://pytorch.org/docs/stable/data.html"))

    def tensor_cores(self, rank: object, cc: float | None, summary: pd.Series, gpu_us: float,
                     eligible_ops: int) -> None:
        if cc is None or np.isnan(cc) or cc < self.th.min_tensor_core_cc or gpu_us <= 0:
            return
        tc = summary.get("tensor_core", 0.0)
        eligible = summary.get("gemm", 0.0) + summary.get("convolution", 0.0)
        self.checked.append(f"tensor-core time {_dur(tc)}")
        if tc == 0 and (eligible > 0 or eligible_ops > 0):
            pct = 100.0 * eligible / gpu_us
            how = ("enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = "
                   "True) or autocast to bf16/fp16" if cc >= 8.0 else "use automatic mixed precision "
                   "(torch.autocast with float16); TF32 needs compute capability 8.0")
            self.rows.append(_finding(
                rank, "no_tensor_cores", pct, 0.0, "% of GPU time in GEMM/conv kernels without tensor cores",
                f"compute capability {cc:.1f}; {_dur(eligible)} GEMM/convolution kernel time "
                f"({eligible_ops} tensor-core-eligible operator calls), none on tensor cores",
                f"Use tensor cores: {how}; see https://pytorch.org/docs/stable/amp.html"))

    def layout(self, rank: object, summary: pd.Series, gpu_us: float) -> None:
        if gpu_us <= 0:
            return
        conv = summary.get("layout_conversion", 0.0)
        pct = 100.0 * conv / gpu_us
        self.checked.append(f"layout conversions {pct:.1f}% of GPU time")
        if pct > self.th.layout_conversion_pct:
            self.rows.append(_finding(
                rank, "layout_conversions", pct, self.th.layout_conversion_pct, "% of GPU time",
                f"{_dur(conv)} of {_dur(gpu_us)} GPU time in cuDNN nchwToNhwc/nhwcToNchw kernels",
                "Keep activations in NHWC: model.to(memory_format=torch.channels_last) and the same for "
                "inputs; see https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html"))

    def launch_bound(self, rank: object, ls: pd.DataFrame, busy_pct: float | None) -> None:
        kernels, steps = ls["gpu_ops"].sum(), ls["steps"].sum()
        if not kernels or not steps or busy_pct is None:
            return
        per_step = kernels / steps
        short = 100.0 * ls["shorter_than_launch"].sum() / kernels
        graph = int(ls["graph_ops"].sum())
        graphs = f" ({graph:,} more replayed from CUDA graphs: none has a launch of its own)" if graph else ""
        self.checked.append(f"{per_step:,.0f} GPU ops per step, {short:.0f}% shorter than their launch{graphs}")
        th = self.th
        if per_step >= th.launch_bound_min_kernels_per_step and short >= th.launch_bound_short_pct \
                and busy_pct < th.launch_bound_max_busy_pct:
            self.rows.append(_finding(
                rank, "launch_bound", short, th.launch_bound_short_pct,
                "% of GPU ops (kernels, memcpy, memset) shorter than their launch",
                f"{per_step:,.0f} GPU ops per step{graphs}; median GPU op {ls['median_gpu_us'].median():.1f} us "
                f"vs median launch call {ls['median_launch_us'].median():.1f} us; GPU busy {busy_pct:.1f}% of "
                "step time",
                "Cut launch overhead: CUDA graphs or torch.compile(mode='reduce-overhead'), fused/foreach "
                "optimizers, fewer and larger kernels (bigger batches)"))

    def utilization(self, rank: object, busy_pct: float | None, basis: str) -> None:
        if busy_pct is None:
            return
        self.checked.append(f"GPU busy {busy_pct:.1f}% of {basis}")
        if busy_pct < self.th.low_utilization_pct:
            self.rows.append(_finding(
                rank, "low_gpu_utilization", busy_pct, self.th.low_utilization_pct, f"% of {basis} GPU busy",
                f"the GPU ran kernels, copies or memsets {busy_pct:.1f}% of {basis}",
                "Find what the GPU waits for (trace-report breakdown: idle_us per region; trace-report hta "
                "idle): input pipeline, host syncs (.item(), .cpu()), communication; then raise the batch size"))

    def memory(self, rank: object, peaks: pd.DataFrame) -> None:
        for p in peaks.itertuples(index=False):
            if not p.capacity_bytes or np.isnan(p.allocated_bytes):
                continue
            pct = 100.0 * p.allocated_bytes / p.capacity_bytes
            self.checked.append(f"GPU{p.device} peak memory {pct:.1f}% of capacity")
            if pct > self.th.memory_pct:
                self.rows.append(_finding(
                    rank, "memory_near_capacity", pct, self.th.memory_pct, "% of device memory",
                    f"GPU{p.device}: peak allocated {p.allocated_bytes / 2**30:,.2f} GiB of "
                    f"{p.capacity_bytes / 2**30:,.2f} GiB",
                    "Free memory for larger batches: activation checkpointing (torch.utils.checkpoint), "
                    "mixed precision, smaller activations"))


def _busy_pct(util: pd.DataFrame) -> tuple[float | None, str]:
    """GPU busy % of step time (view ``gpu_utilization_by_rank``), or of the GPU op span when the
    rank's traces have no steps; None without GPU operations."""
    if util.empty or util["gpu_util_pct"].isna().all():
        return None, ""
    row = util.iloc[0]
    return float(row["gpu_util_pct"]), ("step time" if row["basis"] == "ProfilerStep" else
                                        "the first-to-last GPU op span")


# For each finding, which value is the worst across ranks.
_WORST_IS_LOW = {"low_gpu_utilization"}


def _across_ranks(frame: pd.DataFrame, n_ranks: int) -> pd.DataFrame:
    """One row per finding: the ranks it fired on and the worst rank's value and evidence."""
    if frame.empty or n_ranks <= 1:
        return frame
    rows = []
    for finding, g in frame.groupby("finding", sort=False):
        worst = g.loc[g["value"].idxmin() if finding in _WORST_IS_LOW else g["value"].idxmax()]
        row = worst.to_dict()
        row["rank"] = [int(r) for r in g["rank"]]
        row["evidence"] = f"{len(g)} of {n_ranks} ranks; worst rank {int(worst['rank'])}: {worst['evidence']}"
        rows.append(row)
    return pd.DataFrame(rows, columns=ADVICE_COLUMNS).rename(columns={"rank": "ranks"})


def advise(db: TraceDB, *, rank: int | None = None, by_rank: bool = False,
           thresholds: Thresholds | None = None) -> AdviceResult:
    """Findings (columns :data:`ADVICE_COLUMNS`; ``value`` in ``unit``, compared with ``threshold``).

    With several ranks and not ``by_rank``, one row per finding: ``ranks`` lists the ranks it
    fired on and ``value``/``evidence`` are the worst rank's. No rows and a note when nothing
    crosses a threshold.
    """
    con = db.con
    th = thresholds or Thresholds()
    traces = selected_traces(con, rank)
    bd = breakdown(db, BreakdownOptions(rank=rank, by_rank=True)).frame
    fl = flags(db, FlagsOptions(rank=rank, by_rank=True)).summary
    ids = trace_ids(traces)
    launches = launch_stats(db, ids).merge(traces[["trace_id", "rank"]], on="trace_id")
    util = gpu_utilization(db, rank)
    peaks = memory_peaks(con, ids).merge(traces[["trace_id", "rank"]], on="trace_id")
    cc = con.execute("SELECT rank, max(try_cast(compute_capability AS DOUBLE)) FROM traces GROUP BY 1").fetchall()
    cc_by_rank, eligible = dict(cc), _tc_eligible_ops(con, ids)
    steps = set(con.execute("SELECT DISTINCT trace_id FROM steps").fetchall())
    check = _Checker(th)
    notes: list[str] = []
    for r in sorted(traces["rank"].dropna().unique()):
        mine = traces[traces["rank"] == r]
        rbd = bd[bd["rank"] == r]
        rfl = fl[fl["rank"] == r]
        summary = rfl.set_index("class")["total_us"] if len(rfl) else pd.Series(dtype=float)
        gpu_us = float(rfl["gpu_us"].iloc[0]) if len(rfl) else 0.0
        has_steps = any((t,) in steps for t in mine["trace_id"])
        busy, basis = _busy_pct(util[util["rank"] == r])
        if has_steps:
            check.data_loading(int(r), rbd)
        check.tensor_cores(int(r), cc_by_rank.get(r), summary, gpu_us,
                           sum(eligible.get(int(t), 0) for t in mine["trace_id"]))
        check.layout(int(r), summary, gpu_us)
        check.launch_bound(int(r), launches[launches["rank"] == r], busy if has_steps else None)
        check.utilization(int(r), busy, basis)
        check.memory(int(r), peaks[peaks["rank"] == r])
        if gpu_us <= 0:
            notes.append(f"rank {int(r)}: no GPU activity recorded; GPU checks skipped")
        elif cc_by_rank.get(r) is None or np.isnan(cc_by_rank.get(r)):
            notes.append(f"rank {int(r)}: compute capability unknown (no deviceProperties); tensor-core check skipped")
    if fl["gpu_us"].fillna(0).gt(0).any() and peaks.empty:
        notes.append("memory check skipped: no [memory] events (profile_memory=True) in the database")
    frame = pd.DataFrame(check.rows, columns=ADVICE_COLUMNS)
    if not by_rank:
        frame = _across_ranks(frame, traces["rank"].nunique())
    if frame.empty:
        checked = "; ".join(dict.fromkeys(check.checked)) or "nothing measurable"
        notes.append(f"no findings: every check is within its threshold ({checked})")
    return AdviceResult(frame, notes)
