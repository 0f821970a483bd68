"""trace-report: capture and analyze PyTorch Profiler traces and Nsight reports.

>>> import trace_report as tr
>>> db = tr.open("traces/run-42/")             # doctest: +SKIP
>>> db.top_kernels(limit=10)                   # doctest: +SKIP
"""

from trace_report.api import TraceDB, open
from trace_report.errors import DatabaseError, InputError, TraceFormatError, TraceReportError

__version__ = "0.1.0"
__all__ = [
    "DatabaseError",
    "InputError",
    "TraceDB",
    "TraceFormatError",
    "TraceReportError",
    "open",
]
