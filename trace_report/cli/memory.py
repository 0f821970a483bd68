"""``trace-report memory PATHS``: allocated and reserved bytes per device, peak per step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    TargetsArg,
    load,
    notes,
    output_given,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked

if TYPE_CHECKING:
    from trace_report.analyses.common.result import Result
    from trace_report.analyses.memory import MemoryOptions
    from trace_report.store.tracedb import TraceDB


@app.command("memory")
def memory_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    device: Annotated[str | None, typer.Option("--device", help="Only this device (cuda:0, cpu).")] = None,
    timeline: Annotated[bool, typer.Option("--timeline", help="One row per [memory] event instead of peaks.")] = False,
    chart: Annotated[Path | None, typer.Option(
        "--chart", help="Also write the timeline chart (.html, .png or .svg).", callback=output_given)] = None,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Peak allocated and reserved bytes per device and ProfilerStep, from the allocator's
    [memory] events (profile_memory=True); --timeline lists every event, --chart draws them.

    \b
    Example:
      trace-report memory trace.json.gz --chart memory.html
    """
    from trace_report.analyses.memory import MemoryOptions
    from trace_report.present.charts import save_chart
    from trace_report.present.charts.memory import memory_chart
    from trace_report.present.tables import OutputOptions, emit

    opts = MemoryOptions(rank=rank, device=device)
    with load(targets) as db:
        per = per_run(db, lambda d: _memory(d, opts, timeline, chart is not None), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r[1].notes))
    if chart is not None:
        timelines = [(label, r[0]) for label, r in per.results if r[0] is not None and not r[0].frame.empty]
        if timelines:
            save_chart(memory_chart(timelines[0][1].frame), chart)
            if len(timelines) > 1:
                notes([f"--chart: the timeline of run {timelines[0][0]} only (--run LABEL for another)"])
    emit(stacked(per, lambda r: r[1].frame, limit), OutputOptions(fmt, None, output, raw=raw),
         title="Memory timeline" if timeline else "Memory peaks")


def _memory(db: TraceDB, opts: MemoryOptions, timeline: bool, chart: bool) -> tuple[Result | None, Result]:
    """The timeline (when shown or charted) and what is shown (the timeline, or the peaks)."""
    from trace_report.analyses.memory import memory_peaks, memory_timeline

    result = memory_timeline(db, opts) if timeline or chart else None
    return result, result if timeline and result is not None else memory_peaks(db, opts)
