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
    RawOpt,
    RayAddressOpt,
    TargetsArg,
    err,
    load,
    notes,
    ray_load,
    ray_session,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


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
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Flag GPU kernels by class (TF32, tensor core, BF16/FP16, layout conversion, GEMM, conv, NCCL,
    ...) with count and time, then the TF32, tensor-core and layout-conversion shares of GPU time.

    \b
    Examples:
      trace-report flags traces/run-42 --class tf32 --explain
      trace-report flags runs.duckdb --summary --engine ray
    """
    from trace_report.analyses.flags import FlagsOptions, flags
    from trace_report.present.format import Format
    from trace_report.present.tables import OutputOptions, emit, render, text_lists, write_text

    fopts = FlagsOptions(rank=rank, by_rank=by_rank, classes=tuple(classes or ()), limit=limit)
    if engine is EngineName.ray:
        from trace_report.analyses.flags.ray import flags_ray

        with ray_session(ray_address), ray_load(targets) as db:
            per = per_run(db, lambda d: flags_ray(d, fopts), run=run, merge=merge_runs)
    else:
        with load(targets) as db:
            per = per_run(db, lambda d: flags(d, fopts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    opts = OutputOptions(fmt, None, output, full_names, raw=raw)
    fmt_used = opts.resolve()
    if explain:
        emit(per.results[0][1].explain, opts, title="Kernel class rules")
        return
    summaries = stacked(per, lambda r: r.summary)
    if summary:
        emit(summaries, opts, title="Share of GPU time")
        return
    rows = text_lists(stacked(per, lambda r: r.frame), fmt_used, ["classes"])
    if fmt_used in (Format.table, Format.markdown):
        text = render(rows, fmt_used, "Flagged kernels", full_names=full_names, raw=raw) + "\n" + \
            render(summaries, fmt_used, "Share of GPU time", raw=raw)
        write_text(output, text)
        return
    emit(rows, opts)
    for r in summaries.to_dict(orient="records"):
        who = (f"run {r['run']} " if per.several else "") + (f"rank {r['rank']} " if by_rank else "")
        err.print(f"summary: {who}{r['class']}: {r['count']} ops, {r['total_us']:,.1f} us, "
                  f"{r['pct_of_gpu_time']:.2f}% of GPU time", markup=False)
