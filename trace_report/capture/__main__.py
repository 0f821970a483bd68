"""``python -m trace_report.capture [EXPERIMENT] [OPTIONS]``: the capture command on its own.

The Nsight hooks re-run captures through this entry point. It is ``trace-report capture``, with
the same error mapper (one ``Error:`` line, exit codes as the main command line).
"""

from __future__ import annotations

import sys

from trace_report.cli.app import app, run


def main(argv: list[str] | None = None) -> int:
    """Run ``trace-report capture ARGV``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    return run(lambda: app(args=["capture", *args], standalone_mode=False, prog_name="trace-report"))


if __name__ == "__main__":
    sys.exit(main())
