"""Capture: the instrumented training loop and the experiment suite (``trace-report capture``).

Library entry points: :class:`CaptureConfig` (every option and default), :func:`run_capture`
(validate, run an experiment, write ``<out-dir>/<run-id>/``) and :func:`train` (the shared loop).
They are imported lazily so that the CLI starts without importing torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "CaptureConfig": "trace_report.capture.config",
    "RunResult": "trace_report.capture.loop",
    "train": "trace_report.capture.loop",
    "run_capture": "trace_report.capture.runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
