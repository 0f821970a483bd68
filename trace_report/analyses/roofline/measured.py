"""Rooflines: per-kernel FLOP, DRAM bytes, time, arithmetic intensity and achieved FLOP/s
against GPU peaks, from Nsight Compute reports (measured) or from operator shapes in Chrome
traces (estimated). The chart is :mod:`trace_report.present.charts.roofline`.

Formulas and sources: ``docs/roofline.md``. Units: FLOP, byte, second, FLOP/byte, FLOP/s
(integer tensor-core work in OP, OP/s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from trace_report.analyses.roofline.estimate import estimate_ops
from trace_report.analyses.roofline.peaks import GpuPeaks, resolve_peaks
from trace_report.errors import InputError
from trace_report.manifest import read_manifest
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import create_ncu_views, has_ncu_tables

PRECISION_PEAK = {
    "fp64": "fp64_flop_per_s", "fp64_tensor": "fp64_tensor_flop_per_s", "fp32": "fp32_flop_per_s",
    "fp16": "fp16_flop_per_s", "tf32_tensor": "tf32_tensor_flop_per_s", "fp16_tensor": "fp16_tensor_flop_per_s",
    "int8_tensor": "int8_tensor_op_per_s",
}
ROOF_COLUMNS = ["roof_flop_per_s", "roof_bytes_per_s", "ridge_ai", "bound", "pct_of_roof"]
LABELS = {"fp64": "FP64", "fp64_tensor": "FP64 tensor", "fp32": "FP32", "fp16": "FP16 (non-tensor)",
          "tf32_tensor": "TF32 tensor", "fp16_tensor": "FP16/BF16 tensor", "int8_tensor": "INT8 tensor (OP/s)"}
COLUMNS = ["kernel", "launches", "flop_fp64", "flop_fp32", "flop_fp16", "tensor_flop", "int_ops", "flop", "bytes",
           "time_s", "ai_flop_per_byte", "achieved_flop_per_s", "precision", "roof_flop_per_s", "ridge_ai",
           "bound", "pct_of_roof", "source"]
DISPLAY_NAME_CHARS = 120


@dataclass(frozen=True)
class RooflineOptions:
    """``gpu``: peak-table key or device name overriding the recorded device; ``peak_flops``
    (FLOP/s, one roof for every precision) and ``peak_bw`` (byte/s) override the table;
    ``batch_size`` (samples) gives FLOP per sample; ``by_name`` aggregates launches per
    kernel (or operator) name."""

    gpu: str | None = None
    peak_flops: float | None = None
    peak_bw: float | None = None
    batch_size: int | None = None
    by_name: bool = False


@dataclass
class RooflineResult:
    """Rows (:data:`COLUMNS` first, then ids and provenance), the peaks used, totals."""

    frame: pd.DataFrame
    source: str
    peaks: GpuPeaks | None
    peak_flops: float | None
    device_name: str | None
    total_flop: float
    total_time_s: float
    batch_size: int | None = None
    notes: list[str] = field(default_factory=list)
    roofs: dict[str, float | None] = field(default_factory=dict)
    """The roof of every precision class (FLOP/s; OP/s for int8), for charts."""

    @property
    def flop_per_sample(self) -> float | None:
        """Total FLOP over the profiled range divided by the batch size (when known)."""
        return self.total_flop / self.batch_size if self.batch_size else None


def _peak_args(peaks: GpuPeaks | None, override: float | None) -> dict[str, float | None]:
    """The named parameters of the ``roof_for`` macro (views_roofline_rules.sql)."""
    by_class = {cls: getattr(peaks, attr) if peaks else None for cls, attr in PRECISION_PEAK.items()}
    return {"override": override, **by_class, "bw": peaks.dram_bytes_per_s if peaks else None}


_ROOF = "roof_for({p}, $override, $fp64, $fp64_tensor, $fp32, $fp16, $tf32_tensor, $fp16_tensor, $int8_tensor)"


def roofs_by_precision(con: duckdb.DuckDBPyConnection, peaks: GpuPeaks | None,
                       override: float | None = None) -> dict[str, float | None]:
    """The roof (FLOP/s; OP/s for int8) of every precision class, by the ``roof_for`` rule."""
    rows = con.execute(f"SELECT p, {_ROOF.format(p='p')} FROM unnest($classes) AS t(p)",
                       {"classes": list(PRECISION_PEAK),
                        **{k: v for k, v in _peak_args(peaks, override).items() if k != "bw"}}).fetchall()
    return {p: (None if v is None else float(v)) for p, v in rows}


def apply_roofs(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, peaks: GpuPeaks | None,
                override: float | None = None) -> pd.DataFrame:
    """Copy of ``frame`` with ``roof_flop_per_s``, ``roof_bytes_per_s``, ``ridge_ai`` (FLOP/byte),
    ``bound`` and ``pct_of_roof``, by the rules of ``views_roofline_rules.sql`` (the ones the
    ``roofline`` view of Nsight Compute results uses); the work is ``int_ops`` for
    ``int8_tensor`` rows, else ``flop``."""
    out = frame.drop(columns=[c for c in ROOF_COLUMNS if c in frame])
    if "int_ops" not in out:
        out = out.assign(int_ops=math.nan)
    con.register("_roofline_in", out)
    try:
        roofs = con.execute(f"""
            SELECT roof_flop_per_s, $bw AS roof_bytes_per_s, roof_flop_per_s / nullif($bw, 0) AS ridge_ai,
                   roof_bound(precision, work, bytes, roof_flop_per_s, $bw) AS bound,
                   roof_pct(work, time_s, bytes, roof_flop_per_s, $bw) AS pct_of_roof
            FROM (SELECT precision, bytes, time_s, {_ROOF.format(p="precision")} AS roof_flop_per_s,
                         CASE WHEN precision = 'int8_tensor' THEN int_ops ELSE flop END AS work
                  FROM (SELECT * REPLACE (precision::VARCHAR AS precision) FROM _roofline_in))""",
            _peak_args(peaks, override)).df()
    finally:
        con.unregister("_roofline_in")
    if "int_ops" not in frame:
        out = out.drop(columns=["int_ops"])
    for col in ROOF_COLUMNS:
        out[col] = roofs[col].to_numpy()
    out["roof_bytes_per_s"] = out["roof_bytes_per_s"].astype("float64")
    return out


# ------------------------------------------------------------------ data


def _fill_peaks(con: duckdb.DuckDBPyConnection, opts: RooflineOptions) -> tuple[GpuPeaks | None, str | None]:
    create_ncu_views(con)
    con.execute("DELETE FROM roofline_peaks")
    devices = con.execute("SELECT report_id, any_value(device_name) FROM ncu_kernels GROUP BY 1 ORDER BY 1").fetchall()
    used: tuple[GpuPeaks | None, str | None] = (None, None)
    for report_id, device in devices:
        peaks = resolve_peaks(device, gpu=opts.gpu, peak_flops=opts.peak_flops, peak_bw=opts.peak_bw)
        used = (peaks, device)
        p = peaks
        con.execute("INSERT INTO roofline_peaks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            report_id, p.name if p else None, p.fp64_flop_per_s if p else None,
            p.fp64_tensor_flop_per_s if p else None, p.fp32_flop_per_s if p else None,
            p.fp16_flop_per_s if p else None, p.tf32_tensor_flop_per_s if p else None,
            p.fp16_tensor_flop_per_s if p else None, p.int8_tensor_op_per_s if p else None,
            p.dram_bytes_per_s if p else None, opts.peak_flops])
    return used


def _aggregate(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, peaks: GpuPeaks | None,
               override: float | None) -> pd.DataFrame:
    sums = ["launches", "flop_fp64", "flop_fp32", "flop_fp16", "tensor_flop", "int_ops", "flop", "bytes", "time_s"]
    keys = ["kernel", "precision", "source"]
    present = [c for c in sums if c in frame]
    agg = frame.groupby(keys, dropna=False)[present].sum(min_count=1).reset_index()
    agg["ai_flop_per_byte"] = agg["flop"] / agg["bytes"].where(agg["bytes"] > 0)
    agg["achieved_flop_per_s"] = agg["flop"] / agg["time_s"].where(agg["time_s"] > 0)
    agg = apply_roofs(con, agg, peaks, override)
    return agg.sort_values("time_s", ascending=False, na_position="last").reset_index(drop=True)


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    first = [c for c in COLUMNS if c in frame]
    return frame[first + [c for c in frame.columns if c not in first]]


def ncu_roofline(con: duckdb.DuckDBPyConnection, opts: RooflineOptions | None = None) -> RooflineResult:
    """Roofline of the Nsight Compute launches in ``con`` (one row per launch, or per kernel
    name with ``by_name``)."""
    opts = opts or RooflineOptions()
    peaks, device = _fill_peaks(con, opts)
    frame = con.execute("SELECT * FROM roofline").df()
    frame["launches"] = 1
    notes = []
    if peaks is None:
        notes.append(f"no peak figures for device {device!r}: give --gpu or --peak-flops/--peak-bw")
    if frame["unknown_tensor_shapes"].any():
        notes.append("some tensor-core instructions have no known MMA shape; their work is not counted")
    if (frame["flop"].fillna(0) == 0).all() and frame["int_ops"].isna().all():
        notes.append("the report holds no floating-point instruction metrics (profile with --set full "
                     "or the roofline sections)")
    if opts.by_name:
        frame = _aggregate(con, frame, peaks, opts.peak_flops)
    return RooflineResult(_order(frame), "ncu", peaks, opts.peak_flops, device,
                          float(frame["flop"].sum()), float(frame["time_s"].sum()), opts.batch_size, notes,
                          roofs_by_precision(con, peaks, opts.peak_flops))


def estimate_roofline(con: duckdb.DuckDBPyConnection, opts: RooflineOptions | None = None) -> RooflineResult:
    """Roofline estimated from operator shapes of the Chrome traces in ``con``
    (:mod:`trace_report.analyses.roofline.estimate`)."""
    opts = opts or RooflineOptions()
    rows = estimate_ops(con)
    device = None
    names = con.execute("SELECT DISTINCT device_name FROM traces WHERE device_name IS NOT NULL").fetchall()
    if names:
        device = names[0][0]
    peaks = resolve_peaks(device, gpu=opts.gpu, peak_flops=opts.peak_flops, peak_bw=opts.peak_bw)
    frame = rows.rename(columns={"op": "kernel"}).assign(launches=1, int_ops=math.nan)
    notes = ["FLOP and bytes are estimates from operator shapes (record_shapes=True), not measurements"]
    if rows.empty:
        notes.append("no GEMM/convolution operators with shapes in the trace (record_shapes=True?)")
    else:
        unknown = rows["flop"].isna().sum()
        if unknown:
            notes.append(f"{unknown} operator call(s) without a FLOP count: {rows['note'].dropna().iloc[0]}")
        if rows["time_s"].isna().all():
            notes.append("no GPU kernels linked to these operators: time and FLOP/s are empty")
    if len(names) > 1:
        notes.append(f"traces from {len(names)} different GPUs; peaks of {device!r} used")
    frame = apply_roofs(con, frame, peaks, opts.peak_flops)
    if opts.by_name:
        frame = _aggregate(con, frame, peaks, opts.peak_flops)
    return RooflineResult(_order(frame), "estimate", peaks, opts.peak_flops, device,
                          float(frame["flop"].sum()), float(frame["time_s"].sum()), opts.batch_size, notes,
                          roofs_by_precision(con, peaks, opts.peak_flops))


def roofline(db: TraceDB, opts: RooflineOptions | None = None) -> RooflineResult:
    """Measured roofline when ``db`` holds Nsight Compute launches, else the estimate from
    traces. Raises :class:`InputError` when there is neither."""
    con = db.con
    if has_ncu_tables(con) and con.execute("SELECT count(*) FROM ncu_kernels").fetchall()[0][0]:
        return ncu_roofline(con, opts)
    if db.has_table("events"):
        return estimate_roofline(con, opts)
    raise InputError("no Nsight Compute results and no trace events to build a roofline from")


def batch_size_near(path: Path) -> int | None:
    """``config.batch_size`` of the ``run.json`` beside ``path`` (or in it, for a directory);
    None when there is none."""
    manifest = read_manifest(path if path.is_dir() else path.parent)
    value = manifest.config.get("batch_size") if manifest else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None
