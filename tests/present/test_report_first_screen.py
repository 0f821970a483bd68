"""The report answers on its first screen, in headless Chromium at 1280 and 1400 px: the headline
lists advise's top findings with their saving and their "Do:" within the first 800 px of the
page; no table is wider than its box or the window (no cut table); every chart's SVG and each of
its texts (legends, labels) lies inside the chart's box; long tables show their top rows with the
rest in a ``<details>``; kernel names in tables are shortened with the whole name on hover; the
region chart is left out of a trace without regions; the AMD rooflines have their ceilings.

An MI300X inference trace (no regions) runs by default; the MI300X training trace with long
Composable Kernel names, the 8-rank DLRM archive and the MI250 trace run with the slow tests.
``TRACE_REPORT_UPDATE_SCREENSHOTS=1`` also writes the first screen (1400 x 900) of three of the
pages to ``docs/report/`` (:data:`SCREENSHOTS`).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TRACES
from selenium.webdriver.chrome.webdriver import WebDriver
from test_report_browser import REPO, browser, browser_or_skip, render  # noqa: F401 (browser: the fixture)

from trace_report.analyses.advise import advise
from trace_report.api import open as open_runs
from trace_report.present.report import write_report

WIDTHS = (1280, 1400)
FOLD_PX = 800
"""The headline's first "Do:" must end within this many pixels of the top of the page."""
TOP_ROWS = 5
NAME_CHARS = 60
SHOT = (1400, 900)
SCREENSHOTS = {"tracelens_mi300_bert_small", "tracelens_mi300_resnet18_ddp_train", "param_dlrm_kineto_v100x8"}
"""The pages whose first screen docs/report.md shows."""
FIRST_SCREEN = [pytest.param("tracelens_mi300_bert_small", id="mi300-inference"),
                pytest.param("tracelens_mi300_resnet18_ddp_train", id="mi300-ck-names", marks=pytest.mark.slow),
                pytest.param("param_dlrm_kineto_v100x8", id="dlrm-8-ranks", marks=pytest.mark.slow),
                pytest.param("hta_amd_mi250", id="mi250", marks=pytest.mark.slow)]

LAYOUT = """
document.querySelectorAll('details').forEach(function (d) { d.open = true; });
var view = document.documentElement.clientWidth, cut = [], clipped = [], tables = [];
document.querySelectorAll('table').forEach(function (t) {
  var box = t.closest('.table-wrap'), r = box.getBoundingClientRect();
  if (t.scrollWidth > box.clientWidth + 1 || r.right > view + 1) {
    cut.push({head: t.querySelector('tr').textContent.slice(0, 80), table: t.scrollWidth, box: box.clientWidth});
  }
  var prev = box.previousElementSibling, folded = box.parentElement.matches('details.more-rows');
  var next = box.nextElementSibling;
  tables.push({title: prev && /^H[34]$/.test(prev.tagName) ? prev.textContent : null, folded: folded,
               rows: t.tBodies[0].rows.length,
               more: next && next.matches('details.more-rows') ? next.querySelector('tbody').rows.length : 0});
});
document.querySelectorAll('div.chart').forEach(function (d) {
  var box = d.getBoundingClientRect();
  d.querySelectorAll('svg').forEach(function (svg) {
    var s = svg.getBoundingClientRect();
    if (s.left < box.left - 1 || s.right > box.right + 1 || s.right > view + 1) {
      clipped.push({chart: d.id, svg: s.width, box: box.width});
    }
    svg.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width && (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1)) {
        clipped.push({chart: d.id, text: t.textContent});
      }
    });
  });
});
var names = Array.from(document.querySelectorAll('td.name')).map(function (td) {
  var span = td.querySelector('span[title]');
  return {text: td.textContent, full: span ? span.title : null};
});
document.querySelectorAll('details').forEach(function (d) { d.open = false; });
return {cut: cut, clipped: clipped, tables: tables, names: names,
        charts: Array.from(document.querySelectorAll('div.chart')).map(function (d) { return d.id; })};
"""

FIRST = """
window.scrollTo(0, 0);
var box = document.querySelector('.verdict');
if (!box) return null;
return {verdict: box.querySelector('.verdict-line').textContent,
        items: Array.from(box.querySelectorAll('ol.todo > li')).map(function (li) {
          var r = li.querySelector('.do').getBoundingClientRect();
          return {text: li.textContent, do_text: li.querySelector('.do').textContent, bottom: r.bottom};
        }),
        inner_height: window.innerHeight};
"""


def set_viewport(web: WebDriver, width: int, height: int) -> None:
    """Make the page area (``window.innerWidth`` x ``innerHeight``) ``width`` x ``height`` px:
    Chromium's device-metrics override (DevTools protocol), exact and at once, where a window
    resize is neither (the window's frame, an asynchronous resize)."""
    web.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def trace_events(folder: Path) -> Iterator[list[dict[str, Any]]]:
    """The ``traceEvents`` of each trace in ``folder``: ``.json``, ``.json.gz`` and the ``.json``
    members of a ``.tar.gz`` archive (plain JSON, no trace-report code)."""
    for path in sorted(folder.rglob("*")):
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if member.isfile() and member.name.endswith(".json"):
                        yield json.load(tar.extractfile(member)).get("traceEvents", [])
        elif path.name.endswith((".json", ".json.gz")):
            opener: Any = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                yield json.load(f).get("traceEvents", [])


def trace_kernel_names(folder: Path) -> set[str]:
    """Every kernel name of the traces in ``folder`` (events of ``cat`` kernel)."""
    return {e.get("name", "") for events in trace_events(folder) for e in events
            if str(e.get("cat", "")).lower() == "kernel"}


REGION_LABEL = re.compile(r"(?i)forward|backward|optimi[sz]er|zero_grad|dataloader|data_?load|loss")
REGION_OP = re.compile(r"^autograd::engine::evaluate_function: |^aten::[a-z0-9_]*_loss(_nd|2d)?$")


def has_regions(folder: Path) -> bool:
    """Whether a trace marks a region (docs/analysis.md, regions; plain JSON pass): an annotation,
    or an operator without ``::`` (a label), whose name holds forward, backward, optimizer,
    zero_grad, data loading or loss, an autograd engine node or an ``aten::*_loss`` operator."""
    for events in trace_events(folder):
        for e in events:
            cat, name = str(e.get("cat", "")).lower(), str(e.get("name", ""))
            if name.startswith("ProfilerStep#") or cat not in ("user_annotation", "gpu_user_annotation", "cpu_op"):
                continue
            label = cat != "cpu_op" or "::" not in name
            if REGION_OP.search(name) or (label and REGION_LABEL.search(name)):
                return True
    return False


def assert_first_screen(page: dict[str, Any], verdict: str, findings: list[tuple[str, str]]) -> None:
    """The verdict and each top finding's title and "Do:" text, the first "Do:" above the fold."""
    assert page is not None, "no verdict box on the page"
    assert page["verdict"].strip() == verdict
    assert page["items"], "no finding listed in the headline"
    for item, (title, recommendation) in zip(page["items"], findings, strict=False):
        assert title in item["text"]
        assert item["do_text"].strip() == f"Do: {recommendation}"
    assert page["items"][0]["bottom"] <= FOLD_PX, page["items"][0]


def assert_layout(layout: dict[str, Any], kernels: set[str]) -> None:
    assert layout["cut"] == [], layout["cut"]
    assert layout["clipped"] == [], layout["clipped"][:5]
    long = [t for t in layout["tables"] if t["title"] and any(
        k in t["title"] for k in ("Top kernels", "Operators on the path", "Critical path", "sequences", "modules"))]
    assert any(t["more"] for t in long), long  # the top kernels at least: more than TOP_ROWS
    for table in long:
        assert table["rows"] <= TOP_ROWS, table
        assert table["more"] == 0 or table["rows"] == TOP_ROWS, table
    for cell in layout["names"]:
        if cell["full"] is not None:  # shortened: the whole name (or names) on hover
            assert len(cell["text"]) < len(cell["full"])
    shortened = {c["full"] for c in layout["names"] if c["full"] is not None and c["full"] in kernels}
    assert all(len(c["text"]) <= NAME_CHARS for c in layout["names"] if c["full"] in shortened)
    long_kernels = {c["full"] for c in layout["names"]
                    if c["full"] is None and len(c["text"]) > NAME_CHARS and c["text"] in kernels}
    assert not long_kernels, long_kernels  # every long kernel name is shortened


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")
@pytest.mark.parametrize("name", FIRST_SCREEN)
def test_first_screen_answers(browser, tmp_path, name):  # noqa: F811 (the fixture)
    folder = TRACES / name
    page_path = tmp_path / "page.html"
    with open_runs(folder) as db:
        write_report(db, [str(folder)], page_path)
        advice = advise(db)
    frame = advice.frame.drop_duplicates("finding").head(3)
    findings = list(zip(frame["title"].astype(str), frame["recommendation"].astype(str), strict=True))
    kernels = trace_kernel_names(folder)
    render(browser, page_path)
    for width in WIDTHS:
        set_viewport(browser, width, FOLD_PX)
        assert browser.execute_script("return window.innerWidth") == width
        if len(frame):
            assert_first_screen(browser.execute_script(FIRST), advice.verdict, findings)
        layout = browser.execute_script(LAYOUT)
        assert_layout(layout, kernels)
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    regions = [c for c in layout["charts"] if c.endswith("-regions")]
    assert bool(regions) == has_regions(folder), (layout["charts"], has_regions(folder))
    if "_mi" in name:  # the AMD traces recorded shapes: a roofline, with the MI250 GCD or MI300X ceilings
        texts = browser.execute_script("return Array.from(document.querySelectorAll("
                                       "'div.chart[id$=\"-roofline\"] svg text')).map(t => t.textContent)")
        assert any("TFLOP/s" in t and "ridge" in t for t in texts), texts  # a ceiling
    if os.environ.get("TRACE_REPORT_UPDATE_SCREENSHOTS") and name in SCREENSHOTS:
        set_viewport(browser, *SHOT)
        browser.execute_script("window.scrollTo(0, 0)")
        (REPO / "docs" / "report").mkdir(exist_ok=True)
        (REPO / "docs" / "report" / f"{name}.png").write_bytes(browser.get_screenshot_as_png())
