"""Rooflines: per-kernel FLOP, DRAM bytes, time, arithmetic intensity and achieved FLOP/s
against GPU peaks, from Nsight Compute reports (measured) or from operator shapes in Chrome
traces (estimated). The chart is :mod:`trace_report.present.charts.roofline`.

Formulas and sources: ``docs/roofline.md``. Units: FLOP, byte, second, FLOP/byte, FLOP/s
(integer tensor-core work in OP, OP/s).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from trace_report.analyses.roofline import RooflineOptions
from trace_report.analyses.roofline.estimate import estimate_ops
from trace_report.analyses.roofline.peaks import GpuPeaks, match_amd_properties, resolve_peaks
from trace_report.errors import InputError
from trace_report.manifest import read_manifest
from trace_report.store.run_identity import identify_runs
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
COLUMNS = ["kernel", "launches", "flop_fp64", "flop_fp32", "flop_fp16", "tensor_flop", "int_op", "flop", "bytes",
           "time_s", "ai_flop_per_byte", "ai_op_per_byte", "achieved_flop_per_s", "achieved_op_per_s", "precision",
           "roof_flop_per_s", "ridge_ai", "bound", "pct_of_roof", "source"]
"""Output columns, first. ``int_op``: integer tensor-core operations (IMMA: int8/int4), not
FLOP; ``ai_op_per_byte`` and ``achieved_op_per_s`` count FLOP + integer OP, the work the roof of
the row's precision (``roof_flop_per_s``: OP/s for ``int8_tensor``) and ``bound`` compare with."""
DISPLAY_NAME_CHARS = 120
PER_RUN_COLUMNS = ["run", "region", "steps", "batch_size", "flop", "flop_per_step", "flop_per_image",
                   "flop_per_image_min", "flop_per_image_max"]


@dataclass
class RooflineResult:
    """Rows (:data:`COLUMNS` first, then ids and provenance), the peaks used, totals."""

    frame: pd.DataFrame
    source: str
    peaks: GpuPeaks | None
    peak_flops: float | None
    device_name: str | None
    total_flop: float
    """FLOP of every row; NaN when some row's FLOP is unknown (``tensor_uncounted`` or
    ``unknown_tensor_shapes``)."""
    total_time_s: float
    batch_size: int | None = None
    notes: list[str] = field(default_factory=list)
    roofs: dict[str, float | None] = field(default_factory=dict)
    """The roof of every precision class (FLOP/s; OP/s for int8), for charts."""
    region: str | None = None
    per_run: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PER_RUN_COLUMNS))
    """One row per run (:data:`PER_RUN_COLUMNS`): profiled steps, batch size and, with a region,
    the region's FLOP per step and per image (median, min, max over steps and ranks)."""

    @property
    def total_int_op(self) -> float:
        """Integer tensor-core operations of every row (OP; 0 without any)."""
        return float(self.frame["int_op"].sum()) if "int_op" in self.frame else 0.0

    @property
    def flop_per_sample(self) -> float | None:
        """Total FLOP of every row (every profiled step, every pass: forward, backward, and what
        else was counted) divided by one batch size; not FLOP per image of one pass (that is
        :attr:`region_flop_per_image` with ``region='forward'``)."""
        return self.total_flop / self.batch_size if self.batch_size else None

    @property
    def region_flop_per_image(self) -> float | None:
        """FLOP per image of the region (median over steps) when the result holds one run."""
        if self.region is None or len(self.per_run) != 1:
            return None
        value = self.per_run["flop_per_image"].iloc[0]
        return None if pd.isna(value) else float(value)


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
    if "int_ops" not in out:  # results name it int_op
        out = out.assign(int_ops=out.get("int_op", math.nan))
    con.register("_roofline_in", out)
    try:
        roofs = con.execute(f"""
            SELECT roof_flop_per_s, $bw AS roof_bytes_per_s, roof_flop_per_s / nullif($bw, 0) AS ridge_ai,
                   roof_bound(precision, work, bytes, roof_flop_per_s, $bw) AS bound,
                   roof_pct(work, time_s, bytes, roof_flop_per_s, $bw) AS pct_of_roof
            FROM (SELECT precision, bytes, time_s, {_ROOF.format(p="precision")} AS roof_flop_per_s,
                         CASE WHEN precision = 'int8_tensor' THEN int_ops ELSE flop END AS work
                  FROM (SELECT CAST(precision AS VARCHAR) AS precision, CAST(bytes AS DOUBLE) AS bytes,
                               CAST(time_s AS DOUBLE) AS time_s, CAST(flop AS DOUBLE) AS flop,
                               CAST(int_ops AS DOUBLE) AS int_ops FROM _roofline_in))""",
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
               override: float | None, by_run: bool = False) -> pd.DataFrame:
    sums = ["launches", "flop_fp64", "flop_fp32", "flop_fp16", "tensor_flop", "int_ops", "flop", "bytes", "time_s"]
    keys = ["kernel", "precision", "source", *(["run"] if by_run else [])]
    present = [c for c in sums if c in frame]
    groups = frame.groupby(keys, dropna=False)
    agg = groups[present].sum(min_count=1)
    for flag in ("tensor_uncounted", "unknown_tensor_shapes"):  # any launch unknown: the name's too
        if flag in frame:
            agg[flag] = groups[flag].agg(lambda s: bool(s.fillna(False).any()))
    agg = agg.reset_index()
    agg["ai_flop_per_byte"] = agg["flop"] / agg["bytes"].where(agg["bytes"] > 0)
    agg["achieved_flop_per_s"] = agg["flop"] / agg["time_s"].where(agg["time_s"] > 0)
    agg = apply_roofs(con, agg, peaks, override)
    return agg.sort_values("time_s", ascending=False, na_position="last").reset_index(drop=True)


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    first = [c for c in ["run", *COLUMNS] if c in frame]
    return frame[first + [c for c in frame.columns if c not in first]]


# ------------------------------------------------------------------ runs


def run_label(run_key: object, model: object, path: object) -> str:
    """A point's run: ``model (run_key)`` of its capture run, the run key alone when the model is
    unknown, else the file name of the trace or report (an archive member's own name)."""
    if isinstance(run_key, str) and run_key:
        return f"{model} ({run_key})" if isinstance(model, str) and model and model != run_key else run_key
    return Path(str(path).split("!")[-1]).name


def _runs_table(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    try:
        return con.execute("SELECT run_key, model, batch_size, path FROM runs").df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=["run_key", "model", "batch_size", "path"])


def trace_runs(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """``trace_id``, ``run`` (:func:`run_label` of the trace's run by
    :mod:`trace_report.store.run_identity`) and ``batch_size`` (the run's
    ``config.batch_size``, NULL outside a capture run) of every trace."""
    try:
        frame = con.execute("""
            SELECT t.trace_id, t.path, rt.run_key, r.model, r.batch_size
            FROM traces t LEFT JOIN run_traces rt USING (trace_id) LEFT JOIN runs r USING (run_key)""").df()
    except duckdb.CatalogException:
        frame = con.execute("SELECT trace_id, path, NULL AS run_key, NULL AS model, NULL AS batch_size "
                            "FROM traces").df()
    labels = {t: r.label for r in identify_runs(con) for t in r.trace_ids}  # the one run definition
    frame["run"] = [run_label(k, m, p) if isinstance(k, str) and k else labels.get(int(t), run_label(k, m, p))
                    for t, k, m, p in zip(frame["trace_id"], frame["run_key"], frame["model"], frame["path"],
                                          strict=True)]
    return frame[["trace_id", "run", "batch_size"]]


def report_runs(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """``report_id``, ``run`` and ``batch_size`` of every Nsight Compute report: the capture run
    whose folder holds the report, else the report's file name."""
    reports = con.execute("SELECT report_id, any_value(path) AS path FROM ncu_kernels GROUP BY 1").df()
    runs = _runs_table(con)
    by_folder = {_resolved(Path(str(p))): (k, m, b) for k, m, b, p in
                 zip(runs["run_key"], runs["model"], runs["batch_size"], runs["path"], strict=True)}
    rows = []
    for report_id, path in zip(reports["report_id"], reports["path"], strict=True):
        key, model, batch = by_folder.get(_resolved(Path(str(path)).parent), (None, None, None))
        rows.append({"report_id": report_id, "run": run_label(key, model, path), "batch_size": batch})
    return pd.DataFrame(rows, columns=["report_id", "run", "batch_size"])


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _batch(value: object, override: int | None) -> int | None:
    if override is not None:
        return override
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(number) if number > 0 and not math.isnan(number) else None


def _steps_per_trace(con: duckdb.DuckDBPyConnection) -> dict[int, int]:
    try:
        rows = con.execute("SELECT trace_id, count(*) FROM steps GROUP BY 1").fetchall()
    except duckdb.Error:
        return {}
    return {int(t): int(n) for t, n in rows}


def per_run_figures(rows: pd.DataFrame, runs: pd.DataFrame, region: str | None, batch_override: int | None,
                    steps: dict[int, int]) -> pd.DataFrame:
    """:data:`PER_RUN_COLUMNS` from the estimated operator rows (``trace_id``, ``run``, ``flop``;
    with a region also ``window_id``): FLOP per step of each trace (a rank's own batch) divided by
    the run's batch size, median, min and max over steps and ranks."""
    out = []
    for run, part in runs.groupby("run", sort=True):
        batch = _batch(part["batch_size"].dropna().iloc[0] if part["batch_size"].notna().any() else None,
                       batch_override)
        mine = rows[rows["run"] == run]
        flop = float(mine["flop"].sum())
        if region:
            per_step = mine.groupby(["trace_id", "window_id"])["flop"].sum(min_count=1).dropna()
            n_steps = len(per_step)
        else:
            n_steps = sum(steps.get(int(t), 0) for t in part["trace_id"])
            per_step = pd.Series([flop / n_steps] if n_steps else [], dtype="float64")
        per_image = per_step / batch if batch else pd.Series([], dtype="float64")
        out.append({"run": run, "region": region, "steps": n_steps, "batch_size": batch, "flop": flop,
                    "flop_per_step": float(per_step.median()) if len(per_step) else None,
                    "flop_per_image": float(per_image.median()) if len(per_image) else None,
                    "flop_per_image_min": float(per_image.min()) if len(per_image) else None,
                    "flop_per_image_max": float(per_image.max()) if len(per_image) else None})
    return pd.DataFrame(out, columns=PER_RUN_COLUMNS)


NCU_REGION_NOTE = (
    "--region applies to estimates from traces: an Nsight Compute report has no ProfilerStep regions, "
    "and `capture --ncu` brackets whole profiled steps (cudaProfilerStart/Stop around forward, loss, "
    "backward and optimizer step). For the forward pass alone profile with ncu's NVTX filter "
    "(`capture --ncu --print-command`, then add `--nvtx --nvtx-include forward/`: on CUDA the capture "
    "marks each region with an NVTX range) and run roofline on that report without --region "
    "(docs/roofline.md, Regions)")


def _finish(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, opts: RooflineOptions,
            by_run: bool, peaks: GpuPeaks | None, per_run: pd.DataFrame) -> pd.DataFrame:
    """Per-name aggregation, the region's per-image figures on every row, the ``run`` column
    (kept with ``by_run``), in the order of :data:`COLUMNS`."""
    if opts.by_name:
        frame = _aggregate(con, frame, peaks, opts.peak_flops, by_run)
    if opts.region:
        column = f"{opts.region}_flop_per_image"
        figures = per_run.rename(columns={"flop_per_image": column})[["run", "batch_size", column]]
        if "run" in frame:
            frame = frame.merge(figures, on="run", how="left")
        else:  # aggregated without runs: one run at most (several make by_run)
            one = figures.iloc[0] if len(figures) == 1 else {"batch_size": None, column: None}
            frame = frame.assign(batch_size=one["batch_size"], **{column: one[column]})
    if not by_run:
        frame = frame.drop(columns=["run"], errors="ignore")
    frame = frame.rename(columns={"int_ops": "int_op"})
    work = frame["flop"].fillna(0) + frame["int_op"].fillna(0)
    work = work.where(frame["flop"].notna() | frame["int_op"].notna())
    frame["ai_op_per_byte"] = work / frame["bytes"].where(frame["bytes"] > 0)
    frame["achieved_op_per_s"] = work / frame["time_s"].where(frame["time_s"] > 0)
    return _order(frame)


def ncu_roofline(con: duckdb.DuckDBPyConnection, opts: RooflineOptions | None = None) -> RooflineResult:
    """Roofline of the Nsight Compute launches in ``con`` (one row per launch, or per kernel
    name with ``by_name``; a ``run`` column with ``by_run``)."""
    opts = opts or RooflineOptions()
    if opts.region is not None:
        raise InputError(NCU_REGION_NOTE)
    peaks, device = _fill_peaks(con, opts)
    frame = con.execute("SELECT * FROM roofline").df()
    frame["launches"] = 1
    notes = []
    if peaks is None:
        notes.append(f"no peak figures for device {device!r}: give --gpu or --peak-flops/--peak-bw")
    uncounted = frame["tensor_uncounted"].fillna(False).astype(bool)
    if uncounted.any():
        notes.append(f"{int(uncounted.sum())} launch(es) ran tensor-core MMA instructions but the input has "
                     "no per-opcode SASS counts (ncu's Instruction Statistics section; a CSV export keeps "
                     "them only with --print-metric-instances details): their FLOP, and so the totals, are "
                     "unknown (empty), not zero")
    shapes = frame["unknown_tensor_shapes"].fillna(False).astype(bool)
    if shapes.any():
        notes.append(f"{int(shapes.sum())} launch(es) ran tensor-core instructions of no known MMA shape: "
                     "their FLOP, and so the totals, are unknown (empty)")
    unknown = uncounted | shapes  # launches whose FLOP is unknown
    if not unknown.any() and (frame["flop"].fillna(0) == 0).all() and frame["int_ops"].isna().all():
        notes.append("the report holds no floating-point instruction metrics (profile with --set full "
                     "or the roofline sections)")
    runs = report_runs(con)
    frame = frame.merge(runs[["report_id", "run"]], on="report_id", how="left")
    per_run = per_run_figures(frame.assign(trace_id=frame["report_id"]), runs.assign(trace_id=runs["report_id"]),
                              None, opts.batch_size, {})
    unknown_runs = set(frame.loc[unknown, "run"])
    flop_cols = ["flop", "flop_per_step", "flop_per_image", "flop_per_image_min", "flop_per_image_max"]
    per_run.loc[per_run["run"].isin(unknown_runs), flop_cols] = float("nan")  # a sum without them is no total
    total_flop = float("nan") if unknown.any() else float(frame["flop"].sum())
    frame = _finish(con, frame, opts, opts.by_run, peaks, per_run)
    return RooflineResult(frame, "ncu", peaks, opts.peak_flops, device,
                          total_flop, float(frame["time_s"].sum()), opts.batch_size, notes,
                          roofs_by_precision(con, peaks, opts.peak_flops), None, per_run)


def _amd_by_properties(con: duckdb.DuckDBPyConnection) -> GpuPeaks | None:
    """The peaks of the first trace's first device from its ``deviceProperties`` (trace metadata),
    for an AMD device whose name matches no row (:func:`match_amd_properties`)."""
    row = con.execute("SELECT metadata FROM traces WHERE device_name IS NOT NULL ORDER BY trace_id LIMIT 1").fetchone()
    try:
        props = json.loads(row[0]).get("deviceProperties") if row and row[0] else None
    except (TypeError, ValueError, AttributeError):
        return None
    return match_amd_properties(props[0]) if isinstance(props, list) and props and isinstance(props[0], dict) else None


def estimate_roofline(con: duckdb.DuckDBPyConnection, opts: RooflineOptions | None = None) -> RooflineResult:
    """Roofline estimated from operator shapes of the Chrome traces in ``con``
    (:mod:`trace_report.analyses.roofline.estimate`); with ``opts.region`` only the operators of
    that region of each step, and its FLOP per image per run in ``per_run``."""
    opts = opts or RooflineOptions()
    rows = estimate_ops(con, opts.region)
    device = None
    names = con.execute("SELECT DISTINCT device_name FROM traces WHERE device_name IS NOT NULL").fetchall()
    if names:
        device = names[0][0]
    peaks = resolve_peaks(device, gpu=opts.gpu, peak_flops=opts.peak_flops, peak_bw=opts.peak_bw)
    by_properties = None if peaks is not None or opts.gpu else _amd_by_properties(con)
    if by_properties is not None:
        peaks = resolve_peaks(by_properties.key, peak_flops=opts.peak_flops, peak_bw=opts.peak_bw)
    runs = trace_runs(con)
    frame = rows.rename(columns={"op": "kernel"}).assign(launches=1, int_ops=math.nan)
    frame = frame.merge(runs[["trace_id", "run"]], on="trace_id", how="left")
    notes = ["FLOP and bytes are estimates from operator shapes (record_shapes=True), not measurements"]
    if by_properties is not None:
        notes.append(f"device {device!r}: the peaks of {by_properties.name}, from its deviceProperties (compute "
                     "capability and compute units; --gpu overrides)")
    if rows.empty and opts.region:
        raise InputError(
            f"no GEMM/convolution operator with shapes inside a {opts.region!r} region of the traces: "
            f"the region comes from record_function('{opts.region}') labels (trace-report capture adds them) "
            "or the forward/backward spans of docs/analysis.md, and shapes need record_shapes=True "
            "(capture --record-shapes)")
    if rows.empty:
        notes.append("no GEMM/convolution operators with shapes in the trace (record_shapes=True?)")
    else:
        unknown = rows["flop"].isna().sum()
        if unknown:
            notes.append(f"{unknown} operator call(s) without a FLOP count: {rows['note'].dropna().iloc[0]}")
        if rows["time_s"].isna().all():
            notes.append("no GPU kernels linked to these operators: time and FLOP/s are empty")
    if len(names) > 1:
        notes.append(f"traces from {len(names)} different devices; peaks of {device!r} used")
    per_run = per_run_figures(frame, runs, opts.region, opts.batch_size, _steps_per_trace(con))
    if opts.region:
        per_run = per_run[per_run["steps"] > 0].reset_index(drop=True)
        if per_run["batch_size"].isna().any():
            notes.append("batch size unknown for some runs (no run.json with config.batch_size): "
                         "give --batch-size for FLOP per image")
    frame = apply_roofs(con, frame, peaks, opts.peak_flops)
    by_run = opts.by_run or (opts.region is not None and len(per_run) > 1)
    frame = _finish(con, frame, opts, by_run, peaks, per_run)
    batch = opts.batch_size
    if batch is None and len(per_run) == 1 and pd.notna(per_run["batch_size"].iloc[0]):
        batch = int(per_run["batch_size"].iloc[0])
    return RooflineResult(frame, "estimate", peaks, opts.peak_flops, device,
                          float(frame["flop"].sum()), float(frame["time_s"].sum()), batch, notes,
                          roofs_by_precision(con, peaks, opts.peak_flops), opts.region, per_run)


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
