"""``python -m trace_report.cli ARGS``: the ``trace-report`` command line."""

from trace_report.cli.entry import main

main()
