"""Altair charts of trace analyses and capture results (docs/architecture.md).

One builder per chart, each returning an Altair chart built from an analysis frame; saving as
self-contained offline HTML, PNG or SVG in :mod:`trace_report.present.charts.html`. Altair is imported
inside the builders (it takes about a second), so importing this package is cheap.

>>> from trace_report.present.charts import top_kernels_chart, save_chart     # doctest: +SKIP
>>> save_chart(top_kernels_chart(db.top_kernels()), "top.html")       # doctest: +SKIP
"""

from trace_report.present.charts.data import Timeline, step_timeline
from trace_report.present.charts.html import chart_html, save_chart
from trace_report.present.charts.roofline import chart_points, roofline_chart
from trace_report.present.charts.runs import (
    amp_sweep_chart,
    compile_chart,
    optimizer_epochs_chart,
    speedup_chart,
    worker_sweep_chart,
)
from trace_report.present.charts.traces import (
    compare_chart,
    kernel_classes_chart,
    regions_chart,
    timeline_chart,
    top_kernels_chart,
)

__all__ = [
    "Timeline",
    "amp_sweep_chart",
    "chart_html",
    "chart_points",
    "compare_chart",
    "compile_chart",
    "kernel_classes_chart",
    "optimizer_epochs_chart",
    "regions_chart",
    "roofline_chart",
    "save_chart",
    "speedup_chart",
    "step_timeline",
    "timeline_chart",
    "top_kernels_chart",
    "worker_sweep_chart",
]
