"""Every chart builder on real data (shared traces, real capture output), through ``to_dict()``;
saving as offline HTML, PNG and SVG; names escaped on their way into HTML."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
import pytest
from conftest import TRACES, captured_runs, invoke

import trace_report as tr
from trace_report.analyses.breakdown import BreakdownOptions, breakdown, kernel_regions
from trace_report.analyses.compare import compare
from trace_report.analyses.flags import flags
from trace_report.analyses.roofline.measured import RooflineResult
from trace_report.analyses.roofline.peaks import resolve_peaks
from trace_report.api import open as open_runs
from trace_report.errors import InputError
from trace_report.present import charts
from trace_report.present.charts.html import chart_html, script_json
from trace_report.present.charts.roofline import ai_only_points
from trace_report.present.charts.traces import short_name

A100 = TRACES / "hta_a100_ddp_nccl"
needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")


def values(chart) -> list[dict]:
    """The rows of a chart's (single) inline dataset."""
    spec = chart.to_dict()
    (rows,) = spec["datasets"].values()
    return rows


def encoding(chart) -> dict:
    spec = chart.to_dict()
    return spec.get("encoding") or spec["layer"][0]["encoding"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    with open_runs([captured_runs(tmp_path_factory)]) as db:
        yield db


@needs_shared
def test_top_kernels_chart(a100):
    frame = a100.top_kernels(10)
    before = frame.copy()
    chart = charts.top_kernels_chart(frame, limit=10)
    rows = values(chart)
    assert [r["name"] for r in rows] == list(frame["name"])  # whole names in the data (tooltips)
    assert rows[0]["name"].startswith("ncclKernel_AllReduce_RING_LL_Sum_float")
    assert rows[0]["label"] == "ncclKernel_AllReduce_RING_LL_Sum_float"
    assert sum(r["total_us"] for r in rows) == pytest.approx(frame["total_us"].sum())
    assert encoding(chart)["x"]["field"] == "total_us" and chart.to_dict()["mark"]["type"] == "bar"
    assert "GPU kernels" in chart.to_dict()["title"]
    pd.testing.assert_frame_equal(frame, before)  # the caller's frame is untouched


def test_top_kernels_chart_on_a_cpu_capture(runs):
    chart = charts.top_kernels_chart(runs.top_kernels(15))
    assert "CPU operators by self time" in chart.to_dict()["title"]
    assert {r["kind"] for r in values(chart)} == {"cpu_op"}


@needs_shared
def test_regions_chart_stacks_each_step(a100):
    frame = breakdown(a100, BreakdownOptions(by_step=True)).frame
    chart = charts.regions_chart(frame)
    rows = pd.DataFrame(values(chart))
    steps = a100.sql("SELECT step, dur_us FROM steps").df()
    wall = rows[rows["measure"] == "wall time (µs)"].groupby("step")["us"].sum()
    for step, dur in steps.itertuples(index=False):
        assert wall[str(step)] == pytest.approx(dur)  # the regions partition each step
    gpu = rows[rows["measure"] == "GPU kernel time (µs)"]["us"].sum()
    assert gpu == pytest.approx(162_532.34, abs=0.01)  # every kernel, once (MANIFEST.tsv)
    enc = chart.to_dict()["encoding"]
    assert enc["y"]["stack"] == "zero" and enc["color"]["field"] == "region"


def test_regions_chart_cpu_only_capture(runs):
    frame = breakdown(runs, BreakdownOptions(by_step=True)).frame
    rows = pd.DataFrame(values(charts.regions_chart(frame)))
    assert set(rows["measure"]) == {"wall time (µs)"}  # no GPU time on a CPU capture
    assert {"forward", "backward", "optimizer_step"} <= set(rows.loc[rows["us"] > 0, "region"])
    steps_us = runs.sql("SELECT sum(dur_us) FROM steps").fetchall()[0][0]
    assert rows["us"].sum() == pytest.approx(steps_us)  # the regions partition every step of every run


@needs_shared
def test_kernel_classes_chart(a100):
    chart = charts.kernel_classes_chart(flags(a100).summary)
    rows = {r["class"]: r for r in values(chart)}
    assert rows["tf32"]["count"] == 216 and rows["tf32"]["pct_of_gpu_time"] == pytest.approx(9.585, abs=0.001)
    assert rows["layout_conversion"]["count"] == 633
    assert encoding(chart)["x"]["field"] == "pct_of_gpu_time"


@needs_shared
def test_timeline_chart_of_one_step(a100):
    tl = charts.step_timeline(a100)
    assert tl.step == 4  # the median of steps 4, 5, 6 by duration
    frame = tl.frame
    kernels = frame[frame["kind"] == "kernel"]
    attributed = kernel_regions(a100)
    window = attributed[attributed["step"] == tl.step]
    assert len(kernels) == len(window) and kernels["dur_us"].sum() == pytest.approx(window["dur_us"].sum())
    by_region = kernels.groupby("region")["dur_us"].sum()
    per_step = breakdown(a100, BreakdownOptions(by_step=True)).frame
    gpu = per_step[per_step["step"] == tl.step].set_index("region")["gpu_us"]
    for region, us in by_region.items():
        assert us == pytest.approx(gpu[region])  # same attribution as the breakdown
    regions = frame[frame["lane"] == "CPU: regions"]
    assert regions["dur_us"].sum() == pytest.approx(tl.step_us)
    assert set(frame["lane"]) == {"CPU: regions", "GPU stream 7", "GPU stream 40"}
    chart = charts.timeline_chart(tl)
    assert encoding(chart)["x2"]["field"] == "end_us" and len(values(chart)) == len(frame)


def test_timeline_of_a_cpu_capture(runs):
    trace_id = runs.sql("SELECT trace_id FROM run_traces WHERE run_key = 'base'").fetchall()[0][0]
    tl = charts.step_timeline(runs, trace_id=trace_id)
    assert tl.notes and "CPU operators" in tl.notes[0]
    assert any(lane.startswith("CPU thread") for lane in tl.frame["lane"])
    assert charts.timeline_chart(tl).to_dict()["mark"]["type"] == "bar"
    with pytest.raises(InputError, match="ProfilerStep#999"):
        charts.step_timeline(runs, trace_id=trace_id, step=999)


def _results(runs, run_key: str) -> pd.DataFrame:
    return runs.sql(f"SELECT * FROM run_results WHERE run_key = '{run_key}'").df().dropna(axis=1, how="all")


def test_worker_sweep_chart(runs):
    chart = charts.worker_sweep_chart(_results(runs, "wk"))
    rows = pd.DataFrame(values(chart))
    assert sorted(set(rows["workers"])) == [0, 1] and set(rows["part"]) == {"data loading", "compute", "total"}
    assert (rows["seconds"] > 0).all()


def test_optimizer_epochs_chart(runs):
    metrics = runs.sql("SELECT r.optimizer, m.* FROM run_metrics m JOIN runs r USING (run_key) "
                       "WHERE r.experiment = 'optimizers' AND r.kind = 'run'").df()
    chart = charts.optimizer_epochs_chart(metrics)
    rows = pd.DataFrame(values(chart))
    assert sorted(set(rows["optimizer"])) == ["adadelta", "adagrad", "adam", "sgd", "sgd-nesterov"]
    assert sorted(set(rows["epoch"])) == [1, 2]
    assert set(rows["metric"]) == {"training loss", "training accuracy", "test accuracy"}
    assert chart.to_dict()["encoding"]["column"]["field"] == "metric"


def test_speedup_chart_cpu_threads(runs):
    results = _results(runs, "dev")
    chart = charts.speedup_chart(results)
    rows = {r["variant"]: r for r in values(chart)}
    assert rows["cpu-1-thread"]["speedup"] == pytest.approx(1.0)
    other = [v for v in rows if v != "cpu-1-thread"]
    assert other and all(rows[v]["speedup"] > 0 for v in other)


def test_amp_sweep_chart(runs):
    chart = charts.amp_sweep_chart(_results(runs, "amp"))
    rows = pd.DataFrame(values(chart))
    assert set(rows["precision"]) == {"fp32", "amp-bf16"} and sorted(set(rows["batch_size"])) == [2, 3]
    assert set(rows["metric"]) == {"throughput (samples/s)", "peak memory (MB)"}
    assert (rows["value"] > 0).all()


def test_compile_chart(runs):
    chart = charts.compile_chart(_results(runs, "cmp"))
    rows = pd.DataFrame(values(chart))
    assert set(rows["variant"]) == {"eager", "compiled"}
    assert "x eager speed" in chart.to_dict()["title"]
    assert chart.to_dict()["encoding"]["xOffset"]["field"] == "epoch"


@needs_shared
def test_compare_chart():
    pair = TRACES / "hta_trace_diff"
    with tr.open(pair / "control.json.gz") as a, tr.open(pair / "test.json.gz") as b:
        result = compare(a, b)
    chart = charts.compare_chart(result.frame, limit=10)
    rows = values(chart)
    assert rows[0]["name"] == "Memcpy DtoD (Device -> Device)" and rows[0]["status"] == "more"
    labels = [r["label"] for r in rows]
    assert len(set(labels)) == len(labels)  # two split_embedding kernels stay apart
    assert chart.to_dict()["title"]["subtitle"] == ["A = A", "B = B"]


@needs_shared
def test_compare_chart_names_a_and_b(tmp_path):
    """``compare A B --chart`` says which input is A and which is B (the subtitle), and which way is
    longer in B (the axis); a long path keeps its end, where the file name is."""
    pair = TRACES / "hta_trace_diff"
    res = invoke(["compare", pair / "control.json.gz", pair / "test.json.gz", "--chart", tmp_path / "d.svg",
                  "-f", "csv"])
    assert res.exit_code == 0, res.output
    svg = (tmp_path / "d.svg").read_text()
    texts = [html.unescape(t) for t in re.findall(r"<(?:text|tspan)[^>]*>([^<]*)</(?:text|tspan)>", svg)]
    assert f"A = {pair / 'control.json.gz'}" in texts and f"B = {pair / 'test.json.gz'}" in texts
    assert "B - A (µs): > 0 more time in B, < 0 less" in texts
    deep = "/x" * 60 + "/run.json.gz"
    with tr.open(pair / "control.json.gz") as a, tr.open(pair / "test.json.gz") as b:
        title = charts.compare_chart(compare(a, b).frame, a=deep, b="b").to_dict()["title"]
    assert title["subtitle"][0].endswith("/x/x/run.json.gz") and len(title["subtitle"][0]) == len("A = ") + 90


def test_short_names():
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"  # noqa: E501
    label = short_name(name)
    assert label == "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>"  # the functor stays
    assert short_name(name, 40) == "vectorized_elem…_kernel<CUDAFunctor_add>"
    assert short_name("void f<int, float>(int)") == "f<int, float>"
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    assert short_name("x" * 200, 20) == "x" * 13 + "…" + "x" * 6


XSS = "<script>alert(1)</script>"


def test_html_escapes_names_and_works_offline(tmp_path):
    frame = pd.DataFrame({"name": [XSS, "a & b </script><b>x"], "count": [1, 2], "total_us": [5.0, 3.0],
                          "mean_us": [5.0, 1.5], "min_us": [5.0, 1.0], "max_us": [5.0, 2.0],
                          "pct_of_gpu_time": [62.5, 37.5],
                          "kind": ["kernel", "kernel"]})
    chart = charts.top_kernels_chart(frame)
    page = chart_html(chart, title="<b>title</b>")
    assert XSS not in page and "</script><b>" not in page and "<b>title</b>" not in page
    assert "&lt;b&gt;title&lt;/b&gt;" in page
    assert not re.search(r"<script[^>]+src=", page) and "cdn.jsdelivr" not in page
    assert "vegaEmbed" in page and len(page) > 500_000  # the JavaScript is inlined
    block = re.search(r'<script type="application/json" data-chart="chart">(.*?)</script>', page, re.S).group(1)
    names = [r["name"] for r in next(iter(json.loads(block)["datasets"].values()))]
    assert names == [XSS, "a & b </script><b>x"]  # the data keeps the names exactly
    assert script_json({"a": "<&>\u2028"}) == '{"a":"\\u003c\\u0026\\u003e\\u2028"}'


@needs_shared
def test_save_chart_formats(a100, tmp_path):
    chart = charts.top_kernels_chart(a100.top_kernels(10), limit=10)
    html_path = charts.save_chart(chart, tmp_path / "sweep.html")
    assert "vegaEmbed" in html_path.read_text()
    assert charts.save_chart(chart, tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert charts.save_chart(chart, tmp_path / "sweep.svg").read_text().lstrip().startswith("<svg")
    with pytest.raises(InputError, match="must end in"):
        charts.save_chart(chart, tmp_path / "sweep.pdf")
    with pytest.raises(InputError, match="no such directory"):
        charts.save_chart(chart, tmp_path / "absent" / "sweep.html")


def test_importing_charts_does_not_import_altair():
    import subprocess
    import sys

    code = "import sys, trace_report.present.charts, trace_report.present.report, trace_report.cli.report; " \
           "print('altair' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_roofline_chart_runs_points_and_rug() -> None:
    """Two runs: a timed one (GPU) is drawn as points coloured by run and shaped by precision, an
    untimed one (CPU capture) only as ticks at its estimated intensity: no invented FLOP/s."""
    frame = pd.DataFrame({
        "run": ["gpu-run", "gpu-run", "cpu-run"], "kernel": ["aten::conv2d", "aten::linear", "aten::conv2d"],
        "flop": [4e9, 1e9, 4e9], "bytes": [1e8, 5e8, 1e8], "time_s": [1e-3, 2e-3, None],
        "precision": ["tf32_tensor", "fp32", "fp32"]})
    peaks = resolve_peaks(None, gpu="a100-sxm4-80gb")
    result = RooflineResult(frame, "estimate", peaks, None, None, 9e9, 3e-3,
                            roofs={"fp32": peaks.fp32_flop_per_s, "tf32_tensor": peaks.tf32_tensor_flop_per_s})
    rug = ai_only_points(frame)
    assert list(rug["run"]) == ["cpu-run"] and rug["ai"].tolist() == [40.0] and rug["perf"].isna().all()
    assert charts.chart_points(frame)["run"].tolist() == ["gpu-run", "gpu-run"]
    spec = charts.roofline_chart(result).to_dict()
    marks = {layer["mark"]["type"]: layer for layer in spec["layer"]}
    assert marks["point"]["encoding"]["color"]["field"] == "run"
    assert marks["point"]["encoding"]["shape"]["field"] == "precision"
    assert marks["point"]["encoding"]["color"]["scale"]["domain"] == ["cpu-run", "gpu-run"]
    assert marks["tick"]["encoding"]["x"]["field"] == "ai" and "value" in marks["tick"]["encoding"]["y"]
    assert "estimated" in spec["title"]["text"] and "1 operator(s) without GPU time" in spec["title"]["subtitle"][0]


def test_a_chart_of_more_than_5000_rows_is_embedded() -> None:
    """A report of a trace with hundreds of steps has per-step region bars past Altair's 5,000-row
    guard (MaxRowsError, a traceback from `report` on a 1M-event trace): the page inlines them."""
    import altair as alt
    import pandas as pd

    from trace_report.present.charts.html import chart_block, chart_spec

    chart = alt.Chart(pd.DataFrame({"x": range(5821)})).mark_point().encode(x="x")
    spec = chart_spec(chart)
    assert sum(len(v) for v in spec["datasets"].values()) == 5821
    assert 'data-chart="c"' in chart_block("c", chart)


@needs_shared
def test_no_chart_makes_an_altair_converter(a100, runs, monkeypatch) -> None:
    """Every channel is given to Altair as a channel object, never as a shorthand string or dict:
    for each of those Altair (6.x, ``utils.core._wrap_in_channel``) builds a ``_FromDict``
    converter, hashing every schema class's JSON, a visible part of a report when there are many.
    Each builder, on real data, makes none, and the charts say what they said before."""
    from altair.utils import schemapi

    from trace_report.analyses.memory import memory_timeline
    from trace_report.analyses.roofline.measured import RooflineOptions, roofline
    from trace_report.capture.results import metric_chart, time_chart
    from trace_report.present.charts.memory import memory_chart

    made: list[int] = []
    real = schemapi._FromDict.__init__

    def counting(self, *args, **kwargs):  # noqa: ANN001, ANN202
        made.append(1)
        real(self, *args, **kwargs)

    with tr.open(TRACES / "tracelens_h100_bert_small") as bert:
        memory = memory_timeline(bert).frame
    pair = TRACES / "hta_trace_diff"
    with tr.open(pair / "control.json.gz") as a, tr.open(pair / "test.json.gz") as b:
        diff = compare(a, b).frame
    estimate = roofline(a100, RooflineOptions(by_name=True))
    metrics = runs.sql("SELECT r.optimizer, m.* FROM run_metrics m JOIN runs r USING (run_key) "
                       "WHERE r.experiment = 'optimizers' AND r.kind = 'run'").df()
    monkeypatch.setattr(schemapi._FromDict, "__init__", counting)
    built = {
        "top": charts.top_kernels_chart(a100.top_kernels(10)),
        "regions": charts.regions_chart(breakdown(a100, BreakdownOptions(by_step=True)).frame),
        "classes": charts.kernel_classes_chart(flags(a100).summary),
        "timeline": charts.timeline_chart(charts.step_timeline(a100)),
        "memory": memory_chart(memory),
        "roofline": charts.roofline_chart(estimate),
        "compare": charts.compare_chart(diff, limit=10),
        "workers": charts.worker_sweep_chart(_results(runs, "wk")),
        "optimizers": charts.optimizer_epochs_chart(metrics),
        "speedup": charts.speedup_chart(_results(runs, "dev")),
        "amp": charts.amp_sweep_chart(_results(runs, "amp")),
        "compile": charts.compile_chart(_results(runs, "cmp")),
        "capture times": time_chart(_results(runs, "dev"), "variant", "time per epoch"),
        "capture metric": metric_chart(_results(runs, "wk"), "workers", "samples_per_s", "samples/s",
                                       color="variant"),
    }
    assert made == []
    monkeypatch.undo()
    timeline = encoding(built["timeline"])
    assert timeline["x2"] == {"field": "end_us"}  # what the shorthand "end_us:Q" gave
    assert {"field": "kind", "type": "nominal"} in timeline["tooltip"]
    layers = {layer["mark"]["type"]: layer["encoding"] for layer in built["roofline"].to_dict()["layer"]}
    assert layers["line"]["detail"] == {"field": "roof", "type": "nominal"}  # the ceilings of a known GPU
    assert layers["text"]["text"] == {"field": "text", "type": "nominal"}
    assert built["speedup"].to_dict()["layer"][1]["encoding"]["color"] == {"value": "#333"}
    assert {"field": "series", "type": "nominal"} in built["memory"].to_dict()["encoding"]["tooltip"]
    tips = built["capture metric"].to_dict()["encoding"]["tooltip"]  # types inferred from the data, as before
    assert tips == [{"field": "workers", "type": "quantitative"}, {"field": "samples_per_s", "type": "quantitative"},
                    {"field": "variant", "type": "nominal"}]
