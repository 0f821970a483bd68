"""Domain exceptions. The library raises these; the CLI maps them to ``Error: ...`` and exit 1."""

from __future__ import annotations


class TraceReportError(Exception):
    """Base class: bad input or a failed analysis. ``str(err)`` is a one-line message for users."""


class InputError(TraceReportError):
    """A path, file or option the user gave cannot be used (missing, empty, corrupt, foreign)."""


class TraceFormatError(InputError):
    """A trace file exists but is not a readable Chrome/Kineto trace (invalid JSON, no events...)."""


class DatabaseError(TraceReportError):
    """A DuckDB file is not a trace-report database, is locked, or cannot be written."""


class UsageError(InputError):
    """An option value that does not fit the data (``--rank 7`` of a two-rank run): exit 2."""


class EngineError(TraceReportError):
    """A distributed engine failed: the Ray cluster cannot be reached, or a task was lost beyond
    its retries."""
