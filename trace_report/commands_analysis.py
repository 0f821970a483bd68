"""Analysis commands: ``breakdown``, ``flags``, ``advise`` and ``hta`` (registered in ``cli.py``).

Each command opens its targets, calls one library function and prints rows with the shared
output options; notes for the user go to stderr as ``note: ...``.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from trace_report.analyze.advise import advise
from trace_report.analyze.hta_bridge import HtaOptions, hta_idle, hta_launch_stats, hta_temporal
from trace_report.analyze.kernel_classes import FlagsOptions, flags
from trace_report.analyze.regions import BreakdownOptions, breakdown
from trace_report.cli_common import FormatOpt, LimitOpt, OutputOpt, TargetsArg, err, load
from trace_report.output import Format, OutputOptions, emit, render, write_atomic

RankOpt = Annotated[int | None, typer.Option("--rank", help="Only this rank.")]
ByRankOpt = Annotated[bool, typer.Option("--by-rank", help="One group of rows per rank (else summed over ranks).")]


def _notes(notes: list[str]) -> None:
    for note in notes:
        err.print(f"note: {note}", markup=False)


def _emit_rows(frame: pd.DataFrame, opts: OutputOptions, title: str) -> None:
    """Like :func:`emit`, but an empty result prints nothing as a table (the note says why)."""
    if frame.empty and opts.resolve() is Format.table and opts.output is None:
        return
    emit(frame, opts, title=title)


def _text_lists(frame: pd.DataFrame, fmt: Format, columns: list[str]) -> pd.DataFrame:
    """List columns as ``a, b`` text for every format but JSON (which keeps lists)."""
    if fmt is Format.json:
        return frame
    out = frame.copy()
    for col in columns:
        if col in out:
            out[col] = out[col].map(lambda v: ", ".join(map(str, v)) if isinstance(v, list) else v)
    return out


def breakdown_cmd(
    targets: TargetsArg,
    by_step: Annotated[bool, typer.Option("--by-step", help="One group of rows per ProfilerStep.")] = False,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Wall, GPU-kernel, GPU-idle and CPU time per region (forward, loss, backward, optimizer_step,
    data_loading, other) of each ProfilerStep; kernels belong to the region of their launch."""
    with load(targets) as db:
        result = breakdown(db, BreakdownOptions(by_step=by_step, rank=rank, by_rank=by_rank))
    _notes(result.notes)
    emit(result.frame, OutputOptions(fmt, limit, output), title="Step breakdown by region")


def flags_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    classes: Annotated[list[str] | None, typer.Option(
        "--class", "-c", help="Only names with this class (repeatable): tf32, tensor_core, ...")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show the rule and source behind each class.")] = False,
    summary: Annotated[bool, typer.Option("--summary", help="Print only the per-class summary.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Flag GPU kernels by class (TF32, tensor core, BF16/FP16, layout conversion, GEMM, conv, NCCL,
    ...) with count and time, then the TF32, tensor-core and layout-conversion shares of GPU time."""
    with load(targets) as db:
        result = flags(db, FlagsOptions(rank=rank, by_rank=by_rank, classes=tuple(classes or ()), limit=limit))
    _notes(result.notes)
    opts = OutputOptions(fmt, None, output)
    fmt_used = opts.resolve()
    if explain:
        emit(result.explain, opts, title="Kernel class rules")
        return
    if summary:
        emit(result.summary, opts, title="Share of GPU time")
        return
    rows = _text_lists(result.frame, fmt_used, ["classes"])
    if fmt_used in (Format.table, Format.markdown):
        text = render(rows, fmt_used, "Flagged kernels") + "\n" + render(result.summary, fmt_used, "Share of GPU time")
        if output is None:
            sys.stdout.write(text)
        else:
            write_atomic(output, text)
        return
    emit(rows, opts)
    for r in result.summary.to_dict(orient="records"):
        who = f"rank {r['rank']} " if by_rank else ""
        err.print(f"summary: {who}{r['class']}: {r['count']} ops, {r['total_us']:,.1f} us, "
                  f"{r['pct']:.2f}% of GPU time", markup=False)


def advise_cmd(
    targets: TargetsArg,
    rank: RankOpt = None,
    by_rank: Annotated[bool, typer.Option("--by-rank", help="One row per rank and finding.")] = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
) -> None:
    """Recommendations with the measured numbers and thresholds behind them; silent (a note, no rows)
    when nothing crosses a threshold."""
    with load(targets) as db:
        result = advise(db, rank=rank, by_rank=by_rank)
    _notes(result.notes)
    frame = _text_lists(result.frame, OutputOptions(fmt, None, output).resolve(), ["ranks"])
    _emit_rows(frame, OutputOptions(fmt, None, output), "Findings")


class HtaAnalysis(str, enum.Enum):
    temporal = "temporal"
    idle = "idle"
    launch = "launch"


def hta_cmd(
    analysis: Annotated[HtaAnalysis, typer.Argument(help="temporal: idle/compute/non-compute time per rank; "
                                                         "idle: idle time by cause per stream; launch: kernel "
                                                         "launch statistics.")],
    targets: Annotated[list[Path], typer.Argument(
        help="Trace files, directories of ranks, tar archives (or a database whose trace files still exist).")],
    ranks: Annotated[list[int] | None, typer.Option("--rank", help="Only this rank (repeatable).")] = None,
    include_last_step: Annotated[bool, typer.Option(
        "--include-last-step", help="Keep the last ProfilerStep (HTA drops it by default).")] = False,
    per_launch: Annotated[bool, typer.Option("--per-launch", help="launch: one row per launch.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run a Holistic Trace Analysis (HTA) analysis on trace files and print its table."""
    opts = HtaOptions(ranks=tuple(ranks or ()), include_last_step=include_last_step)
    if analysis is HtaAnalysis.temporal:
        frame = hta_temporal(targets, opts)
    elif analysis is HtaAnalysis.idle:
        frame = hta_idle(targets, opts)
    else:
        frame = hta_launch_stats(targets, opts, per_launch=per_launch)
    emit(frame, OutputOptions(fmt, limit, output), title=f"HTA {analysis.value}")
