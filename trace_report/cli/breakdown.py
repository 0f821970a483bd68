"""``trace-report breakdown PATHS``: step time per region."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    ByRankOpt,
    EngineName,
    EngineOpt,
    FormatOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    RayAddressOpt,
    TargetsArg,
    load,
    notes,
    ray_load,
    ray_session,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked

if TYPE_CHECKING:
    from trace_report.store.tracedb import TraceDB


@app.command("breakdown")
def breakdown_cmd(
    targets: TargetsArg,
    by_step: Annotated[bool, typer.Option("--by-step", help="One group of rows per ProfilerStep.")] = False,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    stragglers: Annotated[bool, typer.Option(
        "--stragglers", help="Step time per rank instead: behind the fastest rank, slowest rank per step.")] = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Wall, GPU-kernel, GPU-idle and CPU time per region (forward, loss, backward, optimizer_step,
    data_loading, other) of each ProfilerStep; kernels belong to the region of their launch.
    With --by-rank, the spread of step time between ranks is noted; --stragglers lists it per rank.
    With --engine ray the regions of each trace are computed in a Ray task and summed here
    (--stragglers and the spread note still read the database on this machine).
    On a database, each trace's rows are kept beside it (DB.events/derived/, safe to delete) by
    the ingest of a trace of 1,000,000 events or more, else by the first run, and later runs read
    them; a re-ingested trace or another version computes them again.

    \b
    Examples:
      trace-report breakdown traces/ddp-run/ --stragglers
      trace-report breakdown runs.duckdb --engine ray
    """
    from trace_report.analyses.breakdown import BreakdownOptions, BreakdownResult, breakdown
    from trace_report.analyses.stragglers import StragglerOptions
    from trace_report.analyses.stragglers import stragglers as straggler_rows
    from trace_report.present.tables import OutputOptions, emit

    opts = BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank)
    ray = engine is EngineName.ray
    if ray:
        from trace_report.analyses.breakdown.ray import breakdown_ray
    with ray_session(ray_address) if ray else nullcontext(), ray_load(targets) if ray else load(targets) as db:
        if stragglers:
            per = per_run(db, lambda d: straggler_rows(d, StragglerOptions(rank=rank)), run=run, merge=merge_runs)
            report(per)
            notes(run_notes(per, lambda r: r.notes))
            emit(stacked(per, lambda r: r.frame, limit), OutputOptions(fmt, None, output, raw=raw),
                 title="Step time per rank")
            return

        def one(d: TraceDB) -> tuple[BreakdownResult, list[str]]:
            result = breakdown_ray(d, opts) if ray else breakdown(d, opts)
            spread = straggler_rows(d, StragglerOptions()).notes if by_rank and len(d.ranks()) > 1 else []
            return result, result.notes + [f"stragglers: {line} (--stragglers for every rank)" for line in spread
                                           if line.startswith("step ")]

        per = per_run(db, one, run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r[1]))
    emit(stacked(per, lambda r: r[0].frame, limit), OutputOptions(fmt, None, output, raw=raw),
         title="Step breakdown by region")
