"""The per-run funnel of the command line: :mod:`trace_report.store.per_run` and the printing of
what it says about the runs."""

from __future__ import annotations

from typing import Any

from trace_report.cli.options import MergeRunsOpt, RunOpt, warn
from trace_report.store.per_run import PerRun, per_run, run_notes, stacked

__all__ = ["MergeRunsOpt", "PerRun", "RunOpt", "per_run", "report", "run_notes", "stacked"]


def report(per: PerRun[Any]) -> None:
    """Print the warnings about the runs (duplicate ranks) on stderr."""
    for message in per.warnings:
        warn(message)
