"""The report in a real browser: headless Chromium driven by Selenium through chromedriver. The
pages load with no console errors, every chart renders to a non-empty SVG, a kernel named
``<script>alert(1)</script>`` shows as text and runs nothing, and at 1280 px the page never
scrolls sideways (a wide table scrolls inside its own box) and every URL shown is a link. Each
page is screenshot at 1280 px.

Chromium comes from Debian (``chromium``, ``chromium-driver``; ``./run test`` installs them when
it runs as root); Selenium is given both paths, so Selenium Manager never downloads a browser or
a driver. Without them the tests are skipped with the reason.
``TRACE_REPORT_UPDATE_SCREENSHOTS=1`` also refreshes ``docs/img/report*.png``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TRACES, captured_runs
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from test_report import XSS, write_xss_trace

from trace_report.analyses.advise import advise
from trace_report.api import open as open_runs
from trace_report.present.charts.traces import short_name
from trace_report.present.report import write_report

REPO = Path(__file__).resolve().parents[2]
PAGE_WIDTH = 1280
REAL_TRACES = ["hta_a100_ddp_nccl", "param_dlrm_kineto_v100x8", "tracelens_h100_timesformer"]
PAGES = [REAL_TRACES[0], *(pytest.param(n, marks=pytest.mark.slow) for n in REAL_TRACES[1:])]
"""Seconds per page: the A100 DDP page in the default run, the other two with the slow tests."""
URL = re.compile(r"https?://[^\s<>\"']+[^\s<>\"'.,;:!?)]")
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
               f"--window-size={PAGE_WIDTH},1000"]
RENDER_TIMEOUT_S = 30


def browser_or_skip() -> tuple[str, str]:
    """Paths of chromium and chromedriver; skips the test with the reason when either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", driver)) if not path]
    if missing:
        pytest.skip(f"headless Chromium unavailable: {' and '.join(missing)} not on PATH "
                    "(install the Debian packages chromium and chromium-driver; ./run test does as root)")
    return chromium, driver


def start_chromium(chromium: str, driver: str, profile: Path) -> WebDriver:
    """Headless Chromium at :data:`PAGE_WIDTH`, its console log kept, alerts left open (so that
    :func:`alert_text` sees one); both binaries given, so Selenium Manager is never run."""
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in [*CHROME_ARGS, f"--user-data-dir={profile}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.unhandled_prompt_behavior = "ignore"
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def alert_text(browser: WebDriver) -> str | None:
    """The text of an open alert, or None when no alert is open."""
    try:
        return browser.switch_to.alert.text
    except NoAlertPresentException:
        return None


def screenshot(browser: WebDriver, path: Path) -> None:
    """The whole page at :data:`PAGE_WIDTH` (the window made as tall as the page, at most 9000 px)."""
    browser.set_window_size(PAGE_WIDTH, 800)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(PAGE_WIDTH, min(int(height) + 140, 9000))
    path.write_bytes(browser.get_screenshot_as_png())
    browser.set_window_size(PAGE_WIDTH, 1000)


CHART_STATE = """
return Array.from(document.querySelectorAll('div.chart')).map(function (d) {
  return {id: d.id, state: d.dataset.rendered || null,
          marks: d.querySelectorAll('svg g.role-mark > *').length,
          svg: d.querySelectorAll('svg').length};
});
"""


PAGE_LAYOUT = """
var bare = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), node;
while ((node = walker.nextNode())) {
  if (/https?:\\/\\//i.test(node.textContent) && !node.parentElement.closest('a, script, style, svg')) {
    bare.push(node.textContent);
  }
}
return {scroll_width: document.documentElement.scrollWidth, inner_width: window.innerWidth, bare_urls: bare,
        links: Array.from(document.querySelectorAll('a')).map(function (a) {
          return {href: a.getAttribute('href'), protocol: a.protocol, text: a.textContent};
        })};
"""


def png_width(path: Path) -> int:
    """Width of a PNG image, from its IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big")


def layout(browser: WebDriver) -> dict[str, Any]:
    """At :data:`PAGE_WIDTH`: the page's scroll width, URL text outside links, and its links."""
    browser.set_window_size(PAGE_WIDTH, 1000)
    return browser.execute_script(PAGE_LAYOUT)


def assert_fits_with_links(browser: WebDriver, urls: set[str] | None = None) -> list[dict[str, str]]:
    """No sideways scrolling at 1280 px; every URL on the page is an ``http(s)`` link that shows
    its own address; with ``urls``, each of them is one of the links."""
    page = layout(browser)
    assert page["inner_width"] == PAGE_WIDTH
    assert page["scroll_width"] <= PAGE_WIDTH, page["scroll_width"]
    assert page["bare_urls"] == []
    for link in page["links"]:
        assert link["protocol"] in ("http:", "https:") and link["href"] == link["text"], link
    if urls is not None:
        assert urls <= {link["href"] for link in page["links"]}
    return page["links"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver = browser_or_skip()
    web = start_chromium(chromium, driver, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield web
    finally:
        web.quit()


def charts_written(page: Path) -> int:
    """The chart blocks the HTML file holds."""
    return page.read_text(encoding="utf-8").count('<div class="chart"')


def render(browser: WebDriver, page: Path) -> list[dict[str, Any]]:
    """Open ``page``; wait until the browser shows as many charts as the file holds and every one
    says it rendered (or failed). Waiting on the rendered states alone returned at once with no
    chart when the page was not shown yet (a CI run under load: 0 charts, where 3 were written)."""
    written = charts_written(page)
    browser.get(page.as_uri())
    deadline = time.monotonic() + RENDER_TIMEOUT_S
    while True:
        charts = browser.execute_script(CHART_STATE)
        if (len(charts) == written and all(c["state"] for c in charts)) or time.monotonic() > deadline:
            return charts
        time.sleep(0.05)


def assert_rendered(browser: WebDriver, charts: list[dict[str, Any]], n: int) -> None:
    assert len(charts) == n
    for chart in charts:
        assert chart["state"] == "true", chart
        assert chart["svg"] >= 1 and chart["marks"] > 0, chart  # a non-empty SVG
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_report_of_captured_runs_renders(browser, tmp_path_factory, tmp_path):
    root = captured_runs(tmp_path_factory)
    with open_runs(root) as db:
        write_report(db, [str(root)], tmp_path / "runs.html")
    charts = render(browser, tmp_path / "runs.html")
    assert_rendered(browser, charts, 9)  # with the memory chart (one lane per run)
    assert_fits_with_links(browser)  # the wide run-configuration table scrolls in its own box
    if os.environ.get("TRACE_REPORT_UPDATE_SCREENSHOTS"):
        screenshot(browser, REPO / "docs" / "img" / "report-runs.png")


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")
@pytest.mark.parametrize("name", PAGES)
def test_report_of_real_trace_fits_1280_px(browser, tmp_path, name):
    """Reports of an A100 DDP trace, an 8-rank V100 DLRM archive and an H100 inference trace:
    every chart renders, nothing scrolls sideways at 1280 px, and each URL of the advice (read
    from :func:`advise` itself) is a link; the screenshot is 1280 px wide."""
    with open_runs(TRACES / name) as db:
        write_report(db, [str(TRACES / name)], tmp_path / "page.html")
        urls = {u for text in advise(db).frame["recommendation"] for u in URL.findall(str(text))}
    charts = render(browser, tmp_path / "page.html")
    assert_rendered(browser, charts, charts_written(tmp_path / "page.html"))
    assert len(charts) >= 3
    assert_fits_with_links(browser, urls)
    shot = tmp_path / "page.png"
    screenshot(browser, shot)
    assert png_width(shot) == PAGE_WIDTH
    if os.environ.get("TRACE_REPORT_UPDATE_SCREENSHOTS"):
        shutil.copyfile(shot, REPO / "docs" / "img" / f"report-{name}.png")


def test_hostile_names_stay_text(browser, tmp_path):
    trace = write_xss_trace(tmp_path)
    with open_runs(trace) as db:
        write_report(db, [str(trace)], tmp_path / "xss.html")
    charts = render(browser, tmp_path / "xss.html")
    assert alert_text(browser) is None  # nothing ran
    assert_rendered(browser, charts, 4)
    cells = browser.execute_script("return Array.from(document.querySelectorAll('td')).map(td => td.textContent)")
    assert XSS in cells and "void k<a&b, c>(int)" in cells  # shown as text
    assert browser.execute_script("return document.querySelectorAll('img, td script').length") == 0
    labels = browser.execute_script("return Array.from(document.querySelectorAll('svg text')).map(t => t.textContent)")
    assert short_name(XSS) in labels  # the chart's axis label (short name), as SVG text
    assert "<script>" in short_name(XSS)  # ... which still carries the markup, shown as text
