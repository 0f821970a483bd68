"""Experiment results: one summary row per run, ``results.csv`` + ``results.json``, and charts
(Altair builders returning ``alt.Chart``; saved as ``chart.html`` and, offline, ``chart.svg``)."""

from __future__ import annotations

import math
import statistics
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trace_report.capture.loop import EpochRecord, RunResult, StepRecord
from trace_report.capture.runtime import write_json
from trace_report.present.charts.html import save_chart as save_offline
from trace_report.present.charts.loading import altair
from trace_report.present.tables import records


@dataclass
class ExperimentResult:
    """What an experiment measured: one row per variant, a chart, notes for the reader."""

    name: str
    run_dir: Path
    table: pd.DataFrame
    chart: Any = None  # alt.Chart | None
    _: KW_ONLY
    notes: list[str] = field(default_factory=list)
    details: str = ""  # longer text to print before the table (the TorchScript graph)
    runs: list[RunResult] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def timed_epochs(epochs: list[EpochRecord]) -> list[EpochRecord]:
    """Epochs that count for timing: all but the first (warm-up) when there are several."""
    return epochs[1:] if len(epochs) > 1 else epochs


def median_step_s(steps: list[StepRecord]) -> float:
    """Median wall time of a training step (s), skipping the first step of each epoch (loader
    start-up, lazy initialisation) and the steps the profiler recorded; falls back to all."""
    firsts = {s.epoch: s.step for s in reversed(steps)}
    clean = [s.total_s for s in steps if not s.profiled and firsts[s.epoch] != s.step]
    return statistics.median(clean or [s.total_s for s in steps]) if steps else math.nan


def summarize(run: RunResult, **labels: Any) -> dict[str, Any]:
    """One results row for ``run``: ``labels`` first, then per-epoch means (s) over the timed
    epochs, throughput, final loss/accuracy and peak memory (MB)."""
    cfg = run.config
    timed = timed_epochs(run.epochs)
    n = len(timed)
    median_s = median_step_s(run.steps)
    peak = run.peak_memory_bytes
    return {
        **labels,
        "model": cfg.model,
        "device": run.device,
        "threads": run.manifest.get("environment", {}).get("torch_threads"),
        "workers": cfg.workers,
        "batch_size": cfg.batch_size,
        "optimizer": cfg.optimizer,
        "lr": cfg.learning_rate,
        "amp": cfg.amp,
        "epochs": len(run.epochs),
        "timed_epochs": n,
        "steps_per_epoch": run.epochs[0].steps,
        "mean_data_s": sum(e.data_s for e in timed) / n,
        "mean_compute_s": sum(e.compute_s for e in timed) / n,
        "mean_total_s": sum(e.total_s for e in timed) / n,
        "samples_per_s": sum(e.samples for e in timed) / sum(e.total_s for e in timed),
        "median_step_s": median_s,
        "median_samples_per_s": cfg.batch_size / median_s if median_s > 0 else math.nan,
        "final_loss": run.epochs[-1].loss,
        "final_accuracy": run.epochs[-1].accuracy,
        "test_accuracy": run.epochs[-1].test_accuracy,
        "peak_memory_mb": peak / 2**20 if peak is not None else math.nan,
        "forward_flop_per_image": run.manifest.get("flop", {}).get("forward_flop_per_image"),
        "run_dir": str(run.run_dir),
    }


SPREAD_COLUMNS: tuple[str, ...] = ("mean_total_s", "samples_per_s", "median_samples_per_s")
"""Columns that get ``_min`` and ``_max`` beside their median over ``--repeats`` runs."""
TIMED_COLUMNS: tuple[str, ...] = (
    "mean_data_s", "mean_compute_s", "mean_total_s", "samples_per_s", "median_step_s",
    "median_samples_per_s",
)
"""Timing columns reported as the median over ``--repeats`` runs."""


def combine_repeats(
    rows: list[dict[str, Any]], *, timed: tuple[str, ...] = TIMED_COLUMNS,
    spread: tuple[str, ...] = SPREAD_COLUMNS,
) -> dict[str, Any]:
    """One row from the rows of repeated runs of a variant: the ``timed`` columns are the
    median over the runs, each ``spread`` column also gets ``<col>_min`` and ``<col>_max``,
    and the rest come from the first run; ``repeats`` says how many runs there were."""
    out = dict(rows[0])
    for col in timed:
        values = [r[col] for r in rows if r.get(col) is not None and not _isnan(r[col])]
        if col not in out:
            continue
        out[col] = statistics.median(values) if values else math.nan
        if col in spread:
            out[f"{col}_min"] = min(values) if values else math.nan
            out[f"{col}_max"] = max(values) if values else math.nan
    out["repeats"] = len(rows)
    return out


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def add_speedup(table: pd.DataFrame, time_col: str, *, base: Any = None, by: str | None = None,
                base_col: str = "variant") -> pd.DataFrame:
    """``speedup`` = time of the baseline row / time of each row (>1 means faster). The
    baseline is the row whose ``base_col`` equals ``base`` (default: the first row); with
    ``by``, one baseline per group (e.g. per device)."""
    groups = table.groupby(by, sort=False) if by else [(None, table)]
    speedup = pd.Series(math.nan, index=table.index)
    for _, group in groups:
        ref = group if base is None else group[group[base_col] == base]
        if len(ref):
            speedup[group.index] = ref[time_col].iloc[0] / group[time_col]
    out = table.copy()
    out["speedup"] = speedup
    return out


def write_results(result: ExperimentResult) -> list[Path]:
    """Write ``results.csv``, ``results.json`` (array of row objects) and the chart."""
    out = result.run_dir
    csv_path = out / "results.csv"
    result.table.to_csv(csv_path, index=False)
    json_path = write_json(out / "results.json", records(result.table))  # as --format json
    files = [csv_path, json_path]
    if result.chart is not None:
        files += save_chart(result.chart, out / "chart")
    result.files = files
    return files


def save_chart(chart: Any, stem: Path) -> list[Path]:
    """Save ``chart`` as ``<stem>.html`` (self-contained: works offline, names escaped) and,
    when vl-convert works, ``<stem>.svg``."""
    html = save_offline(chart, stem.with_suffix(".html"))
    files = [html]
    try:
        save_offline(chart, stem.with_suffix(".svg"))
        files.append(stem.with_suffix(".svg"))
    except Exception:  # noqa: BLE001 - the SVG is a convenience; the HTML is the chart
        pass
    return files


def time_chart(table: pd.DataFrame, category: str, title: str):
    """Stacked bars of mean data-loading and compute time per epoch (s) for each ``category``."""
    alt = altair()

    long = table.melt(
        id_vars=[category], value_vars=["mean_data_s", "mean_compute_s"],
        var_name="part", value_name="seconds",
    )
    long["part"] = long["part"].map({"mean_data_s": "data loading", "mean_compute_s": "compute"})
    long[category] = long[category].astype(str)
    return (
        alt.Chart(long, title=title)
        .mark_bar()
        .encode(
            x=alt.X(f"{category}:N", sort=None, title=category),
            y=alt.Y("seconds:Q", title="mean time per epoch (s)"),
            color=alt.Color("part:N", title=None),
            tooltip=[alt.Tooltip(category), alt.Tooltip("part"), alt.Tooltip("seconds:Q", format=".3f")],
        )
    )


def metric_chart(table: pd.DataFrame, x: str, y: str, title: str, *, color: str | None = None):
    """Bars of ``y`` per ``x`` (lines when ``x`` is numeric and ``color`` splits the series)."""
    alt = altair()

    data = table.copy()
    if color is not None:
        data[color] = data[color].astype(str)
        chart = alt.Chart(data, title=title).mark_line(point=True).encode(
            x=alt.X(f"{x}:Q", scale=alt.Scale(type="log", base=2)), y=alt.Y(f"{y}:Q"), color=alt.Color(f"{color}:N")
        )
    else:
        data[x] = data[x].astype(str)
        chart = alt.Chart(data, title=title).mark_bar().encode(
            x=alt.X(f"{x}:N", sort=None), y=alt.Y(f"{y}:Q")
        )
    return chart.encode(tooltip=[alt.Tooltip(c) for c in dict.fromkeys([x, y] + ([color] if color else []))])
