"""The report's fixed costs: Altair imported without rfc3987_syntax compiling its
grammars (most of ``import altair``), and the Vega JavaScript bundle kept in the user's cache
folder instead of being rebuilt by vl-convert for every report (seconds each time)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from trace_report.present.charts import loading

PROBE = """
import sys
from trace_report.present.charts.loading import altair
alt = altair()
import jsonschema
print("altair" in sys.modules, "rfc3987_syntax" in sys.modules, "iri" in jsonschema.FormatChecker.checkers)
import rfc3987_syntax  # importable again afterwards
print(rfc3987_syntax.__name__)
"""


@pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None, reason="rfc3987_syntax is not installed")
def test_altair_import_skips_the_rfc3987_grammars() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    assert first == "True False False"  # altair loaded, the grammars not, jsonschema without iri checks
    assert second == "rfc3987_syntax"


def test_the_vega_lite_schema_names_no_iri_format() -> None:
    """Why hiding rfc3987_syntax changes no validation: Altair validates with jsonschema's format
    checker, and the schema it ships names ``uri`` and ``uri-reference`` (checked by
    rfc3986_validator, still imported) but never ``iri``, the one format rfc3987_syntax adds."""
    import json
    import re
    from importlib import resources

    alt = loading.altair()
    version = alt.SCHEMA_VERSION.split(".")[0]  # "v6"
    text = (resources.files("altair") / "vegalite" / version / "schema" / "vega-lite-schema.json").read_text()
    formats = set(re.findall(r'"format":\s*"([^"]+)"', text))
    assert formats and "iri" not in formats and "iri-reference" not in formats
    assert json.loads(text)["$schema"].startswith("http")  # the file is the schema itself


def test_altair_left_as_it_is_when_jsonschema_is_loaded() -> None:
    probe = ("import sys, jsonschema\nfrom trace_report.present.charts.loading import altair\naltair()\n"
             "print('rfc3987_syntax' in sys.modules or not __import__('importlib').util.find_spec('rfc3987_syntax'))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_REPORT_CACHE_DIR", str(tmp_path / "cache"))
    loading.vega_bundle.cache_clear()
    yield tmp_path / "cache"
    loading.vega_bundle.cache_clear()


def test_bundle_built_once_then_read_from_the_cache(cache, monkeypatch) -> None:
    built = []
    real = loading._build_bundle
    monkeypatch.setattr(loading, "_build_bundle", lambda v: built.append(v) or real(v))
    text = loading.vega_bundle()
    assert built and loading.BUNDLE_MARK in text and len(text) > 100_000
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].read_text(encoding="utf-8") == text and files[0].suffix == ".js"
    loading.vega_bundle.cache_clear()
    monkeypatch.setattr(loading, "_build_bundle", lambda v: pytest.fail("built again"))
    assert loading.vega_bundle() == text


def test_damaged_cache_file_is_rebuilt_and_unwritable_cache_is_no_error(cache, monkeypatch) -> None:
    monkeypatch.setattr(loading, "_build_bundle", lambda v: f"/* {v} */ function vegaEmbed() {{}}")
    first = loading.vega_bundle()
    (path,) = cache.iterdir()
    path.write_text("truncated", encoding="utf-8")
    loading.vega_bundle.cache_clear()
    assert loading.vega_bundle() == first and path.read_text(encoding="utf-8") == first
    blocked = cache / "file"
    blocked.write_text("x")
    monkeypatch.setenv("TRACE_REPORT_CACHE_DIR", str(blocked / "below"))  # a folder under a file
    loading.vega_bundle.cache_clear()
    assert loading.vega_bundle() == first
    assert not list(cache.glob(".*.tmp"))


PRELOAD_PROBE = """
import sys, threading
from trace_report.present.charts import loading
before = sys.getswitchinterval()
thread = loading.preload()
alt = loading.altair()  # at once, while the preload thread imports: the whole module, never half of it
chart = alt.Chart({"values": [{"x": 1}]}).mark_point().encode(x="x:Q")
spec = chart.to_dict()
thread.join()
print(thread.name, spec["mark"]["type"] if isinstance(spec["mark"], dict) else spec["mark"],
      sys.getswitchinterval() == before, loading.BUNDLE_MARK in loading.vega_bundle())
"""


def test_preload_then_altair_at_once_gives_the_whole_module(cache) -> None:
    """The report starts :func:`loading.preload` and may call ``altair()`` before that thread is
    done (a small database): the call waits for the complete module, and the GIL switch interval is
    Python's again afterwards."""
    done = subprocess.run([sys.executable, "-c", PRELOAD_PROBE], capture_output=True, text=True, check=False,
                          env={**os.environ, "TRACE_REPORT_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["trace-report-preload", "point", "True", "True"]


def test_bundle_asked_by_two_threads_is_built_once(cache, monkeypatch) -> None:
    import threading
    import time

    built = []

    def slow(version: str) -> str:
        built.append(version)
        time.sleep(0.2)  # the second thread asks while the first builds
        return f"/* {version} */ function vegaEmbed() {{}}"

    monkeypatch.setattr(loading, "_build_bundle", slow)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(loading.vega_bundle())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(got) == 2 and got[0] == got[1]
