"""Chart builders over capture results (``results.csv`` of an experiment, ``metrics.csv`` of its
runs; columns in ``docs/capture.md``): worker sweep, optimizers per epoch, speed-up between
variants (CPU/GPU), AMP batch sweep and eager against ``torch.compile``. Times in seconds,
throughput in samples/s, memory in MB. Frames are never modified.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from trace_report.present.charts.loading import altair

if TYPE_CHECKING:
    import altair as alt

WIDTH = 300


def _numeric(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    out = frame.copy()
    for col in columns:
        out[col] = pd.to_numeric(out[col], errors="coerce")
    return out


def worker_sweep_chart(results: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Mean data-loading, compute and total time per epoch (s) against DataLoader workers, from
    the ``workers`` experiment's ``results.csv``."""
    alt = altair()

    cols = {"mean_data_s": "data loading", "mean_compute_s": "compute", "mean_total_s": "total"}
    data = _numeric(results, ["workers", *cols])
    long = data.melt(id_vars=["workers"], value_vars=list(cols), var_name="part", value_name="seconds")
    long["part"] = long["part"].map(cols)
    return alt.Chart(long, title=title or "DataLoader workers: time per epoch").mark_line(point=True).encode(
        x=alt.X("workers:Q", title="DataLoader workers", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("seconds:Q", title="mean time per epoch (s)"),
        color=alt.Color("part:N", sort=list(cols.values()), title=None),
        tooltip=[alt.Tooltip("workers:Q"), alt.Tooltip("part:N"), alt.Tooltip("seconds:Q", format=".3f")],
    ).properties(width=2 * WIDTH)


def optimizer_epochs_chart(metrics: pd.DataFrame, *, by: str = "optimizer", title: str | None = None) -> alt.Chart:
    """Training loss and accuracy per epoch, one line per ``by`` (optimizer), from the runs'
    ``metrics.csv`` rows with the run's optimizer (``run_metrics JOIN runs``)."""
    alt = altair()

    names = {"loss": "training loss", "accuracy": "training accuracy", "test_accuracy": "test accuracy"}
    present = [c for c in names if c in metrics.columns]
    data = _numeric(metrics, ["epoch", *present])
    long = data.melt(id_vars=[by, "epoch"], value_vars=present, var_name="metric", value_name="value")
    long["metric"] = long["metric"].map(names)
    return alt.Chart(long, title=title or "Optimizers: loss and accuracy per epoch").mark_line(point=True).encode(
        x=alt.X("epoch:Q", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("value:Q", title=None),
        color=alt.Color(f"{by}:N"),
        column=alt.Column("metric:N", title=None, sort=[names[c] for c in present]),
        tooltip=[alt.Tooltip(f"{by}:N"), alt.Tooltip("epoch:Q"), alt.Tooltip("metric:N"),
                 alt.Tooltip("value:Q", format=".4f")],
    ).properties(width=WIDTH).resolve_scale(y="independent")


def speedup_chart(results: pd.DataFrame, *, measure: str = "mean_total_s", baseline: str | None = None,
                  title: str | None = None) -> alt.Chart:
    """Speed-up of each variant over ``baseline`` (default: the first row), as the ratio of
    ``measure`` (s, lower is better): e.g. the ``devices`` experiment (CPU 1 thread, CPU all
    threads, GPU)."""
    alt = altair()

    data = _numeric(results, [measure])
    base_row = data[data["variant"] == baseline] if baseline is not None else data.head(1)
    base_name = str(base_row["variant"].iloc[0]) if len(base_row) else "first"
    base = float(base_row[measure].iloc[0]) if len(base_row) else float("nan")
    data["speedup"] = base / data[measure]
    bars = alt.Chart(data).mark_bar().encode(
        x=alt.X("variant:N", sort=list(data["variant"]), title=None),
        y=alt.Y("speedup:Q", title=f"speed-up over {base_name} (x)"),
        color=alt.Color("variant:N", legend=None),
        tooltip=[alt.Tooltip("variant:N"), alt.Tooltip(f"{measure}:Q", format=".4f"),
                 alt.Tooltip("speedup:Q", format=".2f")],
    )
    text = bars.mark_text(dy=-6).encode(text=alt.Text("speedup:Q", format=".2f"), color=alt.ColorValue("#333"))
    return (bars + text).properties(
        title=title or f"Speed-up over {base_name} ({measure})", width=WIDTH)  # type: ignore[return-value]


def amp_sweep_chart(results: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Throughput (median samples/s over unprofiled steps) and peak memory (MB) against batch
    size, fp32 against AMP, from the ``amp`` experiment's ``results.csv``."""
    alt = altair()

    cols = {"median_samples_per_s": "throughput (samples/s)", "peak_memory_mb": "peak memory (MB)"}
    data = _numeric(results, ["batch_size", *cols])
    long = data.melt(id_vars=["batch_size", "precision"], value_vars=list(cols), var_name="metric",
                     value_name="value")
    long["metric"] = long["metric"].map(cols)
    return alt.Chart(long, title=title or "AMP: throughput and memory by batch size").mark_line(point=True).encode(
        x=alt.X("batch_size:Q", scale=alt.Scale(type="log", base=2), title="batch size"),
        y=alt.Y("value:Q", title=None),
        color=alt.Color("precision:N"),
        column=alt.Column("metric:N", title=None, sort=list(cols.values())),
        tooltip=[alt.Tooltip("precision:N"), alt.Tooltip("batch_size:Q"), alt.Tooltip("metric:N"),
                 alt.Tooltip("value:Q", format=",.1f")],
    ).properties(width=WIDTH).resolve_scale(y="independent")


def compile_chart(results: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Eager against ``torch.compile``: the first epoch (compiles) and the median timed epoch
    (s) per variant, from the ``compile`` experiment's ``results.csv``."""
    alt = altair()

    cols = {"first_run_s": "first epoch (compiles)", "median_run_s": "median timed epoch"}
    data = _numeric(results, [*cols, "speedup"])
    long = data.melt(id_vars=["variant"], value_vars=list(cols), var_name="epoch", value_name="seconds")
    long["epoch"] = long["epoch"].map(cols)
    compiled = data.loc[data["variant"] == "compiled", "speedup"]
    default = "Eager against torch.compile"
    if len(compiled) and pd.notna(compiled.iloc[0]):
        default += f" (compiled: {compiled.iloc[0]:.2f}x eager speed)"
    return alt.Chart(long, title=title or default).mark_bar().encode(
        x=alt.X("variant:N", sort=list(data["variant"]), title=None),
        xOffset=alt.XOffset("epoch:N", sort=list(cols.values())),
        y=alt.Y("seconds:Q", title="seconds"),
        color=alt.Color("epoch:N", sort=list(cols.values()), title=None),
        tooltip=[alt.Tooltip("variant:N"), alt.Tooltip("epoch:N"), alt.Tooltip("seconds:Q", format=".3f")],
    ).properties(width=WIDTH)
