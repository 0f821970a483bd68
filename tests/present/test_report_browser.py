"""The report in a real browser: headless Chromium driven through chromedriver (a few lines of
WebDriver over HTTP). The pages load with no console errors, every chart renders to a non-empty
SVG, a kernel named ``<script>alert(1)</script>`` shows as text and runs nothing, and at 1280 px
the page never scrolls sideways (a wide table scrolls inside its own box) and every URL shown is
a link. Each page is screenshot at 1280 px.

Chromium comes from Debian (``chromium``, ``chromium-driver``); when absent the test installs
them with apt-get if it can (root, apt-get present), else it is skipped with the reason.
``TRACE_REPORT_UPDATE_SCREENSHOTS=1`` also refreshes ``docs/img/report*.png``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import TRACES, captured_runs
from test_report import XSS, write_xss_trace

from trace_report.analyses.advise import advise
from trace_report.api import open as open_runs
from trace_report.present.report import write_report

REPO = Path(__file__).resolve().parents[2]
PAGE_WIDTH = 1280
REAL_TRACES = ["hta_a100_ddp_nccl", "param_dlrm_kineto_v100x8", "tracelens_h100_timesformer"]
URL = re.compile(r"https?://[^\s<>\"']+[^\s<>\"'.,;:!?)]")
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
               f"--window-size={PAGE_WIDTH},1000"]
RENDER_TIMEOUT_S = 30


def _tools() -> tuple[str | None, str | None]:
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


def browser_or_skip() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installing the Debian packages when possible."""
    chromium, driver = _tools()
    if chromium and driver:
        return chromium, driver
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("headless Chromium unavailable: install the Debian packages chromium and chromium-driver")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]
    for cmd in (install, ["apt-get", "update", "-qq"], install):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
        chromium, driver = _tools()
        if chromium and driver:
            return chromium, driver
    pytest.skip(f"headless Chromium unavailable: apt-get could not install it ({done.stderr.strip()[-200:]})")


class WebDriver:
    """The few W3C WebDriver calls the test needs, over HTTP to a local chromedriver."""

    def __init__(self, chromium: str, driver: str, profile: Path) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        self.base = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        options = {"binary": chromium, "args": [*CHROME_ARGS, f"--user-data-dir={profile}"]}
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options,
                                                 "goog:loggingPrefs": {"browser": "ALL"},
                                                 "unhandledPromptBehavior": "ignore"}}}
        self.session = f"/session/{self._call('POST', '/session', caps)['sessionId']}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as exc:
            value = json.loads(exc.read())["value"]
            raise AssertionError(f"WebDriver {path}: {value.get('error')}: {value.get('message', '')[:300]}") from None

    def get(self, url: str) -> None:
        self._call("POST", self.session + "/url", {"url": url})

    def script(self, source: str) -> Any:
        return self._call("POST", self.session + "/execute/sync", {"script": source, "args": []})

    def alert_text(self) -> str | None:
        try:
            return self._call("GET", self.session + "/alert/text")
        except AssertionError:
            return None  # "no such alert"

    def console(self) -> list[dict[str, Any]]:
        return self._call("POST", self.session + "/se/log", {"type": "browser"})

    def resize(self, width: int, height: int) -> None:
        self._call("POST", self.session + "/window/rect", {"width": width, "height": height})

    def screenshot(self, path: Path) -> None:
        """The whole page at :data:`PAGE_WIDTH` (the window made as tall as the page, at most 9000 px)."""
        self.resize(PAGE_WIDTH, 800)
        height = self.script("return document.documentElement.scrollHeight")
        self.resize(PAGE_WIDTH, min(int(height) + 140, 9000))
        path.write_bytes(base64.b64decode(self._call("GET", self.session + "/screenshot")))
        self.resize(PAGE_WIDTH, 1000)

    def quit(self) -> None:
        try:
            self._call("DELETE", self.session)
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=20)


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
    browser.resize(PAGE_WIDTH, 1000)
    return browser.script(PAGE_LAYOUT)


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
    web = WebDriver(chromium, driver, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield web
    finally:
        web.quit()


def render(browser: WebDriver, page: Path) -> list[dict[str, Any]]:
    """Open ``page``; wait until every chart says it rendered (or failed)."""
    browser.get(page.as_uri())
    deadline = time.monotonic() + RENDER_TIMEOUT_S
    while True:
        charts = browser.script(CHART_STATE)
        if all(c["state"] for c in charts) or time.monotonic() > deadline:
            return charts


def assert_rendered(browser: WebDriver, charts: list[dict[str, Any]], n: int) -> None:
    assert len(charts) == n
    for chart in charts:
        assert chart["state"] == "true", chart
        assert chart["svg"] >= 1 and chart["marks"] > 0, chart  # a non-empty SVG
    errors = [e for e in browser.console() if e["level"] == "SEVERE"]
    assert not errors, errors


def test_report_of_captured_runs_renders(browser, tmp_path_factory, tmp_path):
    root = captured_runs(tmp_path_factory)
    with open_runs(root) as db:
        write_report(db, [str(root)], tmp_path / "runs.html")
    charts = render(browser, tmp_path / "runs.html")
    assert_rendered(browser, charts, 8)
    assert_fits_with_links(browser)  # the wide run-configuration table scrolls in its own box
    if os.environ.get("TRACE_REPORT_UPDATE_SCREENSHOTS"):
        browser.screenshot(REPO / "docs" / "img" / "report-runs.png")


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")
@pytest.mark.parametrize("name", REAL_TRACES)
def test_report_of_real_trace_fits_1280_px(browser, tmp_path, name):
    """Reports of an A100 DDP trace, an 8-rank V100 DLRM archive and an H100 inference trace:
    every chart renders, nothing scrolls sideways at 1280 px, and each URL of the advice (read
    from :func:`advise` itself) is a link; the screenshot is 1280 px wide."""
    with open_runs(TRACES / name) as db:
        write_report(db, [str(TRACES / name)], tmp_path / "page.html")
        urls = {u for text in advise(db).frame["recommendation"] for u in URL.findall(str(text))}
    charts = render(browser, tmp_path / "page.html")
    assert_rendered(browser, charts, len(charts))
    assert len(charts) >= 3
    assert_fits_with_links(browser, urls)
    shot = tmp_path / "page.png"
    browser.screenshot(shot)
    assert png_width(shot) == PAGE_WIDTH
    if os.environ.get("TRACE_REPORT_UPDATE_SCREENSHOTS"):
        shutil.copyfile(shot, REPO / "docs" / "img" / f"report-{name}.png")


def test_hostile_names_stay_text(browser, tmp_path):
    trace = write_xss_trace(tmp_path)
    with open_runs(trace) as db:
        write_report(db, [str(trace)], tmp_path / "xss.html")
    charts = render(browser, tmp_path / "xss.html")
    assert browser.alert_text() is None  # nothing ran
    assert_rendered(browser, charts, 4)
    cells = browser.script("return Array.from(document.querySelectorAll('td')).map(td => td.textContent)")
    assert XSS in cells and "void k<a&b, c>(int)" in cells  # shown as text
    assert browser.script("return document.querySelectorAll('img, td script').length") == 0
    labels = browser.script("return Array.from(document.querySelectorAll('svg text')).map(t => t.textContent)")
    assert XSS in labels  # the chart's axis label, as SVG text
