"""``trace-report sequences PATHS``: the most time-consuming repeated kernel sequences per launching
operator, and whether they are fusion candidates (HTA's get_frequent_cuda_kernel_sequences)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    TargetsArg,
    load,
    notes,
)
from trace_report.cli.overlap import StepsOnlyOpt
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked

if TYPE_CHECKING:
    import pandas as pd

    from trace_report.present.format import Format

SEPARATOR = " | "
"""Between the kernels of a sequence in table, Markdown and CSV output (HTA joins its pattern
with ``|``); JSON keeps the list."""
SHORT_WIDTH = 36
"""Characters per kernel in a table's sequence (a sequence holds up to 8 names)."""


def kernel_text(frame: pd.DataFrame, fmt: Format, full_names: bool) -> pd.DataFrame:
    """``frame`` with its ``kernels`` lists as one text per row for every format but JSON: short
    kernel names (told apart across the whole table) in table and Markdown unless ``full_names``,
    the whole names in CSV."""
    from trace_report.present import fit
    from trace_report.present.format import Format

    if fmt is Format.json or "kernels" not in frame:
        return frame
    names = sorted({k for ks in frame["kernels"] for k in ks})
    short = dict(zip(names, names, strict=True))
    if fmt is not Format.csv and not full_names:
        short = dict(zip(names, fit.short_names(names, SHORT_WIDTH), strict=True))
    return frame.assign(kernels=[SEPARATOR.join(short[k] for k in ks) for ks in frame["kernels"]])


@app.command("sequences")
def sequences_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    operator: Annotated[str | None, typer.Option(
        "--operator", help="Launching operators are the outermost CPU events (cpu_op, user_annotation, "
                           "python_function) whose name contains this text, as HTA's operator_name "
                           "(default: the outermost cpu_op of each launch).")] = None,
    min_length: Annotated[int, typer.Option(
        "--min-length", min=1, help="Shortest sequence shown, in GPU operations per operator call.")] = 2,
    max_length: Annotated[int, typer.Option(
        "--max-length", min=1, help="Longest sequence shown, in GPU operations per operator call.")] = 8,
    min_count: Annotated[int, typer.Option(
        "--min-count", min=1, help="Show sequences launched at least this many times (1: HTA's list).")] = 2,
    steps_only: StepsOnlyOpt = True,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Repeated kernel sequences: per launching operator (the outermost CPU operator around the
    launch call), the GPU operations one call launched in order, counted over the calls as HTA's
    get_frequent_cuda_kernel_sequences counts them: count, GPU time (total_us, mean_us, pct), the
    calls' CPU time (cpu_us), and fusible when every operation is an elementwise or reduction kernel
    (a fusion candidate for torch.compile). Most GPU time first.

    \b
    Examples:
      trace-report sequences traces/run-42 --limit 10
      trace-report sequences traces/run-42 --operator autograd::engine --min-length 3 -f json
    """
    from trace_report.analyses.sequences import SequenceOptions, check_options, sequences
    from trace_report.present.tables import OutputOptions, emit

    opts = SequenceOptions(rank=rank, operator=operator, min_length=min_length, max_length=max_length,
                           min_count=min_count, steps_only=steps_only)
    check_options(opts)
    out = OutputOptions(fmt, None, output, full_names, raw=raw)
    with load(targets) as db:
        per = per_run(db, lambda d: sequences(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: r.notes))
    rows = kernel_text(stacked(per, lambda r: r.frame, limit), out.resolve(), full_names)
    emit(rows, out, title="Kernel sequences")
