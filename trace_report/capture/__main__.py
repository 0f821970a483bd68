"""``python -m trace_report.capture [EXPERIMENT] [OPTIONS]``: the capture command on its own.

The Nsight hooks re-run captures through this entry point, so it works without the main CLI.
"""

from __future__ import annotations

import sys

import typer

from trace_report.capture.command import capture
from trace_report.errors import TraceReportError


def main(argv: list[str] | None = None) -> int:
    """Run the capture command; ``Error: ...`` on stderr and 1 for a TraceReportError."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    app.command()(capture)
    try:
        app(args=argv, standalone_mode=False)
    except TraceReportError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    except typer.Exit as done:
        return done.exit_code
    except typer.TyperException as err:  # usage errors: bad option values, unknown options
        print(f"Error: {err.format_message()}", file=sys.stderr)
        return getattr(err, "exit_code", 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
