"""``trace-report hta ANALYSIS PATHS``: Holistic Trace Analysis on the same inputs.

HTA's failures are one ``Error:`` line with HTA's message (analyses/hta_bridge.py); ``--debug``
shows HTA's own output (progress, log lines, warnings) and, on a failure, HTA's traceback above
that line. The app has no global ``--debug`` (cli/app.py), so the option is this command's.
"""

from __future__ import annotations

import enum
import sys
import traceback
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    LimitOpt,
    OutputOpt,
    RawOpt,
    inputs_given,
    notes,
)
from trace_report.cli.registry import app
from trace_report.errors import TraceReportError
from trace_report.storage import Location, location

if TYPE_CHECKING:  # pandas and the bridge load in the command body (cli/ defers library imports)
    import pandas as pd

    from trace_report.analyses.hta import HtaOptions


class HtaAnalysis(str, enum.Enum):
    temporal = "temporal"
    idle = "idle"
    launch = "launch"


@app.command("hta")
def hta_cmd(
    analysis: Annotated[HtaAnalysis, typer.Argument(help="temporal: idle/compute/non-compute time per rank; "
                                                         "idle: idle time by cause per stream; launch: kernel "
                                                         "launch statistics.")],
    targets: Annotated[list[str], typer.Argument(  # each a Path, or a URL kept as text (storage.location)
        help="Trace files, directories of ranks, tar archives (or a database whose trace files still exist); local "
             "paths or s3://, gs://, abfs:// URLs. HTA reads local files only: traces in object storage are "
             "copied to a temporary folder, removed when it has finished.",
        callback=inputs_given, parser=location)],
    ranks: Annotated[list[int] | None, typer.Option("--rank", help="Only this rank (repeatable).")] = None,
    include_last_step: Annotated[bool, typer.Option(
        "--include-last-step", help="Keep the last ProfilerStep (HTA drops it by default).")] = False,
    per_launch: Annotated[bool, typer.Option("--per-launch", help="launch: one row per launch.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show HTA's own output (progress, log lines, "
                                                        "warnings) and the traceback of a failure.")] = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run a Holistic Trace Analysis (HTA) analysis on trace files and print its table.

    HTA reads local files only: traces in object storage (s3://, gs://, abfs:// URLs, or a database
    ingested from them) are copied to a temporary folder, removed when it has finished.

    \b
    Examples:
      trace-report hta temporal traces/ddp-run/
      trace-report hta idle s3://bucket/ddp-run/
    """
    from trace_report.analyses.hta import NO_LAUNCHES_NOTE, HtaOptions
    from trace_report.present.tables import OutputOptions, emit

    opts = HtaOptions(ranks=tuple(ranks or ()), include_last_step=include_last_step, show_hta_output=debug)
    try:
        frame = _analyse(analysis, targets, opts, per_launch=per_launch)
    except TraceReportError as exc:
        if debug and exc.__cause__ is not None:  # HTA's own exception; the Error line follows it
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        raise
    if analysis is HtaAnalysis.launch and not len(frame):
        notes([NO_LAUNCHES_NOTE])
    emit(frame, OutputOptions(fmt, limit, output, raw=raw), title=f"HTA {analysis.value}")


def _analyse(analysis: HtaAnalysis, targets: list[Location], opts: HtaOptions, *, per_launch: bool) -> pd.DataFrame:
    """The frame of one HTA analysis (analyses/hta_bridge.py)."""
    from trace_report.analyses.hta import hta_idle, hta_launch_stats, hta_temporal

    if analysis is HtaAnalysis.temporal:
        return hta_temporal(targets, opts)
    if analysis is HtaAnalysis.idle:
        return hta_idle(targets, opts)
    return hta_launch_stats(targets, opts, per_launch=per_launch)
