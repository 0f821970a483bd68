"""Altair and the Vega JavaScript, loaded at the cost a report can afford.

Two fixed costs made every ``report`` take seconds more than its analyses:

- ``import altair`` imports ``jsonschema``, whose ``_format`` module imports the optional
  ``rfc3987_syntax`` package when it is installed (it is, with jupyter's ``jsonschema[format-nongpl]``)
  to offer the ``iri`` format checks; ``rfc3987_syntax`` compiles 38 Lark grammars at import,
  most of ``import altair``. Altair validates specs with
  jsonschema's format checker (``altair.utils.schemapi.validate_jsonschema``), but the Vega-Lite
  schema it ships names no ``iri`` format (its formats: ``color-hex``, ``uri``, ``uri-reference``;
  ``uri`` is checked by ``rfc3986_validator``, still imported), so the ``iri`` checks are never
  used here: :func:`altair` hides ``rfc3987_syntax`` while jsonschema
  is first imported (jsonschema's own ``suppress(ImportError)`` path) and restores it at once.
  If jsonschema is already imported (a notebook), nothing is changed.
- ``vl_convert.javascript_bundle`` builds the Vega + Vega-Lite + vega-embed bundle on each call
  (seconds, the same ~0.9 MB of JavaScript every time for one vl-convert version): :func:`vega_bundle`
  keeps it in the user's cache folder (``platformdirs.user_cache_dir("trace-report")``, or
  ``$TRACE_REPORT_CACHE_DIR``), one file per vl-convert and Vega-Lite version, written
  atomically; a file that cannot be read or written is rebuilt, never an error.

What is left of ``import altair`` (jsonschema and jinja2 included) is
paid while the report's analyses run: :func:`preload` imports it on a background thread, which
holds the GIL only while DuckDB, running a query, does not need it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from importlib import metadata
from pathlib import Path
from types import ModuleType

import platformdirs

BUNDLE_MARK = "vegaEmbed"
"""Text every complete bundle contains (it defines ``vegaEmbed``); a cached file without it is rebuilt."""


PRELOAD_SWITCH_S = 0.0005
"""The GIL switch interval while :func:`preload` runs (Python's default: 5 ms). A thread back from
a DuckDB query waits for the GIL until the importing thread gives it up, at most one interval; a
report runs ~230 queries, many of them a few milliseconds long."""

_IMPORTING = threading.Lock()
"""Held while :func:`altair` imports: a second caller (the report's thread while :func:`preload`'s
imports) waits for the whole module, never gets the half-initialised one in ``sys.modules``."""


def altair() -> ModuleType:
    """The ``altair`` module, imported without ``rfc3987_syntax``'s grammar compilation (module
    doc). Thread-safe: a call while another thread imports returns once the import is complete."""
    with _IMPORTING:
        hide = "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules
        if hide:
            sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # import -> ImportError
        try:
            import altair as alt
        finally:
            if hide and sys.modules.get("rfc3987_syntax", 0) is None:
                del sys.modules["rfc3987_syntax"]
    return alt


def _preload() -> None:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(PRELOAD_SWITCH_S)
    try:
        altair()
        vega_bundle()
    except Exception:  # noqa: BLE001  # the report's own call raises it again, where it is reported
        return
    finally:
        sys.setswitchinterval(interval)


def preload() -> threading.Thread:
    """Start importing Altair and reading the Vega bundle (:func:`vega_bundle`) on a daemon thread,
    for a command that will draw charts after a few seconds of queries (``report``): each
    :func:`altair` or :func:`vega_bundle` call waits for it. An error is left for that call to raise."""
    thread = threading.Thread(target=_preload, name="trace-report-preload", daemon=True)
    thread.start()
    return thread


def cache_dir() -> Path:
    """Where :func:`vega_bundle` keeps its file: ``$TRACE_REPORT_CACHE_DIR`` or the platform's user
    cache folder for ``trace-report`` (``~/.cache/trace-report`` on Linux)."""
    return Path(os.environ.get("TRACE_REPORT_CACHE_DIR") or platformdirs.user_cache_dir("trace-report"))


def _build_bundle(vl_version: str) -> str:
    import vl_convert as vlc

    return vlc.javascript_bundle(vl_version=vl_version)


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if BUNDLE_MARK in text else None


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # read-only home, full disk: the next report builds it again
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


_BUNDLE = threading.Lock()
"""Held while :func:`vega_bundle` reads or builds: a second thread waits, then reads the file the
first one wrote (no second build)."""


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """The vega + vega-lite + vega-embed JavaScript (one classic script defining ``vegaEmbed``)
    for the Vega-Lite version Altair targets, shipped inside vl-convert-python (~0.9 MB); from
    the cache folder when an earlier run kept it (module doc)."""
    with _BUNDLE:
        return _bundle()


def _bundle() -> str:
    vl_version = altair().utils._importers.vl_version_for_vl_convert()
    path = cache_dir() / f"vega-bundle-vlc{metadata.version('vl-convert-python')}-vl{vl_version}.js"
    text = _read(path)
    if text is None:
        text = _build_bundle(vl_version)
        _write(path, text)
    return text
