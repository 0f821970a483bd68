"""``python -m trace_report.capture [EXPERIMENT] [OPTIONS]``: the capture command on its own.

The Nsight hooks re-run captures through this entry point. It is ``trace-report capture``, with
the same error mapper (one ``Error:`` line, exit codes as the main command line).
"""

from __future__ import annotations

import sys

from trace_report.cli.app import run_args


def main(argv: list[str] | None = None) -> int:
    """Run ``trace-report capture ARGV``; returns the exit code. Only the ``capture`` command is
    built, as ``trace-report capture`` builds it (building every command's parameters slows each start)."""
    return run_args(["capture", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
