"""``trace-report breakdown PATHS``: step time per region."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    ByRankOpt,
    EngineName,
    EngineOpt,
    FormatOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RayAddressOpt,
    TargetsArg,
    load,
    notes,
    ray_load,
    ray_session,
)
from trace_report.cli.registry import app


@app.command("breakdown")
def breakdown_cmd(
    targets: TargetsArg,
    by_step: Annotated[bool, typer.Option("--by-step", help="One group of rows per ProfilerStep.")] = False,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Wall, GPU-kernel, GPU-idle and CPU time per region (forward, loss, backward, optimizer_step,
    data_loading, other) of each ProfilerStep; kernels belong to the region of their launch.

    Example: trace-report breakdown traces/run-42 --by-rank
    Example: trace-report breakdown runs.duckdb --engine ray (one Ray task per trace)
    """
    from trace_report.analyses.regions import BreakdownOptions, breakdown
    from trace_report.present.tables import OutputOptions, emit

    opts = BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank)
    if engine is EngineName.ray:
        from trace_report.analyses.distributed import breakdown_ray

        with ray_session(ray_address), ray_load(targets) as db:
            result = breakdown_ray(db, opts)
    else:
        with load(targets) as db:
            result = breakdown(db, opts)
    notes(result.notes)
    emit(result.frame, OutputOptions(fmt, limit, output), title="Step breakdown by region")
