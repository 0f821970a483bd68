"""Chart builders over trace analyses: top kernels, regions per step, kernel classes, the
timeline of one step, and the difference between two traces. Each takes the analysis frame (never
modified) and returns an Altair chart; times in µs, shares in percent.

Names are kept whole in the data (tooltips show them, escaped by vega-tooltip) and shortened in
an axis ``label`` column (:func:`short_name`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pandas as pd

from trace_report.analyses.breakdown import REGIONS
from trace_report.present.charts.loading import altair
from trace_report.present.fit import short_names

if TYPE_CHECKING:
    import altair as alt

    from trace_report.present.charts.data import Timeline

REGION_COLORS = ["#4c78a8", "#e45756", "#f58518", "#54a24b", "#b279a2", "#bab0ac"]
"""One color per region of :data:`~trace_report.analyses.common.regions.REGIONS`, in that order."""
STATUS_COLORS = {"new": "#d62728", "more": "#ff9896", "same": "#bbbbbb", "less": "#98df8a", "vanished": "#2ca02c"}
LABEL_CHARS = 90
LABEL_PX = 8 * LABEL_CHARS  # the axis never truncates a label (Vega's labelLimit would cut its end)
TOOLTIP_CHARS = 200  # timeline tooltips: thousands of rows, keep the page small
WIDTH = 620
PAGE_PX = 1100
"""Pixels a chart may take, labels and legend included: the report's column (1180 px less its
padding) with room to spare, so that no chart is cut at the right."""
LABEL_CHAR_PX = 6.2  # Vega's default 10 px sans-serif label, per character (generous)
LEGEND_PX = 140


def fit_width(labels: list[str], *, legend: bool = True) -> int:
    """The plot width that leaves room, within :data:`PAGE_PX`, for the longest of ``labels`` on
    the y axis and a legend on the right; at most :data:`WIDTH`, at least 280 px."""
    label_px = LABEL_CHAR_PX * max((len(s) for s in labels), default=0) + 20
    return int(max(280, min(WIDTH, PAGE_PX - label_px - (LEGEND_PX if legend else 0))))


def short_name(name: object, limit: int = LABEL_CHARS, *, identity: bool = False) -> str:
    """A readable label for a C++ kernel name, at most ``limit`` characters
    (:func:`~trace_report.present.fit.short_names`: no ``void``, parameter lists, namespaces or
    scaffolding; the kernel function and its innermost functor kept). ``identity``: the functor
    is never cut, even past ``limit`` (a headline)."""
    full = re.sub(r"\s+", " ", str(name)).strip()
    return short_names([full], limit, identity=identity)[0] if full else full


def unique_labels(names: pd.Series, limit: int = LABEL_CHARS) -> list[str]:
    """Labels of ``names`` shortened together (:func:`~trace_report.present.fit.short_names`:
    different names, different labels); a name repeated gets `` [2]``, `` [3]``..."""
    values = [re.sub(r"\s+", " ", str(n)).strip() for n in names]
    labels = short_names(values, limit)
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label[:limit - 5]} [{seen[label]}]")
    return out


def region_scale() -> alt.Scale:
    alt = altair()

    return alt.Scale(domain=list(REGIONS), range=REGION_COLORS)


def top_kernels_chart(frame: pd.DataFrame, *, limit: int = 20, title: str | None = None) -> alt.Chart:
    """Horizontal bars of total time (µs) of the ``limit`` longest kernels (or CPU operators, on a
    CPU-only trace) from :func:`~trace_report.analyses.top_kernels.top_kernels`."""
    alt = altair()

    by_run = "run" in frame.columns
    order = frame.groupby("name", sort=False)["total_us"].sum().sort_values(ascending=False).head(limit)
    data = frame[frame["name"].isin(order.index)].copy()
    labels = dict(zip(order.index, unique_labels(pd.Series(order.index)), strict=True))
    data["label"] = data["name"].map(labels)
    cpu = bool(len(data)) and (data["kind"] == "cpu_op").all()
    default = "Top CPU operators by self time (no GPU kernels)" if cpu else "Top GPU kernels by total time"
    pct = next(c for c in data.columns if c.startswith("pct"))
    color = alt.Color("run:N", title="Run", legend=alt.Legend(orient="bottom-right", fillColor="white")) \
        if by_run else alt.Color(f"{pct}:Q", title="% of CPU self time" if cpu else "% of GPU time",
                                 scale=alt.Scale(scheme="blues"))
    extra = {"yOffset": alt.YOffset("run:N")} if by_run else {}
    return alt.Chart(data, title=title or (default + (", one bar per run" if by_run else ""))).mark_bar().encode(
        y=alt.Y("label:N", sort=[labels[n] for n in order.index], title=None, axis=alt.Axis(labelLimit=LABEL_PX)),
        x=alt.X("total_us:Q", title="self time (µs)" if cpu else "total time (µs)"),
        color=color, **extra,
        tooltip=[*([alt.Tooltip("run:N")] if by_run else []), alt.Tooltip("name:N", title="name"),
                 alt.Tooltip("count:Q"), alt.Tooltip("total_us:Q", format=",.1f"),
                 alt.Tooltip("mean_us:Q", format=",.2f"), alt.Tooltip(f"{pct}:Q", format=".2f")],
    ).properties(width=fit_width(list(labels.values())))


def regions_chart(frame: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Stacked bars per step: wall time and GPU kernel time (µs) of each region, from
    ``breakdown(db, BreakdownOptions(by_step=True)).frame``. GPU time is left out when the
    traces have none; a trace without ProfilerSteps is one bar."""
    alt = altair()

    data = frame.copy()
    data["step"] = data["step"].map(lambda s: "whole trace" if pd.isna(s) else str(int(s)))
    if "rank" in data.columns:  # one bar per step of each rank: ranks are never stacked as one step
        data["step"] = "rank " + data["rank"].astype(str) + " · " + data["step"]
    if "run" in data.columns:  # one bar per step of each run: runs are never added up
        data["step"] = data["run"].astype(str) + " · " + data["step"]
    data.loc[data["region"] == "before_first_step", "step"] = data["step"].str.replace(
        "whole trace", "before first step", regex=False)
    measures = ["wall_us"] + (["gpu_us"] if data["gpu_us"].notna().any() else [])
    long = data.melt(id_vars=["step", "region", "kernels"], value_vars=measures, var_name="measure",
                     value_name="us")
    long["measure"] = long["measure"].map({"wall_us": "wall time (µs)", "gpu_us": "GPU kernel time (µs)"})
    long["order"] = long["region"].map({r: i for i, r in enumerate(REGIONS)})
    steps = list(dict.fromkeys(data["step"]))
    return alt.Chart(long, title=title or "Time per region in each step").mark_bar().encode(
        x=alt.X("step:N", sort=steps, title="ProfilerStep", axis=alt.Axis(labelAngle=0 if len(steps) < 8 else -45)),
        y=alt.Y("us:Q", stack="zero", title="µs"),
        color=alt.Color("region:N", scale=region_scale(), sort=list(REGIONS)),
        order=alt.Order("order:Q"),
        column=alt.Column("measure:N", title=None, sort=["wall time (µs)", "GPU kernel time (µs)"]),
        tooltip=[alt.Tooltip("step:N"), alt.Tooltip("region:N"), alt.Tooltip("us:Q", format=",.1f"),
                 alt.Tooltip("kernels:Q")],
    ).properties(width=max(160, min(WIDTH // len(measures), 60 * len(steps)))).resolve_scale(y="independent")


def kernel_classes_chart(summary: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Bars of each kernel class's share of GPU time (%), from ``flags(db).summary``. A kernel
    can belong to several classes (tensor_core and tf32), so shares do not add up to 100. With a
    ``run`` column (one summary per run, each of its own GPU time), one bar and colour per run in
    each class: runs are never added up."""
    alt = altair()

    data = summary[summary["pct_of_gpu_time"].notna()].copy()
    by_run = "run" in data.columns
    color = alt.Color("run:N", title="Run", legend=alt.Legend(orient="bottom-right", fillColor="white")) \
        if by_run else alt.Color("class:N", legend=None)
    extra = {"yOffset": alt.YOffset("run:N")} if by_run else {}
    default = "Share of GPU time by kernel class" + (", one bar per run (% of that run's GPU time)" if by_run else "")
    return alt.Chart(data, title=title or default).mark_bar().encode(
        y=alt.Y("class:N", sort=list(dict.fromkeys(data["class"])), title=None),
        x=alt.X("pct_of_gpu_time:Q", title="% of GPU time", scale=alt.Scale(domain=[0, 100])),
        color=color, **extra,
        tooltip=[*([alt.Tooltip("run:N")] if by_run else []), alt.Tooltip("class:N"), alt.Tooltip("count:Q"),
                 alt.Tooltip("names:Q"),
                 alt.Tooltip("total_us:Q", format=",.1f"), alt.Tooltip("pct_of_gpu_time:Q", format=".2f")],
    ).properties(width=WIDTH)


def timeline_chart(timeline: Timeline, *, title: str | None = None) -> alt.Chart:
    """Gantt bars of one step (:func:`~trace_report.present.charts.data.step_timeline`): the CPU-side
    regions on top, then one lane per GPU stream (or CPU thread), colored by region; µs from the
    step's start."""
    alt = altair()

    data = timeline.frame.copy()
    data["name"] = data["name"].map(lambda n: n if len(str(n)) <= TOOLTIP_CHARS else str(n)[: TOOLTIP_CHARS - 1] + "…")
    lanes = list(dict.fromkeys(data["lane"]))
    step = f"ProfilerStep#{timeline.step}" if timeline.step is not None else "whole trace"
    default = f"Timeline of {step} (trace {timeline.trace_id}, {timeline.step_us:,.0f} µs)"
    return alt.Chart(data, title=title or default).mark_bar(height=14).encode(
        x=alt.X("start_us:Q", title="µs from step start"), x2=alt.X2("end_us:Q"),
        y=alt.Y("lane:N", sort=lanes, title=None),
        color=alt.Color("region:N", scale=region_scale(), sort=list(REGIONS)),
        tooltip=[alt.Tooltip("name:N"), alt.Tooltip("kind:N"), alt.Tooltip("region:N"),
                 alt.Tooltip("start_us:Q", format=",.1f"),
                 alt.Tooltip("dur_us:Q", format=",.2f")],
    ).properties(width=WIDTH + 200, height=max(60, 24 * len(lanes)))


def _tail(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` (a path) cut to its last ``limit`` characters, where the file name is."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1:]


def compare_chart(frame: pd.DataFrame, *, limit: int = 20, value: str = "diff_us",
                  title: str | None = None, a: str = "A", b: str = "B") -> alt.Chart:
    """Diverging bars of the ``limit`` largest differences (B - A, µs) from
    :func:`~trace_report.analyses.compare.compare`, colored by status (new, more, same, less,
    vanished). ``a`` and ``b`` name the two sides (a path or run); the subtitle says which is
    which and the axis which direction is longer in B."""
    alt = altair()

    data = frame.head(limit).copy()
    key = "name" if "name" in data.columns else "region"
    data["label"] = unique_labels(data[key])
    tips = [alt.Tooltip(f"{key}:N"), alt.Tooltip("status:N"), alt.Tooltip(f"{value}:Q", format=",.1f")]
    tips += [alt.Tooltip(f"{c}:Q", format=",.1f") for c in ("a_total_us", "b_total_us", "a_count", "b_count")
             if c in data.columns]
    heading = alt.TitleParams(title or "Largest differences, B - A",
                              subtitle=[f"A = {_tail(a)}", f"B = {_tail(b)}"],
                              anchor="start")
    return alt.Chart(data, title=heading).mark_bar().encode(
        y=alt.Y("label:N", sort=list(data["label"]), title=None, axis=alt.Axis(labelLimit=LABEL_PX)),
        x=alt.X(f"{value}:Q", title="B - A (µs): > 0 more time in B, < 0 less"),
        color=alt.Color("status:N", scale=alt.Scale(domain=list(STATUS_COLORS), range=list(STATUS_COLORS.values())),
                        title="in B"),
        tooltip=tips,
    ).properties(width=WIDTH)
