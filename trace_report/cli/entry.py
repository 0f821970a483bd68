"""The ``trace-report`` console script (and ``python -m trace_report.cli``): the process settings
that must come before the app's own imports, then the app (:func:`trace_report.cli.app.main`).

Python's garbage-collector thresholds (:func:`trace_report.sysutil.tune_gc`) are set here, before
typer, DuckDB and the command's modules are imported: a program that calls
:func:`~trace_report.cli.app.main` itself (the tests) keeps its own.
"""

from __future__ import annotations


def main() -> None:
    """Tune the collector, then run the command line on ``sys.argv``."""
    from trace_report.sysutil import tune_gc

    tune_gc()
    from trace_report.cli.app import main as run_app

    run_app()
