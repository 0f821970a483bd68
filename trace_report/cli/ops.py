"""``trace-report ops PATHS``: the operator view (CPU time, launched GPU time, FLOP, TFLOP/s)."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, OutputOpt, RankOpt, RawOpt, TargetsArg, load, notes
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked


@app.command("ops")
def ops_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_shape: Annotated[bool, typer.Option("--by-shape", help="One row per operator and input shapes.")] = False,
    all_ops: Annotated[bool, typer.Option("--all", help="Every CPU operator, not only aten::.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Rows.")] = 30,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Operators (aten::) with self CPU time, the GPU time of the kernels they launched (directly,
    and with nested operators), FLOP from input shapes (GEMM, convolution, attention) and TFLOP/s.

    \b
    Example:
      trace-report ops trace.json.gz --by-shape -n 20
    """
    from trace_report.analyses.ops import OpsOptions, ops
    from trace_report.present.tables import OutputOptions, emit

    with load(targets) as db:
        opts = OpsOptions(rank=rank, by_shape=by_shape, all_ops=all_ops, limit=limit)
        per = per_run(db, lambda d: ops(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    emit(stacked(per, lambda r: r.frame), OutputOptions(fmt, None, output, raw=raw), title="Operators")
