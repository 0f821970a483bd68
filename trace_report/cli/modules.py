"""``trace-report modules PATHS``: per nn.Module (TraceLens' nn.Module tree) the CPU time, the GPU
time of what it launched and its FLOP, as a tree."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, LimitOpt, OutputOpt, RankOpt, RawOpt, TargetsArg, load, notes
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("modules")
def modules_cmd(
    targets: TargetsArg,
    depth: Annotated[int | None, typer.Option(
        "--depth", min=1, help="Show the module tree down to this depth (1: the outermost modules).")] = None,
    rank: RankOpt = None,
    by_step: Annotated[bool, typer.Option(
        "--by-step", help="One row per module and ProfilerStep (else summed over the trace).")] = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Per nn.Module, as a tree: calls, CPU time (cpu_us, inclusive), the GPU operations launched
    on its thread during it (gpu_ops, gpu_us; by correlation id) and the FLOP of its operators
    that have shapes (flop). Modules come from the nn.Module events of a trace profiled with
    with_stack=True, as capture records them (and '## name ##' record_function ranges); path is the
    enclosing modules, outermost first (TraceLens' nn.Module tree).

    \b
    Examples:
      trace-report modules traces/run-42 --depth 3
      trace-report modules traces/run-42 --by-step -f csv -o modules.csv
    """
    from trace_report.analyses.modules import ModuleOptions, modules
    from trace_report.present.tables import OutputOptions, emit

    opts = ModuleOptions(depth=depth, rank=rank, by_step=by_step)
    with load(targets) as db:
        per = per_run(db, lambda d: modules(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    emit(stacked(per, lambda r: r.frame, limit), OutputOptions(fmt, None, output, False, raw=raw), title="Modules")
