"""The roofline chart (Altair): DRAM-bandwidth slope, one ceiling per precision, ridge points,
one point per kernel (or operator) and precision class. Data from
:func:`trace_report.analyses.roofline.measured.roofline`.

With a ``run`` column (several runs) the points are coloured by run and shaped by precision.
Rows without GPU time (estimates from CPU-only traces) have an arithmetic intensity but no
achieved FLOP/s: they are drawn as ticks along the bottom of the chart (a rug on the x axis),
never as invented points, and the title says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from trace_report.analyses.roofline.measured import (
    DISPLAY_NAME_CHARS,
    LABELS,
    PRECISION_PEAK,
    RooflineResult,
)
from trace_report.analyses.roofline.peaks import GpuPeaks
from trace_report.formats.names import short_kernel_name
from trace_report.present.charts.loading import altair

if TYPE_CHECKING:
    import altair as alt


def _safe(name: object) -> str:
    text = str(name)
    text = text if len(text) <= DISPLAY_NAME_CHARS else text[: DISPLAY_NAME_CHARS - 1] + "…"
    return text.replace("<", "‹").replace(">", "›").replace("&", "＆")


def chart_points(frame: pd.DataFrame) -> pd.DataFrame:
    """One point per (row, precision class with work > 0): ``ai`` (FLOP/byte), ``perf``
    (FLOP/s), ``precision``, ``kernel`` (shortened, HTML-safe), ``label`` (short name and
    launch id), ``time_s``."""
    classes = _CLASSES
    pts = []
    for r in frame.to_dict("records"):
        bytes_, time_s = r.get("bytes"), r.get("time_s")
        if not bytes_ or not time_s or pd.isna(bytes_) or pd.isna(time_s):
            continue
        if any(_true(r.get(k)) for k in ("tensor_uncounted", "unknown_tensor_shapes")):
            continue  # unknown tensor work: its FP32 side work alone would be a false point
        for cls, work in _works(r, classes):
            pts.append({"kernel": _safe(r.get("kernel")), "label": _label(r), "precision": LABELS.get(cls, cls),
                        "run": _run(r), "ai": work / bytes_, "perf": work / time_s, "time_s": time_s})
    return pd.DataFrame(pts, columns=POINT_COLUMNS)


def _true(value: object) -> bool:
    return value is not None and not pd.isna(value) and bool(value)  # type: ignore[arg-type]


POINT_COLUMNS = ["kernel", "label", "precision", "run", "ai", "perf", "time_s"]
_CLASSES = [("fp64", "flop_fp64"), ("fp32", "flop_fp32"), ("fp16", "flop_fp16"), (None, "tensor_flop"),
            ("int8_tensor", "int_op")]


def _works(r: dict[str, object], classes: list[tuple[str | None, str]]) -> list[tuple[str, float]]:
    """(precision class, work) of a row's classes with work > 0; the row's own precision and
    ``flop`` when it has no per-class columns (estimates)."""
    works = [(c or r.get("tensor_precision") or r.get("precision"), r.get(col)) for c, col in classes if col in r]
    if all(w is None or pd.isna(w) for _, w in works):
        works = [(r.get("precision"), r.get("flop"))]
    return [(str(c), float(w)) for c, w in works if c and w and not pd.isna(w) and w > 0]  # type: ignore[arg-type]


def _run(r: dict[str, object]) -> str | None:
    run = r.get("run")
    return _safe(run) if isinstance(run, str) else None


def ai_only_points(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that have FLOP and bytes but no GPU time (estimates from CPU-only traces): their
    arithmetic intensity ``ai`` only, no performance (:data:`POINT_COLUMNS` with ``perf`` and
    ``time_s`` empty)."""
    pts = []
    for r in frame.to_dict("records"):
        bytes_, time_s = r.get("bytes"), r.get("time_s")
        if not bytes_ or pd.isna(bytes_) or (time_s and not pd.isna(time_s)):
            continue
        for cls, work in _works(r, _CLASSES):
            pts.append({"kernel": _safe(r.get("kernel")), "label": _label(r), "precision": LABELS.get(cls, cls),
                        "run": _run(r), "ai": work / bytes_, "perf": None, "time_s": None})
    return pd.DataFrame(pts, columns=POINT_COLUMNS)


LABEL_CHARS = 32


def _label(row: dict[str, object]) -> str:
    """A point's label: the kernel's short name (:func:`short_kernel_name`, not ncu's bare
    ``Kernel`` function name), cut to :data:`LABEL_CHARS`, with the launch id when there is one."""
    kernel = row.get("kernel")
    name = short_kernel_name(str(kernel)) if isinstance(kernel, str) and kernel else str(row.get("function"))
    name = name.removeprefix("aten::")
    name = name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"
    lid = row.get("launch_id")
    return _safe(f"{name} #{int(lid)}" if isinstance(lid, (int, float)) and not pd.isna(lid) else name)


CHAR_PX, LINE_PX = 6.0, 12.0
"""Approximate size of a 10 px label character and line, for placing labels apart."""


def place_labels(pts: pd.DataFrame, x_domain: tuple[float, float], y_domain: tuple[float, float],
                 width: float, height: float) -> pd.DataFrame:
    """Labels that do not overlap: for each point (longest time first) the first of a few
    offsets whose box (in pixels of the log-log plot) overlaps no label placed before; points
    with no free spot keep their label in the tooltip only. Columns ``ai``, ``perf``, ``label``,
    ``dx``, ``dy`` (pixels)."""
    def px(v: float, lo: float, hi: float, size: float) -> float:
        return size * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    placed: list[tuple[float, float, float, float]] = []
    out = []
    order = pts.sort_values("time_s", ascending=False) if "time_s" in pts else pts
    for r in order.drop_duplicates("label").itertuples(index=False):
        x, y = px(r.ai, *x_domain, width), height - px(r.perf, *y_domain, height)
        w = CHAR_PX * len(str(r.label))
        for dx, dy in ((8, 4), (8, -10), (-8 - w, 4), (-8 - w, -10), (8, 16), (8, -22)):
            box = (x + dx, y + dy - LINE_PX / 2, x + dx + w, y + dy + LINE_PX / 2)
            inside = box[0] >= 0 and box[2] <= width and box[1] >= 0 and box[3] <= height
            if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                placed.append(box)
                out.append({"ai": r.ai, "perf": r.perf, "label": r.label, "dx": dx, "dy": dy, "box": box})
                break
    return pd.DataFrame(out, columns=["ai", "perf", "label", "dx", "dy", "box"])


def _ceilings(peaks: GpuPeaks, roofs: dict[str, float | None], classes: list[str], override: float | None,
              x_min: float, x_max: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ceiling line points (one flat roof per distinct peak, the DRAM slope up to the highest
    ridge) and one ridge point per distinct peak, labelled with every precision sharing it."""
    bw = peaks.dram_bytes_per_s
    by_peak: dict[float, list[str]] = {}
    for cls in PRECISION_PEAK:
        peak = roofs.get(cls)
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
    points, one point per kernel (or kernel name with ``by_name``) and precision class; with a
    ``run`` column one colour per run (shape per precision); rows without GPU time as ticks on
    the x axis (estimated intensity only)."""
    alt = altair()

    pts = chart_points(result.frame)
    rug = ai_only_points(result.frame)
    by_run = "run" in result.frame.columns
    peaks = result.peaks
    xs = list(pts["ai"]) + list(rug["ai"]) + (
        [p / peaks.dram_bytes_per_s for p in _peak_values(peaks, result.peak_flops)]
        if peaks and peaks.dram_bytes_per_s else [])
    x_min = 10 ** math.floor(math.log10(min(xs))) / 10 if xs else 0.01
    x_max = 10 ** math.ceil(math.log10(max(xs) * 20)) if xs else 1000.0
    scale_x = alt.Scale(type="log", domain=[x_min, x_max])
    perf_all = [v for v in list(pts["perf"]) + (_peak_values(peaks, result.peak_flops) if peaks else []) if v > 0]
    y_domain = (10 ** math.floor(math.log10(min(perf_all))), 10 ** math.ceil(math.log10(max(perf_all)))) \
        if perf_all else (1.0, 10.0)
    y_scale = alt.Scale(type="log", domain=list(y_domain)) if perf_all else alt.Scale(type="log")
    scale_y = alt.Y("perf:Q", scale=y_scale, title="Performance (FLOP/s or OP/s)", axis=alt.Axis(format="~s"))
    layers: list[alt.Chart] = []
    if peaks and peaks.dram_bytes_per_s:
        names = {k for k, v in LABELS.items() if v in set(pts["precision"]) | set(rug["precision"])}
        lines, ridges = _ceilings(peaks, result.roofs, sorted(names), result.peak_flops, x_min, x_max)
        if not lines.empty:
            layers.append(alt.Chart(lines).mark_line(strokeDash=[6, 3], color="gray", clip=True).encode(
                x=alt.X("ai:Q", scale=scale_x), y=scale_y, detail=alt.Detail("roof:N")))
            layers.append(alt.Chart(ridges).mark_point(shape="diamond", color="black", size=50).encode(
                x=alt.X("ai:Q", scale=scale_x), y=alt.Y("perf:Q"), tooltip=[alt.Tooltip("text:N")]))
            layers.append(alt.Chart(ridges).mark_text(align="right", dx=-4, dy=-7, fontSize=10).encode(
                x=alt.X("end:Q", scale=scale_x), y=alt.Y("perf:Q"), text=alt.Text("text:N")))
    gpu = peaks.name if peaks else (result.device_name or "unknown GPU")
    estimated = result.source == "estimate"
    runs = sorted(set(pts["run"].dropna()) | set(rug["run"].dropna()))
    legend = alt.Legend(orient="top-left", fillColor="white", padding=6, labelLimit=260)  # inside the plot: above
    # the DRAM slope is the one corner no kernel can reach
    color = alt.Color("run:N", title="Run (estimated)" if estimated else "Run", scale=alt.Scale(domain=runs),
                      legend=legend) if by_run else alt.Color("precision:N", title="Work", legend=legend)
    tooltip = [*([alt.Tooltip("run:N")] if by_run else []), alt.Tooltip("kernel:N"), alt.Tooltip("precision:N"),
               alt.Tooltip("ai:Q", format=".3g")]
    x_title = "Arithmetic intensity (FLOP or OP per DRAM byte" + (", estimated)" if estimated else ")")
    if len(pts) or not len(rug):
        point = alt.Chart(pts).mark_point(size=90, opacity=0.85, filled=True) if by_run else \
            alt.Chart(pts).mark_circle(size=90, opacity=0.85)
        encoding = {"shape": alt.Shape("precision:N", title="Work", legend=alt.Legend(
            orient="top-left", fillColor="white", padding=6, offset=4))} if by_run else {}
        layers.append(point.encode(
            x=alt.X("ai:Q", scale=scale_x, title=x_title),
            y=scale_y, color=color, **encoding,
            tooltip=[*tooltip, alt.Tooltip("perf:Q", format=".3s"), alt.Tooltip("time_s:Q", format=".3g")]))
    if 0 < len(pts) <= 30 and not by_run:
        texts = place_labels(pts, (x_min, x_max), y_domain, WIDTH, HEIGHT).drop(columns="box")
        for (dx, dy), part in texts.groupby(["dx", "dy"], sort=False):  # Vega-Lite offsets are per mark
            marks = alt.Chart(part).mark_text(align="left", dx=float(dx), dy=float(dy), fontSize=10, color="#333")
            layers.append(marks.encode(x=alt.X("ai:Q", scale=scale_x), y=alt.Y("perf:Q", scale=y_scale),
                                       text=alt.Text("label:N")))
    if len(rug):
        # No GPU time, so no achieved FLOP/s: a tick per operator at its intensity, on the x axis.
        layers.append(alt.Chart(rug.drop(columns=["perf", "time_s"])).mark_tick(
            thickness=2, size=18, opacity=0.7).encode(
            x=alt.X("ai:Q", scale=scale_x, title=x_title), y=alt.YValue(HEIGHT - 9), color=color,
            tooltip=tooltip))
    label = "estimated from operator shapes" if estimated else "Nsight Compute"
    text = title or f"Roofline, {gpu} ({label})"
    subtitle = [f"ticks on the x axis: estimated intensity of {len(rug)} operator(s) without GPU time "
                "(CPU capture): no achieved FLOP/s"] if len(rug) else []
    return alt.layer(*layers).properties(
        title=alt.TitleParams(text, subtitle=subtitle) if subtitle else text, width=WIDTH, height=HEIGHT)


HEIGHT = 420
WIDTH = 640


def _peak_values(peaks: GpuPeaks, override: float | None) -> list[float]:
    if override is not None:
        return [override]
    return [v for k in PRECISION_PEAK if (v := getattr(peaks, PRECISION_PEAK[k])) is not None]
