"""Self-contained HTML for Altair charts: the Vega, Vega-Lite and vega-embed JavaScript inlined
(from vl-convert, no CDN: the page works offline) and every string escaped (docs/architecture.md, Security).

Kernel and operator names carry ``<``, ``>`` and ``&`` (C++ templates), and a trace could name a
kernel ``</script><script>alert(1)</script>``. Altair's own HTML template writes the spec with
``json.dumps`` into a ``<script>`` block, where such a name ends the block. Here specs go into
``<script type="application/json">`` blocks with ``<``, ``>``, ``&`` and the JavaScript line
separators written as ``\\uXXXX`` escapes (:func:`script_json`), and are parsed with
``JSON.parse``; Vega draws text as SVG text nodes, and vega-tooltip escapes tooltip values by
default (its ``sanitize`` option). Page text goes through :func:`html.escape`.
"""

from __future__ import annotations

import functools
import html
import json
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trace_report.errors import InputError
from trace_report.present.charts.loading import altair, vega_bundle
from trace_report.present.tables import write_atomic

_URL = re.compile(r"https?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]]", re.IGNORECASE)
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
CHART_SUFFIXES = (".html", ".png", ".svg")

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1180px;
       color: #222; padding: 0 1em; overflow-wrap: break-word; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 2em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.table-wrap, .chart { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.45em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } th { background: #f5f5f5; }
td { max-width: 26em; }
.name { font-family: ui-monospace, monospace; word-break: break-all; min-width: 14em; max-width: 32em; }
.note { color: #666; font-size: 0.9em; } .chart { margin: 1em 0; }
a { color: #1a5fb4; }
.chart-error { color: #b00; font-family: monospace; }
.headline { display: flex; flex-wrap: wrap; gap: 0.8em; }
.headline div { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 0.9em; min-width: 9em; }
.headline b { display: block; font-size: 1.3em; }
.verdict { border: 2px solid #1a5fb4; border-radius: 6px; padding: 0.5em 1em; margin: 0.6em 0 0.8em;
           background: #f5f9fe; }
.verdict-line { font-size: 1.15em; font-weight: 600; margin: 0.2em 0; }
.todo { margin: 0.3em 0; padding-left: 1.5em; } .todo li { margin: 0.3em 0; } .do { margin-top: 0.1em; }
table.wide { font-size: 0.75em; } .wide th, .wide td { padding: 0.2em 0.3em; } .wide .name { min-width: 10em; }
td, td a { overflow-wrap: anywhere; }
details.more-rows > summary { cursor: pointer; color: #1a5fb4; font-size: 0.9em; }
"""

EMBED_SCRIPT = """
(function () {
  document.querySelectorAll('script[type="application/json"][data-chart]').forEach(function (block) {
    var target = document.getElementById(block.dataset.chart);
    var spec = JSON.parse(block.textContent);
    vegaEmbed(target, spec, {renderer: "svg", actions: false}).then(function () {
      target.dataset.rendered = "true";
    }).catch(function (err) {
      target.dataset.rendered = "error";
      var p = document.createElement("p");
      p.className = "chart-error";
      p.textContent = "chart failed to render: " + err;
      target.appendChild(p);
      console.error(err);
    });
  });
})();
"""


def script_json(value: Any) -> str:
    """JSON text safe inside an HTML ``<script>`` element (no ``<``, ``>``, ``&`` or U+2028/9)."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def linkify(text: str) -> str:
    """``text`` escaped for HTML, with each ``http://`` or ``https://`` URL in it made a link
    (``<a href>``, the URL escaped in both places; trailing punctuation stays outside). Other
    schemes (``javascript:``, ``file:``) stay plain text."""
    parts, end = [], 0
    for match in _URL.finditer(text):
        url = match.group(0)
        parts += [html.escape(text[end:match.start()]),
                  f'<a href="{html.escape(url, quote=True)}" rel="noopener noreferrer">{html.escape(url)}</a>']
        end = match.end()
    parts.append(html.escape(text[end:]))
    return "".join(parts)


def chart_spec(chart: Any) -> Any:
    """The Vega-Lite spec of an Altair chart (a dict is returned as it is), whatever its number of
    rows: the data is inlined in the page either way, and Altair's 5,000-row guard (MaxRowsError)
    would fail a report of a trace with a few hundred steps (their per-step region bars)."""
    if not hasattr(chart, "to_dict"):
        return chart
    # one at a time: disable_max_rows sets Altair's global options for its block
    with _TO_DICT, altair().data_transformers.disable_max_rows():
        return chart.to_dict()


_TO_DICT = threading.Lock()


@functools.cache
def _worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="trace-report-charts")


def spec_ahead(chart: Any) -> Future[Any]:
    """:func:`chart_spec` of ``chart`` started on a worker thread (one per process), for a page
    that has more to compute before it renders (``report``: Altair's ``to_dict`` is pure Python,
    slow on a large trace's charts, and runs while the next sections' DuckDB queries leave the GIL
    free). The chart must not change afterwards."""
    return _worker().submit(chart_spec, chart)


def chart_block(div_id: str, chart: Any) -> str:
    """A ``<div>`` for one chart and the escaped JSON of its Vega-Lite spec."""
    spec = chart_spec(chart)
    safe_id = html.escape(div_id, quote=True)
    return (f'<div class="chart" id="{safe_id}"></div>\n'
            f'<script type="application/json" data-chart="{safe_id}">{script_json(spec)}</script>')


def page(title: str, body: str) -> str:
    """A complete HTML document: ``title`` (escaped here), ``body`` (already safe HTML, with
    :func:`chart_block` elements), the inlined JavaScript and the embedding script."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n"
        f"<script>{vega_bundle()}</script>\n</head>\n<body>\n{body}\n"
        f"<script>{EMBED_SCRIPT}</script>\n</body>\n</html>\n"
    )


def chart_html(chart: Any, title: str = "trace-report chart") -> str:
    """One chart as a self-contained, offline HTML page."""
    return page(title, chart_block("chart", chart))


def save_chart(chart: Any, path: Path | str) -> Path:
    """Write ``chart`` by suffix: ``.html`` (self-contained, offline), ``.png`` or ``.svg``
    (rendered by vl-convert, no browser). Written through a temporary file and a rename.

    Raises :class:`InputError` for another suffix or a missing folder.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in CHART_SUFFIXES:
        raise InputError(f"{path}: chart files must end in .html, .png or .svg")
    if not path.absolute().parent.is_dir():
        raise InputError(f"{path.parent}: no such directory")
    if suffix == ".html":
        write_atomic(path, chart_html(chart, path.stem))
        return path
    import vl_convert as vlc

    spec, version = chart_spec(chart), altair().utils._importers.vl_version_for_vl_convert()
    if suffix == ".svg":
        write_atomic(path, vlc.vegalite_to_svg(spec, vl_version=version))
    else:
        write_atomic(path, vlc.vegalite_to_png(spec, vl_version=version, scale=1.5))
    return path

