"""``trace-report hta ANALYSIS PATHS``: Holistic Trace Analysis on the same inputs."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    LimitOpt,
    OutputOpt,
    inputs_given,
)
from trace_report.cli.registry import app


class HtaAnalysis(str, enum.Enum):
    temporal = "temporal"
    idle = "idle"
    launch = "launch"


@app.command("hta")
def hta_cmd(
    analysis: Annotated[HtaAnalysis, typer.Argument(help="temporal: idle/compute/non-compute time per rank; "
                                                         "idle: idle time by cause per stream; launch: kernel "
                                                         "launch statistics.")],
    targets: Annotated[list[Path], typer.Argument(
        help="Trace files, directories of ranks, tar archives (or a database whose trace files still exist).",
        callback=inputs_given)],
    ranks: Annotated[list[int] | None, typer.Option("--rank", help="Only this rank (repeatable).")] = None,
    include_last_step: Annotated[bool, typer.Option(
        "--include-last-step", help="Keep the last ProfilerStep (HTA drops it by default).")] = False,
    per_launch: Annotated[bool, typer.Option("--per-launch", help="launch: one row per launch.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run a Holistic Trace Analysis (HTA) analysis on trace files and print its table.

    \b
    Example:
      trace-report hta temporal traces/ddp-run/
    """
    from trace_report.analyses.hta_bridge import HtaOptions, hta_idle, hta_launch_stats, hta_temporal
    from trace_report.present.tables import OutputOptions, emit

    opts = HtaOptions(ranks=tuple(ranks or ()), include_last_step=include_last_step)
    if analysis is HtaAnalysis.temporal:
        frame = hta_temporal(targets, opts)
    elif analysis is HtaAnalysis.idle:
        frame = hta_idle(targets, opts)
    else:
        frame = hta_launch_stats(targets, opts, per_launch=per_launch)
    emit(frame, OutputOptions(fmt, limit, output), title=f"HTA {analysis.value}")
