"""``trace-report memory PATHS``: allocated and reserved bytes per device, peak per step."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, LimitOpt, OutputOpt, RankOpt, TargetsArg, load, notes
from trace_report.cli.registry import app


@app.command("memory")
def memory_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    device: Annotated[str | None, typer.Option("--device", help="Only this device (cuda:0, cpu).")] = None,
    timeline: Annotated[bool, typer.Option("--timeline", help="One row per [memory] event instead of peaks.")] = False,
    chart: Annotated[Path | None, typer.Option(
        "--chart", help="Also write the timeline chart (.html, .png or .svg).")] = None,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Peak allocated and reserved bytes per device and ProfilerStep, from the allocator's
    [memory] events (profile_memory=True); --timeline lists every event, --chart draws them.

    \b
    Example:
      trace-report memory trace.json.gz --chart memory.html
    """
    from trace_report.analyses.memory import MemoryOptions, memory_peaks, memory_timeline
    from trace_report.present.charts import save_chart
    from trace_report.present.charts.memory import memory_chart
    from trace_report.present.tables import OutputOptions, emit

    opts = MemoryOptions(rank=rank, device=device)
    with load(targets) as db:
        result = memory_timeline(db, opts) if timeline or chart else None
        shown = result if timeline and result is not None else memory_peaks(db, opts)
    notes(shown.notes)
    if chart is not None and result is not None and not result.frame.empty:
        save_chart(memory_chart(result.frame), chart)
    emit(shown.frame, OutputOptions(fmt, limit, output), title="Memory timeline" if timeline else "Memory peaks")
