"""Differences between two traces, runs or databases (A, then B): per kernel or per region; the
computation of ``trace-report compare`` (declared in :mod:`trace_report.analyses.compare`).

- ``by='kernel'``: every GPU operation name (kernels, memcpy, memset; what HTA's
  ``TraceDiff.compare_traces`` counts with ``DeviceType.GPU``) with its count and total time
  (sum of ``dur``, µs) on each side, the differences B - A, each side's share of its GPU time
  (%) and a status: ``new`` (only in B), ``vanished`` (only in A), ``more``/``less`` (more or
  less time in B), ``same``. When neither side ran GPU work, CPU operators are compared by
  self time instead (as ``top-kernels`` ranks them), with a note.
- ``by='region'``: the step breakdown (:func:`~trace_report.analyses.common.breakdown_regions.step_breakdown`, summed
  over steps) per region: wall time, GPU kernel time and kernels on each side and B - A.

Rows are sorted by impact: the absolute time difference ``|diff_us|`` (kernels: total time;
regions: wall time), largest first. ``per_step`` divides every count and time by the number of
ProfilerSteps of its side (for runs that recorded different numbers of steps); regions are
compared per step unless ``per_step=False``, and a note says so. ``match='short'`` pairs kernels
by :func:`~trace_report.formats.names.short_kernel_name` (argument lists and nested templates
elided), so that kernels that only differ by PyTorch version (``TensorIterator&`` against
``TensorIteratorBase&``) are one row, not a vanished and a new one.

The headline ``compare`` prints first (step time and GPU time, A -> B) and the rules of
``compare --fail-if`` are in :mod:`~trace_report.analyses.compare.gate`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from trace_report.analyses.common.breakdown_regions import BreakdownResult, BreakdownSelection, step_breakdown
from trace_report.analyses.common.cpu_self_time import cpu_self_time_table
from trace_report.analyses.common.regions import REGIONS
from trace_report.analyses.compare import CompareOptions
from trace_report.errors import InputError, UsageError
from trace_report.formats.names import short_kernel_name
from trace_report.store.tracedb import TraceDB

KERNEL_COLUMNS = ["name", "status", "a_count", "b_count", "diff_count", "a_total_us", "b_total_us", "diff_us",
                  "a_pct", "b_pct", "diff_pct", "ratio", "kind"]
REGION_COLUMNS = ["region", "status", "a_wall_us", "b_wall_us", "diff_us", "a_gpu_us", "b_gpu_us", "diff_gpu_us",
                  "a_kernels", "b_kernels", "a_wall_pct", "b_wall_pct", "diff_wall_pct"]
LEVELS = ("kernel", "region")
MATCHES = ("exact", "short")


@dataclass
class CompareResult:
    """Rows (:data:`KERNEL_COLUMNS` or :data:`REGION_COLUMNS`), the sides' step counts, notes;
    ``per_step``: the counts and times are per step of each side (else totals over all steps)."""

    frame: pd.DataFrame
    a_steps: int = 0
    b_steps: int = 0
    notes: list[str] = field(default_factory=list)
    per_step: bool = False



def check_side(con: duckdb.DuckDBPyConnection, rank: int | None, side: str) -> None:
    """Raise :class:`InputError` when a side has no traces, :class:`UsageError` for an unknown rank."""
    ranks = [r for (r,) in con.execute("SELECT DISTINCT rank FROM traces ORDER BY 1").fetchall()]
    if not ranks:
        raise InputError(f"{side}: no traces")
    if rank is not None and rank not in ranks:
        raise UsageError(f"{side}: no trace of rank {rank} (ranks: {', '.join(map(str, ranks))})")


def step_count(db: TraceDB, rank: int | None = None) -> int:
    """Number of ProfilerStep windows over the selected traces (each trace without steps counts 1)."""
    row = db.con.execute(
        "SELECT count(*) FROM step_windows JOIN traces USING (trace_id) WHERE $rank IS NULL OR rank = $rank",
        {"rank": rank}).fetchall()
    return int(row[0][0])


_IN_STEP = """
    EXISTS (SELECT 1 FROM kernel_launches l JOIN events r ON r.trace_id = l.trace_id AND r.event_id = l.launch_event_id
            JOIN steps s ON s.trace_id = r.trace_id AND r.ts_us >= s.ts_us AND r.ts_us < s.end_us
            WHERE l.trace_id = g.trace_id AND l.correlation = g.correlation)"""


def gpu_op_totals(db: TraceDB, rank: int | None = None, *, steps_only: bool = False) -> pd.DataFrame:
    """Per GPU operation name (kernels, memcpy, memset): ``count`` and ``total_us`` (sum of
    ``dur``); ``steps_only``: only those launched inside a ProfilerStep (see :class:`CompareOptions`)."""
    where = f"($rank IS NULL OR rank = $rank){' AND ' + _IN_STEP if steps_only else ''}"
    return db.con.execute(
        "SELECT name, count(*) AS count, sum(dur_us) AS total_us, 'gpu_op' AS kind "
        f"FROM gpu_ops g JOIN traces USING (trace_id) WHERE {where} GROUP BY name", {"rank": rank}).df()


def _cpu_totals(db: TraceDB, rank: int | None) -> pd.DataFrame:
    frame = cpu_self_time_table(db.con, rank)
    return frame[["name", "count", "total_us"]].assign(kind="cpu_op")


def _status(a: pd.Series, b: pd.Series, a_n: pd.Series, b_n: pd.Series) -> np.ndarray:
    diff = b - a
    tol = 1e-9 * np.maximum(a.abs(), b.abs())
    return np.select([a_n == 0, b_n == 0, diff > tol, diff < -tol], ["new", "vanished", "more", "less"], "same")


def _share(total: pd.Series) -> pd.Series:
    denom = total.sum()
    return 100.0 * total / denom if denom > 0 else total * np.nan


def diff_tables(a: pd.DataFrame, b: pd.DataFrame, a_steps: int = 1, b_steps: int = 1) -> pd.DataFrame:
    """Outer join of two ``name, count, total_us, kind`` tables into :data:`KERNEL_COLUMNS`,
    counts and times divided by the step counts, sorted by ``|diff_us|``."""
    m = a.merge(b, on="name", how="outer", suffixes=("_a", "_b"))
    out = pd.DataFrame({"name": m["name"]})
    out["a_count"] = m["count_a"].fillna(0) / a_steps
    out["b_count"] = m["count_b"].fillna(0) / b_steps
    out["a_total_us"] = m["total_us_a"].fillna(0.0) / a_steps
    out["b_total_us"] = m["total_us_b"].fillna(0.0) / b_steps
    out["diff_count"] = out["b_count"] - out["a_count"]
    out["diff_us"] = out["b_total_us"] - out["a_total_us"]
    out["a_pct"], out["b_pct"] = _share(out["a_total_us"]), _share(out["b_total_us"])
    out["diff_pct"] = out["b_pct"].fillna(0) - out["a_pct"].fillna(0)
    out["ratio"] = out["b_total_us"] / out["a_total_us"].where(out["a_total_us"] > 0)
    out["status"] = _status(out["a_total_us"], out["b_total_us"], out["a_count"], out["b_count"])
    out["kind"] = m["kind_a"].fillna(m["kind_b"])
    if a_steps == 1 and b_steps == 1:
        out["a_count"], out["b_count"] = out["a_count"].astype("int64"), out["b_count"].astype("int64")
        out["diff_count"] = out["diff_count"].astype("int64")
    out = out.assign(_abs=out["diff_us"].abs()).sort_values(["_abs", "name"], ascending=[False, True])
    return out[KERNEL_COLUMNS].reset_index(drop=True)


def compare_kernels(a: TraceDB, b: TraceDB, options: CompareOptions | None = None) -> CompareResult:
    """Per GPU operation name, A against B (see the module docstring)."""
    opts = options or CompareOptions()
    check_side(a.con, opts.rank, "A")
    check_side(b.con, opts.rank, "B")
    ta = gpu_op_totals(a, opts.rank, steps_only=opts.steps_only)
    tb = gpu_op_totals(b, opts.rank, steps_only=opts.steps_only)
    cpu = ta.empty and tb.empty
    if cpu:
        ta, tb = _cpu_totals(a, opts.rank), _cpu_totals(b, opts.rank)
    return kernels_diff(ta, tb, step_count(a, opts.rank), step_count(b, opts.rank), opts, cpu=cpu)


def kernels_diff(ta: pd.DataFrame, tb: pd.DataFrame, sa: int, sb: int, opts: CompareOptions, *,
                 cpu: bool = False) -> CompareResult:
    """The kernel-level :class:`CompareResult` of each side's ``name, count, total_us, kind`` totals
    and step counts (``cpu``: the totals are CPU operators' self times)."""
    notes = []
    if cpu:
        notes.append("no GPU operations on either side: CPU operators compared by self time")
    elif ta.empty or tb.empty:
        notes.append(f"{'A' if ta.empty else 'B'} has no GPU operations: every GPU operation is "
                     f"{'new' if ta.empty else 'vanished'}")
    if opts.match == "short":
        ta, tb = by_short_name(ta), by_short_name(tb)
        notes.append("kernels matched by short name (argument lists and nested templates elided); names that "
                     "shorten alike are added up")
    frame = diff_tables(ta, tb, *((sa, sb) if opts.per_step else (1, 1)))
    if opts.per_step:
        notes.append(f"per step: A has {sa} step(s), B has {sb}")
    return CompareResult(frame, sa, sb, notes, per_step=bool(opts.per_step))


def compare_regions(a: TraceDB, b: TraceDB, options: CompareOptions | None = None) -> CompareResult:
    """Per region of the step breakdown, A against B (see the module docstring)."""
    opts = options or CompareOptions()
    ra = step_breakdown(a, BreakdownSelection(rank=opts.rank))
    rb = step_breakdown(b, BreakdownSelection(rank=opts.rank))
    return regions_diff(ra, rb, opts)


def regions_diff(ra: BreakdownResult, rb: BreakdownResult, opts: CompareOptions) -> CompareResult:
    """The region-level :class:`CompareResult` of each side's breakdown summed over steps."""
    sa, sb = _region_steps(ra.frame), _region_steps(rb.frame)
    per_step = opts.per_step is not False
    da, db_ = (sa, sb) if per_step else (1, 1)
    m = ra.frame.merge(rb.frame, on="region", how="outer", suffixes=("_a", "_b"))
    m = m[m["region"].isin(REGIONS)].fillna({c: 0 for c in m.columns if c != "region"})
    out = pd.DataFrame({"region": m["region"]})
    for side, div in (("a", da), ("b", db_)):
        out[f"{side}_wall_us"] = m[f"wall_us_{side}"] / div
        out[f"{side}_gpu_us"] = m[f"gpu_us_{side}"] / div
        out[f"{side}_kernels"] = m[f"kernels_{side}"] / div if div != 1 else m[f"kernels_{side}"]
        out[f"{side}_wall_pct"] = m[f"wall_pct_{side}"]
    out["diff_us"] = out["b_wall_us"] - out["a_wall_us"]
    out["diff_gpu_us"] = out["b_gpu_us"] - out["a_gpu_us"]
    out["diff_wall_pct"] = out["b_wall_pct"] - out["a_wall_pct"]
    a_any, b_any = out["a_wall_us"].fillna(0) + 1.0, out["b_wall_us"].fillna(0) + 1.0  # regions always exist
    out["status"] = _status(out["a_wall_us"], out["b_wall_us"], a_any, b_any)
    out["order"] = out["region"].map({r: i for i, r in enumerate(REGIONS)})
    out = out.assign(_abs=out["diff_us"].abs()).sort_values(["_abs", "order"], ascending=[False, True])
    notes = [f"A: {n}" for n in ra.notes] + [f"B: {n}" for n in rb.notes]
    notes.append(f"per step (the default for regions; --no-per-step for totals): A has {sa} step(s), B has {sb}"
                 if per_step else f"totals over all steps: A has {sa} step(s), B has {sb}")
    return CompareResult(out[REGION_COLUMNS].reset_index(drop=True), sa, sb, notes, per_step=per_step)


def _region_steps(frame: pd.DataFrame) -> int:
    """Step windows of a summed breakdown (the regions' ``steps``; not the before_first_step row)."""
    steps = frame.loc[frame["region"].isin(REGIONS), "steps"]
    return int(steps.max()) if len(steps) else 1


REGRESSION_COLUMNS = ["status", "a_us", "b_us", "diff_us"]


def regressions(result: CompareResult, limit: int = 5) -> pd.DataFrame:
    """The ``limit`` kernels or regions whose time per step grew most (B - A > 0), largest first:
    the name or region column, then :data:`REGRESSION_COLUMNS` (kernels' time, regions' wall time,
    µs per step of each side, whether ``result`` holds totals or per-step rows)."""
    frame = result.frame
    key, a_col, b_col = ("region", "a_wall_us", "b_wall_us") if "region" in frame else ("name", "a_total_us",
                                                                                        "b_total_us")
    da, db_ = (1, 1) if result.per_step else (max(result.a_steps, 1), max(result.b_steps, 1))
    out = pd.DataFrame({key: frame[key], "status": frame["status"], "a_us": frame[a_col] / da,
                        "b_us": frame[b_col] / db_})
    out["diff_us"] = out["b_us"] - out["a_us"]
    out = out[out["diff_us"] > 0].sort_values(["diff_us", key], ascending=[False, True])
    return out.head(limit).reset_index(drop=True)


def by_short_name(totals: pd.DataFrame) -> pd.DataFrame:
    """``name, count, total_us, kind`` rows added up by :func:`short_kernel_name` (whole, not
    cut: only argument lists and nested templates are elided)."""
    if totals.empty:
        return totals
    out = totals.assign(name=[short_kernel_name(n, keep=1 << 20) for n in totals["name"]])
    return out.groupby("name", as_index=False).agg(count=("count", "sum"), total_us=("total_us", "sum"),
                                                   kind=("kind", "first"))


def compare(a: TraceDB, b: TraceDB, options: CompareOptions | None = None) -> CompareResult:
    """A against B (TraceDBs or duckdb connections) at the level ``options.by``.

    Raises :class:`InputError` for an unknown level, a side without traces or an unknown rank.
    """
    opts = options or CompareOptions()
    if opts.by not in LEVELS:
        raise InputError(f"unknown comparison level {opts.by!r} (levels: {', '.join(LEVELS)})")
    if opts.match not in MATCHES:
        raise UsageError(f"unknown --match {opts.match!r} (choices: {', '.join(MATCHES)})")
    return compare_kernels(a, b, opts) if opts.by == "kernel" else compare_regions(a, b, opts)


AMD_DEVICE = re.compile(r"(?i)\bamd\b|instinct|radeon|\bmi[0-9]{3}")
NVIDIA_DEVICE = re.compile(r"(?i)\bnvidia\b|\btesla\b|\bquadro\b|\bgeforce\b|\btitan\b")
AMD_KERNELS = re.compile(r"^Cijk_|__amd_rocclr|^naive_conv|miopen|^rccl|hipblaslt|ck_tile", re.IGNORECASE)
"""Kernel names only ROCm's libraries give: Tensile/hipBLASLt GEMMs (``Cijk_``), ROCclr's copy and
fill kernels, MIOpen, RCCL, composable kernel."""
NVIDIA_KERNELS = re.compile(r"^(sm[0-9]{2,3}_|volta_|ampere_|turing_|maxwell_|hopper_)|cutlass|nvjet|cudnn|^nccl"
                            r"|void cudnn|ncclDevKernel|ncclKernel", re.IGNORECASE)
"""Kernel names only CUDA's libraries give: cuBLAS's architecture-prefixed GEMMs, CUTLASS, nvjet,
cuDNN, NCCL."""
MIN_SHARED_KERNEL_PCT = 50.0
"""Below this share of B's kernel time under names A also has, A and B ran different work."""


def _vendor(devices: list[str], kernels: list[str]) -> str | None:
    """``AMD`` or ``NVIDIA`` from the device names, else from the kernel names; None when unknown."""
    for rule, name in ((AMD_DEVICE, "AMD"), (NVIDIA_DEVICE, "NVIDIA")):
        if any(rule.search(d) for d in devices):
            return name
    amd = sum(bool(AMD_KERNELS.search(k)) for k in kernels)
    nvidia = sum(bool(NVIDIA_KERNELS.search(k)) for k in kernels)
    return None if amd == nvidia else ("AMD" if amd > nvidia else "NVIDIA")


def _side_facts(db: TraceDB, rank: int | None) -> tuple[list[str], pd.DataFrame]:
    devices = [d for (d,) in db.con.execute(
        "SELECT DISTINCT device_name FROM traces WHERE ($rank IS NULL OR rank = $rank) AND device_name <> '' "
        "ORDER BY 1", {"rank": rank}).fetchall() if d]
    kernels = db.con.execute(
        "SELECT g.name, sum(g.dur_us) AS total_us FROM gpu_op_names g JOIN traces t USING (trace_id) "
        "WHERE g.cat = 'kernel' AND ($rank IS NULL OR t.rank = $rank) GROUP BY g.name", {"rank": rank}).df()
    return devices, kernels


def mismatch_warnings(a: TraceDB, b: TraceDB, rank: int | None = None) -> list[str]:
    """Why A and B may not be two runs of one workload, one sentence each (none when they look alike):
    another GPU vendor (AMD or NVIDIA, from ``traces.device_name``, else from kernel names only
    ROCm's or CUDA's libraries give) or model (the device names differ), or less than
    :data:`MIN_SHARED_KERNEL_PCT` of B's kernel time under kernel names that A has too (exact
    names; the share of B's kernel time, not a symmetric measure, so that new kernels in B count)."""
    (da, ka), (db_, kb) = _side_facts(a, rank), _side_facts(b, rank)
    out = []
    va, vb = _vendor(da, ka["name"].tolist()), _vendor(db_, kb["name"].tolist())
    if va and vb and va != vb:
        out.append(f"A runs on {va} ({', '.join(da) or 'device not named'}), B on {vb} "
                   f"({', '.join(db_) or 'device not named'}): kernel names and times differ by vendor")
    elif da and db_ and set(da) != set(db_):
        out.append(f"A runs on {', '.join(da)}, B on {', '.join(db_)}: another GPU model")
    total = float(kb["total_us"].sum())
    if total > 0 and len(ka):
        shared = 100.0 * float(kb.loc[kb["name"].isin(set(ka["name"])), "total_us"].sum()) / total
        if shared < MIN_SHARED_KERNEL_PCT:
            out.append(f"only {shared:.1f}% of B's kernel time is in kernels whose names A has too (under "
                       f"{MIN_SHARED_KERNEL_PCT:g}%): A and B may run different workloads")
    return out
