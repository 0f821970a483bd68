"""Rooflines: per-kernel FLOP, DRAM bytes, time, arithmetic intensity and achieved FLOP/s
against GPU peaks, from Nsight Compute reports (measured) or from operator shapes in Chrome
traces (estimated); and the Altair chart.

Formulas and sources: ``docs/roofline.md``. Units: FLOP, byte, second, FLOP/byte, FLOP/s
(integer tensor-core work in OP, OP/s).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pandas as pd

from trace_report.analyze import ncu
from trace_report.analyze.flop_estimate import estimate_ops
from trace_report.analyze.gpu_peaks import GpuPeaks, resolve_peaks
from trace_report.errors import InputError

if TYPE_CHECKING:
    import altair as alt

PRECISION_PEAK = {
    "fp64": "fp64_flop_per_s", "fp64_tensor": "fp64_tensor_flop_per_s", "fp32": "fp32_flop_per_s",
    "fp16": "fp16_flop_per_s", "tf32_tensor": "tf32_tensor_flop_per_s", "fp16_tensor": "fp16_tensor_flop_per_s",
    "int8_tensor": "int8_tensor_op_per_s",
}
FALLBACK = {"fp16": "fp32", "fp64_tensor": "fp64"}
"""Roof used when a GPU's table row lacks a precision's own peak."""
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

    @property
    def flop_per_sample(self) -> float | None:
        """Total FLOP over the profiled range divided by the batch size (when known)."""
        return self.total_flop / self.batch_size if self.batch_size else None


def peak_for(peaks: GpuPeaks | None, precision: str | None, override: float | None = None) -> float | None:
    """The roof (FLOP/s) of a precision class: ``override``, else the table's figure, else the
    :data:`FALLBACK` class's."""
    if override is not None:
        return override
    if peaks is None or precision is None:
        return None
    value = getattr(peaks, PRECISION_PEAK[precision], None)
    if value is None and precision in FALLBACK:
        value = getattr(peaks, PRECISION_PEAK[FALLBACK[precision]], None)
    return value


def apply_roofs(frame: pd.DataFrame, peaks: GpuPeaks | None, override: float | None = None) -> pd.DataFrame:
    """Copy of ``frame`` with ``roof_flop_per_s``, ``ridge_ai`` (FLOP/byte), ``bound``
    (memory if the work's intensity is below the ridge point, else compute) and
    ``pct_of_roof`` = achieved / min(roof, bandwidth x intensity) x 100; the work is ``int_ops``
    for ``int8_tensor`` rows, else ``flop``. Same rules as the ``roofline`` SQL view."""
    out = frame.copy()
    bw = peaks.dram_bytes_per_s if peaks else None
    roof = [peak_for(peaks, p if isinstance(p, str) else None, override) for p in out["precision"]]
    out["roof_flop_per_s"] = pd.Series(roof, index=out.index, dtype="float64")
    out["roof_bytes_per_s"] = bw
    out["ridge_ai"] = out["roof_flop_per_s"] / bw if bw else math.nan
    int_ops = out["int_ops"] if "int_ops" in out else pd.Series(math.nan, index=out.index)
    work = int_ops.where(out["precision"] == "int8_tensor", out["flop"]).astype("float64")
    bytes_ = out["bytes"].astype("float64").where(out["bytes"] > 0)
    ai = work / bytes_
    ok = out["precision"].notna() & out["roof_flop_per_s"].notna() & ai.notna() & (bw is not None)
    out["bound"] = None
    out.loc[ok, "bound"] = ["memory" if a < r else "compute" for a, r in zip(ai[ok], out.loc[ok, "ridge_ai"],
                                                                                strict=True)]
    attainable = pd.concat([out["roof_flop_per_s"], ai * (bw or math.nan)], axis=1).min(axis=1, skipna=False)
    out["pct_of_roof"] = 100.0 * (work / out["time_s"].astype("float64")) / attainable
    return out


# ------------------------------------------------------------------ data


def _fill_peaks(con: duckdb.DuckDBPyConnection, opts: RooflineOptions) -> tuple[GpuPeaks | None, str | None]:
    ncu.create_views(con)
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


def _aggregate(frame: pd.DataFrame, peaks: GpuPeaks | None, override: float | None) -> pd.DataFrame:
    sums = ["launches", "flop_fp64", "flop_fp32", "flop_fp16", "tensor_flop", "int_ops", "flop", "bytes", "time_s"]
    keys = ["kernel", "precision", "source"]
    present = [c for c in sums if c in frame]
    agg = frame.groupby(keys, dropna=False)[present].sum(min_count=1).reset_index()
    agg["ai_flop_per_byte"] = agg["flop"] / agg["bytes"].where(agg["bytes"] > 0)
    agg["achieved_flop_per_s"] = agg["flop"] / agg["time_s"].where(agg["time_s"] > 0)
    agg = apply_roofs(agg, peaks, override)
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
        frame = _aggregate(frame, peaks, opts.peak_flops)
    return RooflineResult(_order(frame), "ncu", peaks, opts.peak_flops, device,
                          float(frame["flop"].sum()), float(frame["time_s"].sum()), opts.batch_size, notes)


def estimate_roofline(con: duckdb.DuckDBPyConnection, opts: RooflineOptions | None = None) -> RooflineResult:
    """Roofline estimated from operator shapes of the Chrome traces in ``con``
    (:mod:`trace_report.analyze.flop_estimate`)."""
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
    frame = apply_roofs(frame, peaks, opts.peak_flops)
    if opts.by_name:
        frame = _aggregate(frame, peaks, opts.peak_flops)
    return RooflineResult(_order(frame), "estimate", peaks, opts.peak_flops, device,
                          float(frame["flop"].sum()), float(frame["time_s"].sum()), opts.batch_size, notes)


def roofline(con: duckdb.DuckDBPyConnection, opts: RooflineOptions | None = None) -> RooflineResult:
    """Measured roofline when ``con`` holds Nsight Compute launches, else the estimate from
    traces. Raises :class:`InputError` when there is neither."""
    if ncu.has_tables(con) and con.execute("SELECT count(*) FROM ncu_kernels").fetchall()[0][0]:
        return ncu_roofline(con, opts)
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "events" in tables or con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE view_name = 'events'").fetchall()[0][0]:
        return estimate_roofline(con, opts)
    raise InputError("no Nsight Compute results and no trace events to build a roofline from")


def batch_size_near(path: Path) -> int | None:
    """``config.batch_size`` (or ``batch_size``) of a ``run.json`` beside ``path`` (or in it,
    for a directory); None when there is none."""
    folder = path if path.is_dir() else path.parent
    try:
        run = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(run, dict):
        return None
    config = run.get("config") if isinstance(run.get("config"), dict) else {}
    value = config.get("batch_size", run.get("batch_size"))
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


# ------------------------------------------------------------------ chart


def _safe(name: object) -> str:
    text = str(name)
    text = text if len(text) <= DISPLAY_NAME_CHARS else text[: DISPLAY_NAME_CHARS - 1] + "…"
    return text.replace("<", "‹").replace(">", "›").replace("&", "＆")


def chart_points(frame: pd.DataFrame) -> pd.DataFrame:
    """One point per (row, precision class with work > 0): ``ai`` (FLOP/byte), ``perf``
    (FLOP/s), ``precision``, ``kernel`` (shortened, HTML-safe), ``label`` (short name and
    launch id), ``time_s``."""
    classes = [("fp64", "flop_fp64"), ("fp32", "flop_fp32"), ("fp16", "flop_fp16"), (None, "tensor_flop"),
               ("int8_tensor", "int_ops")]
    pts = []
    for r in frame.to_dict("records"):
        bytes_, time_s = r.get("bytes"), r.get("time_s")
        if not bytes_ or not time_s or pd.isna(bytes_) or pd.isna(time_s):
            continue
        works = [(c or r.get("tensor_precision") or r.get("precision"), r.get(col)) for c, col in classes if col in r]
        if all(w is None or pd.isna(w) for _, w in works):
            works = [(r.get("precision"), r.get("flop"))]
        for cls, work in works:
            if cls and work and not pd.isna(work) and work > 0:
                pts.append({"kernel": _safe(r.get("kernel")), "label": _label(r), "precision": LABELS.get(cls, cls),
                            "ai": work / bytes_, "perf": work / time_s, "time_s": time_s})
    return pd.DataFrame(pts, columns=["kernel", "label", "precision", "ai", "perf", "time_s"])


def _label(row: dict[str, object]) -> str:
    name = row.get("function") if isinstance(row.get("function"), str) else str(row.get("kernel"))
    name = str(name).removeprefix("aten::")
    name = name if len(name) <= 28 else name[:27] + "…"
    lid = row.get("launch_id")
    return _safe(f"{name} #{int(lid)}" if isinstance(lid, (int, float)) and not pd.isna(lid) else name)


def _ceilings(peaks: GpuPeaks, classes: list[str], override: float | None,
              x_min: float, x_max: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ceiling line points (one flat roof per distinct peak, the DRAM slope up to the highest
    ridge) and one ridge point per distinct peak, labelled with every precision sharing it."""
    bw = peaks.dram_bytes_per_s
    by_peak: dict[float, list[str]] = {}
    for cls in PRECISION_PEAK:
        peak = peak_for(peaks, cls, override)
        if (cls in classes or cls == "fp32") and peak and bw:
            by_peak.setdefault(peak, []).append(cls)
    lines, ridges = [], []
    for peak, group in sorted(by_peak.items()):
        ridge = peak / bw
        name = "user peak" if override is not None else " = ".join(LABELS[c].removesuffix(" (OP/s)") for c in group)
        unit = ("OP/s", "OP/B") if group == ["int8_tensor"] else ("FLOP/s", "FLOP/B")
        lines += [{"roof": name, "ai": ridge, "perf": peak}, {"roof": name, "ai": x_max, "perf": peak}]
        ridges.append({"roof": name, "ai": ridge, "perf": peak, "end": x_max,
                       "text": f"{name}: {peak / 1e12:.4g} T{unit[0]}, ridge {ridge:.3g} {unit[1]}"})
    if bw and ridges:
        top = max(r["ai"] for r in ridges)
        lines += [{"roof": "DRAM bandwidth", "ai": x_min, "perf": bw * x_min},
                  {"roof": "DRAM bandwidth", "ai": top, "perf": bw * top}]
    return pd.DataFrame(lines), pd.DataFrame(ridges)


def roofline_chart(result: RooflineResult, title: str | None = None) -> alt.LayerChart:
    """Log-log roofline: DRAM-bandwidth slope, one flat ceiling per precision present, ridge
    points, one point per kernel (or kernel name with ``by_name``) and precision class."""
    import altair as alt  # imported here: altair takes about a second to import

    pts = chart_points(result.frame)
    peaks = result.peaks
    xs = list(pts["ai"]) + ([p / peaks.dram_bytes_per_s for p in _peak_values(peaks, result.peak_flops)]
                            if peaks and peaks.dram_bytes_per_s else [])
    x_min = 10 ** math.floor(math.log10(min(xs))) / 10 if xs else 0.01
    x_max = 10 ** math.ceil(math.log10(max(xs) * 20)) if xs else 1000.0
    scale_x = alt.Scale(type="log", domain=[x_min, x_max])
    layers: list[alt.Chart] = []
    if peaks and peaks.dram_bytes_per_s:
        names = {k for k, v in LABELS.items() if v in set(pts["precision"])}
        lines, ridges = _ceilings(peaks, sorted(names), result.peak_flops, x_min, x_max)
        if not lines.empty:
            layers.append(alt.Chart(lines).mark_line(strokeDash=[6, 3], color="gray").encode(
                x=alt.X("ai:Q", scale=scale_x), y="perf:Q", detail="roof:N"))
            layers.append(alt.Chart(ridges).mark_point(shape="diamond", color="black", size=50).encode(
                x=alt.X("ai:Q", scale=scale_x), y="perf:Q", tooltip=["text:N"]))
            layers.append(alt.Chart(ridges).mark_text(align="right", dx=-4, dy=-7, fontSize=10).encode(
                x=alt.X("end:Q", scale=scale_x), y="perf:Q", text="text:N"))
    gpu = peaks.name if peaks else (result.device_name or "unknown GPU")
    layers.append(alt.Chart(pts).mark_circle(size=90, opacity=0.85).encode(
        x=alt.X("ai:Q", scale=scale_x, title="Arithmetic intensity (FLOP/byte, DRAM)"),
        y=alt.Y("perf:Q", scale=alt.Scale(type="log"), title="Performance (FLOP/s)", axis=alt.Axis(format="~s")),
        color=alt.Color("precision:N", title="Work"),
        tooltip=["kernel:N", "precision:N", alt.Tooltip("ai:Q", format=".3g"),
                 alt.Tooltip("perf:Q", format=".3s"), alt.Tooltip("time_s:Q", format=".3g")]))
    if 0 < len(pts) <= 30:
        near = pts.assign(kx=lambda d: d["ai"].map(lambda v: round(math.log10(v), 1)),
                          ky=lambda d: d["perf"].map(lambda v: round(math.log10(v), 1)))
        texts = near.groupby(["kx", "ky"], sort=False).agg(
            ai=("ai", "first"), perf=("perf", "first"), label=("label", lambda v: ", ".join(dict.fromkeys(v))))
        marks = alt.Chart(texts.reset_index(drop=True)).mark_text(align="left", dx=8, dy=8, fontSize=10, color="#333")
        layers.append(marks.encode(
            x=alt.X("ai:Q", scale=scale_x), y=alt.Y("perf:Q", scale=alt.Scale(type="log")), text="label:N"))
    label = "estimated from operator shapes" if result.source == "estimate" else "Nsight Compute"
    return alt.layer(*layers).properties(
        title=title or f"Roofline, {gpu} ({label})", width=640, height=420)


def _peak_values(peaks: GpuPeaks, override: float | None) -> list[float]:
    if override is not None:
        return [override]
    return [v for k in PRECISION_PEAK if (v := getattr(peaks, PRECISION_PEAK[k])) is not None]


def save_chart(chart: alt.TopLevelMixin, path: Path) -> None:
    """Write the chart: ``.html`` (JavaScript inlined, works offline), ``.png`` or ``.svg``
    (vl-convert). Raises :class:`InputError` for other suffixes or a missing folder."""
    suffix = path.suffix.lower()
    if suffix not in (".html", ".png", ".svg"):
        raise InputError(f"{path}: chart files must end in .html, .png or .svg")
    if not path.absolute().parent.is_dir():
        raise InputError(f"{path.parent}: no such directory")
    from trace_report.charts.html import save_chart as save_offline

    save_offline(chart, path)  # offline HTML with the spec escaped inside <script>; PNG/SVG by vl-convert
