"""trace-report: capture and analyze PyTorch Profiler traces and Nsight reports.

>>> import trace_report as tr
>>> db = tr.open("traces/run-42/")             # doctest: +SKIP
>>> db.top_kernels(limit=10)                   # doctest: +SKIP

``open`` and ``TraceDB`` load the analysis layers on first use, so that ``import
trace_report.cli`` (and ``trace-report --help``) does not import pandas.
"""

from __future__ import annotations

from typing import Any

from trace_report.errors import DatabaseError, InputError, TraceFormatError, TraceReportError

__version__ = "0.2.0"
__all__ = [
    "DatabaseError",
    "InputError",
    "TraceDB",
    "TraceFormatError",
    "TraceReportError",
    "__version__",
    "open",
]


def __getattr__(name: str) -> Any:
    if name in ("open", "TraceDB"):
        from importlib import import_module

        return getattr(import_module("trace_report.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
