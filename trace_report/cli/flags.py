"""``trace-report flags PATHS``: kernel classes (TF32, tensor core, layout conversion...)."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import (
    ByRankOpt,
    EngineName,
    EngineOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RayAddressOpt,
    TargetsArg,
    err,
    load,
    notes,
    ray_load,
    ray_session,
)
from trace_report.cli.registry import app


@app.command("flags")
def flags_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    classes: Annotated[list[str] | None, typer.Option(
        "--class", "-c", help="Only names with this class (repeatable): tf32, tensor_core, ...")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show the rule and source behind each class.")] = False,
    summary: Annotated[bool, typer.Option("--summary", help="Print only the per-class summary.")] = False,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Flag GPU kernels by class (TF32, tensor core, BF16/FP16, layout conversion, GEMM, conv, NCCL,
    ...) with count and time, then the TF32, tensor-core and layout-conversion shares of GPU time.

    \b
    Examples:
      trace-report flags traces/run-42 --class tf32 --explain
      trace-report flags runs.duckdb --summary --engine ray
    """
    from trace_report.analyses.kernel_classes import FlagsOptions, flags
    from trace_report.present.format import Format
    from trace_report.present.tables import OutputOptions, emit, render, text_lists, write_text

    fopts = FlagsOptions(rank=rank, by_rank=by_rank, classes=tuple(classes or ()), limit=limit)
    if engine is EngineName.ray:
        from trace_report.analyses.distributed import flags_ray

        with ray_session(ray_address), ray_load(targets) as db:
            result = flags_ray(db, fopts)
    else:
        with load(targets) as db:
            result = flags(db, fopts)
    notes(result.notes)
    opts = OutputOptions(fmt, None, output, full_names)
    fmt_used = opts.resolve()
    if explain:
        emit(result.explain, opts, title="Kernel class rules")
        return
    if summary:
        emit(result.summary, opts, title="Share of GPU time")
        return
    rows = text_lists(result.frame, fmt_used, ["classes"])
    if fmt_used in (Format.table, Format.markdown):
        text = render(rows, fmt_used, "Flagged kernels", full_names=full_names) + "\n" + \
            render(result.summary, fmt_used, "Share of GPU time")
        write_text(output, text)
        return
    emit(rows, opts)
    for r in result.summary.to_dict(orient="records"):
        who = f"rank {r['rank']} " if by_rank else ""
        err.print(f"summary: {who}{r['class']}: {r['count']} ops, {r['total_us']:,.1f} us, "
                  f"{r['pct_of_gpu_time']:.2f}% of GPU time", markup=False)
