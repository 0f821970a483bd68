"""Capture: the instrumented training loop and the experiment suite (``trace-report capture``).

Library entry points: :class:`CaptureConfig` (every option and default), :func:`run_capture`
(validate, run an experiment, write ``<out-dir>/<run-id>/``) and :func:`train` (the shared loop).
"""

from trace_report.capture.config import CaptureConfig
from trace_report.capture.loop import RunResult, train
from trace_report.capture.runner import run_capture

__all__ = ["CaptureConfig", "RunResult", "run_capture", "train"]
