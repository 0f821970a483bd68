"""``trace-report compare A B``: kernel or region differences B - A."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import (
    EngineName,
    EngineOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RayAddressOpt,
    inputs_given,
    load,
    notes,
    output_given,
    ray_load,
    ray_session,
)
from trace_report.cli.registry import app


class Match(str, enum.Enum):
    exact = "exact"
    short = "short"


class Level(str, enum.Enum):
    kernel = "kernel"
    region = "region"


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help="A (the reference): a trace, run folder, database or dataset.",
                                      callback=inputs_given)],
    b: Annotated[Path, typer.Argument(help="B (compared with A), of any of the same kinds.", callback=inputs_given)],
    by: Annotated[Level, typer.Option("--by", help="kernel: per GPU operation name; region: per step region.")]
    = Level.kernel,
    rank: RankOpt = None,
    per_step: Annotated[bool | None, typer.Option(
        "--per-step/--no-per-step", help="Counts and times per ProfilerStep of each side (default: per step for "
                                         "--by region, totals for --by kernel).", show_default=False)] = None,
    match: Annotated[Match, typer.Option(
        "--match", help="kernel: pair by exact name, or by short name (argument lists and nested templates elided: "
                        "kernels that only differ by PyTorch version pair up).")] = Match.exact,
    steps_only: Annotated[bool, typer.Option(
        "--steps-only", help="kernel: only GPU operations launched inside a ProfilerStep (HTA TraceDiff's rule).")]
    = False,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write a chart (.html, .png or .svg).",
                                               callback=output_given)] = None,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Kernel- or region-level differences B - A (time, count, share; new and vanished kernels),
    largest time difference first. Regions are compared per step by default.

    \b
    Examples:
      trace-report compare runs/torch-2.0 runs/torch-2.4 --match short -n 20
      trace-report compare a.duckdb b.duckdb --engine ray (each side's traces in Ray tasks)
    """
    from trace_report.analyses.compare import CompareOptions, compare
    from trace_report.present.tables import OutputOptions, emit

    opts = CompareOptions(by=by.value, rank=rank, per_step=per_step, steps_only=steps_only, match=match.value)
    if engine is EngineName.ray:
        from trace_report.analyses.distributed import compare_ray

        with ray_session(ray_address), ray_load([a]) as da, ray_load([b]) as db:
            result = compare_ray(da, db, opts)
    else:
        with load([a]) as da, load([b]) as db:
            result = compare(da, db, opts)
    notes([f"A = {a}", f"B = {b}", *result.notes])
    if chart is not None:
        from trace_report.present.charts import compare_chart, save_chart

        save_chart(compare_chart(result.frame, limit=limit or 20, a=str(a), b=str(b)), chart)
    emit(result.frame, OutputOptions(fmt, limit, output, full_names), title=f"B - A by {by.value}")
