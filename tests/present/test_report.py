"""``report``: the HTML page's sections and charts on real captures and shared traces, offline
and escaped (a kernel named ``<script>alert(1)</script>`` is text). The browser test is in
``test_report_browser.py``."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED, captured_runs, invoke

from trace_report.api import open as open_runs
from trace_report.present.report import build_report, render_html, table_html, write_report

A100 = SHARED / "data" / "traces" / "hta_a100_ddp_nccl"
XSS = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"


def write_xss_trace(folder: Path) -> Path:
    """A small Kineto trace whose kernel, operator and annotation names are HTML."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 5, "dur": 60},
        {"ph": "X", "cat": "cpu_op", "name": IMG, "pid": 1, "tid": 1, "ts": 10, "dur": 20},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 4,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": XSS, "pid": 0, "tid": 7, "ts": 20, "dur": 30,
         "args": {"correlation": 7, "stream": 7, "device": 0}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 40, "dur": 4,
         "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "void k<a&b, c>(int)", "pid": 0, "tid": 7, "ts": 55, "dur": 10,
         "args": {"correlation": 8, "stream": 7, "device": 0}},
    ]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU </script>", "computeMajor": 8,
                                                     "computeMinor": 0, "totalGlobalMem": 1 << 34}],
           "traceEvents": ev}
    path = folder / "xss.pt.trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def chart_specs(page: str) -> list[dict]:
    blocks = re.findall(r'<script type="application/json" data-chart="[^"]+">(.*?)</script>', page, re.S)
    return [json.loads(b) for b in blocks]


@pytest.fixture(scope="module")
def runs_report(tmp_path_factory):
    root = captured_runs(tmp_path_factory)
    with open_runs([root]) as db:
        report = build_report(db, [str(root)])
        return report, render_html(report)


def test_report_of_captured_runs(runs_report):
    report, page = runs_report
    titles = [s.title for s in report.sections]
    # CPU traces: no operators section (no GPU time), memory of the runs that profiled it
    assert titles == ["Run configuration", "Headline numbers", "Where the time goes", "Memory", "Experiments",
                      "Advice"]
    names = [name for s in report.sections for name, _ in s.charts]
    assert names[:4] == ["top-kernels", "regions", "timeline", "memory"]  # no kernel classes, no roofline
    assert sorted(names[4:]) == sorted(f"experiment-{k}" for k in ("amp", "cmp", "dev", "opt", "wk"))
    specs = chart_specs(page)
    assert len(specs) == len(names) and all(s["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
                                            for s in specs)
    assert "opt/sgd-nesterov" in page and "resnet18" in page  # the configuration table


def test_page_is_offline(runs_report):
    _, page = runs_report
    outside_scripts = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", outside_scripts)
    tags = re.findall(r"<script[^>]*>", page)
    assert all(t == "<script>" or t.startswith('<script type="application/json" data-chart=') for t in tags)
    assert "vegaEmbed" in page and page.count("<script>") == 2  # the bundle and the embedding


@pytest.mark.skipif(not A100.is_dir(), reason="../shared/data is not present")
def test_report_of_a_gpu_trace(tmp_path):
    with open_runs(A100) as db:
        report = write_report(db, [str(A100)], tmp_path / "a100.html")
    names = [name for s in report.sections for name, _ in s.charts]
    assert names == ["top-kernels", "regions", "kernel-classes", "timeline"]
    page = (tmp_path / "a100.html").read_text()
    assert "launch_bound" in page and "exposed_communication" in page and "Biggest saving" in page  # the advice
    assert "NVIDIA A100-PG509-200" in page and "ncclKernel_AllReduce_RING_LL_Sum_float" in page
    assert [s.title for s in report.sections][-3:] == ["Kernel classes", "Critical path, launches, sequences, modules",
                                                      "Advice"]


def test_every_name_is_escaped(tmp_path):
    trace = write_xss_trace(tmp_path)
    with open_runs(trace) as db:
        page = render_html(build_report(db, [str(trace)], ))
    for raw in (XSS, IMG, "GPU </script>", "k<a&b, c>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "GPU &lt;/script&gt;" in page
    tables = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in tables and "void k&lt;a&amp;b, c&gt;(int)" in tables
    top = next(s for s in chart_specs(page) if "GPU kernels" in str(s.get("title")))
    assert [r["name"] for r in next(iter(top["datasets"].values()))][0] == XSS  # the data keeps real names





def test_urls_are_links_and_nothing_else_is():
    """Only ``http(s)`` URLs become links, escaped in the address and the text; trailing
    punctuation stays outside; a URL never breaks out of its attribute; names are never links."""
    frame = pd.DataFrame({"name": ["https://kernel.example/x"], "recommendation": [
        'see https://pytorch.org/docs/stable/amp.html. Or javascript:alert(1), file:///etc/passwd, '
        '(https://e.org/?a=1&b=2) and https://e.org/"onmouseover=alert(3)'], "n": [1]})
    page = table_html(frame)
    links = re.findall(r'<a href="([^"]*)" rel="noopener noreferrer">([^<]*)</a>', page)
    assert links == [("https://pytorch.org/docs/stable/amp.html",) * 2, ("https://e.org/?a=1&amp;b=2",) * 2,
                     ("https://e.org/",) * 2]
    assert page.count("<a ") == 3 and "&quot;onmouseover=alert(3)" in page
    assert '<td class="name">https://kernel.example/x</td>' in page
    assert page.startswith('<div class="table-wrap"><table>')  # a wide table scrolls in its own box


def test_report_command(tmp_path):
    trace = write_xss_trace(tmp_path)
    res = invoke(["report", str(trace), "-o", str(tmp_path / "r.html"), "--title", "<t>"])
    assert res.exit_code == 0, res.output
    assert "charts" in res.output and "<title>&lt;t&gt;</title>" in (tmp_path / "r.html").read_text()
    res = invoke(["report", str(trace), "-o", str(tmp_path / "r.txt")])
    assert res.stderr.startswith("Error:") and "HTML page" in res.stderr


def test_report_of_an_experiment_folder_without_results_csv(tmp_path_factory, tmp_path):
    """An experiment folder whose results.csv was deleted still gives a page (or one Error line), never a
    traceback; the run tables are simply empty for it."""
    import shutil

    experiment = tmp_path / "opt"
    shutil.copytree(captured_runs(tmp_path_factory) / "opt", experiment)
    for results in experiment.rglob("results.*"):
        results.unlink()
    page = tmp_path / "page.html"
    result = invoke(["report", experiment, "-o", page])
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr and page.is_file()
    assert "Where the time goes" in page.read_text()


def test_runs_are_never_summed(runs_report):
    """Several runs: the top-kernels and regions charts have one colour/bar per run; the optimizers
    chart one line per run."""
    report, _ = runs_report
    charts = {name: chart.to_dict() for s in report.sections for name, chart in s.charts}
    con_runs = {row["run"] for row in next(iter(charts["top-kernels"]["datasets"].values()))}
    assert len(con_runs) > 1 and charts["top-kernels"]["encoding"]["color"]["field"] == "run"
    bars = {row["step"] for row in next(iter(charts["regions"]["datasets"].values()))}
    assert {b.split(" · ")[0] for b in bars} == con_runs  # every bar is one run's step
    opt = next(iter(charts["experiment-opt"]["datasets"].values()))
    lines = {row["run"] for row in opt}
    assert len(lines) > 1
    for line in lines:  # one run per line: each epoch appears once per metric
        epochs = [(row["epoch"], row["metric"]) for row in opt if row["run"] == line]
        assert len(epochs) == len(set(epochs))


def test_specs_made_ahead_are_the_charts_own(runs_report):
    """The charts' Vega-Lite specs are made on a worker thread as each section is done (while the
    next sections query): the page is the one made from the charts directly, each spec started
    once, and a failed report leaves no spec queued."""
    report, page = runs_report
    charted = [(name, c) for s in report.sections for name, c in s.charts if name not in s.inline]
    assert charted and {id(c) for _, c in charted} == set(report.specs)
    assert all(report.specs[id(c)].done() for _, c in charted)
    direct = dataclasses.replace(report, specs={})
    stamp = re.compile(r"generated [^<]* by")
    assert stamp.sub("", render_html(direct)) == stamp.sub("", page)
    assert chart_specs(page) == chart_specs(render_html(direct))


def test_failed_report_cancels_its_queued_specs(tmp_path, monkeypatch):
    from concurrent.futures import Future

    import trace_report.present.report.page as report_module

    queued: list[Future] = []

    def never_started(chart):
        future: Future = Future()  # as a spec still waiting behind others on the worker
        queued.append(future)
        return future

    monkeypatch.setattr(report_module.chart_html, "spec_ahead", never_started)
    monkeypatch.setattr(report_module, "render_html", lambda report: (_ for _ in ()).throw(RuntimeError("disk")))
    trace = write_xss_trace(tmp_path)
    with open_runs([trace]) as db, pytest.raises(RuntimeError, match="disk"):
        write_report(db, [str(trace)], tmp_path / "r.html")
    assert queued and all(f.cancelled() for f in queued)
