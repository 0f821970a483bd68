"""``trace-report compare A B``: kernel or region differences B - A, after a headline (step time and
GPU time, A -> B); ``--fail-if`` rules exit 3 when broken (:mod:`trace_report.analyses.compare.gate`)."""

from __future__ import annotations

import enum
import math
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    EngineName,
    EngineOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    RayAddressOpt,
    err,
    inputs_given,
    load,
    notes,
    output_given,
    ray_load,
    ray_session,
    warn,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt
from trace_report.errors import UsageError
from trace_report.storage import location

if TYPE_CHECKING:
    from collections.abc import Callable

    from trace_report.analyses.compare import CompareOptions, CompareResult
    from trace_report.analyses.compare.gate import Headline, Rule, Verdict
    from trace_report.present.format import OutputOptions
    from trace_report.store.tracedb import TraceDB

    Analysis = Callable[[TraceDB, TraceDB, CompareOptions], CompareResult]

GATE_BROKEN = 3
"""The exit status of ``compare`` when a ``--fail-if`` rule is broken (1: bad input, 2: usage)."""


class Match(str, enum.Enum):
    exact = "exact"
    short = "short"


class Level(str, enum.Enum):
    kernel = "kernel"
    region = "region"


@app.command("compare")
def compare_cmd(
    a: Annotated[str, typer.Argument(help="A (the reference): a trace, run folder, database or dataset (a "
                                          "local path, or an s3://, gs://, abfs:// URL of traces).", parser=location,
                                      callback=inputs_given)],
    b: Annotated[str, typer.Argument(help="B (compared with A), of any of the same kinds.", callback=inputs_given,
                                     parser=location)],
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
    fail_if: Annotated[list[str] | None, typer.Option(
        "--fail-if", metavar="RULE",
        help="Exit 3 when B breaks this rule against A (repeatable): METRIC OP CHANGE. METRIC: step_time (mean "
             "step time: the longer of the ProfilerStep's CPU span and the GPU's step period), gpu_time (GPU busy "
             "time per step, in the GPU's step period), kernel:GLOB (time per step of the GPU "
             "operations whose name matches, case-insensitive), region:NAME (wall time per step); OP: > or <; "
             "CHANGE: +5%, -3% (of A) or +2ms, +500us (B - A). A rule that cannot be judged is an error (exit 1).")]
    = None,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write a chart (.html, .png or .svg).",
                                               callback=output_given)] = None,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    run_a: Annotated[str | None, typer.Option(
        "--run-a", help="The run of A to compare, when A holds several (the error lists them).")] = None,
    run_b: Annotated[str | None, typer.Option("--run-b", help="The run of B to compare, when B holds several.")]
    = None,
    merge_runs: MergeRunsOpt = False,
) -> None:
    """Kernel- or region-level differences B - A (time, count, share; new and vanished kernels),
    largest time difference first. Regions are compared per step by default.

    First a headline: step time (mean step time: the longer of the ProfilerStep's CPU span and the
    GPU's step period, the work launched in the step) and GPU time (GPU busy per step),
    A -> B, and the --fail-if rules with their verdicts: before the rows in table and markdown
    (markdown adds the top regressions: a summary for a pull-request comment), as note lines on
    stderr with csv and json. Exit status: 0, 3 when a --fail-if rule is broken, 1 for bad
    input or a rule that cannot be judged, 2 for a usage error.

    \b
    Examples:
      trace-report compare runs/torch-2.0 runs/torch-2.4 --match short -n 20
      trace-report compare a.duckdb b.duckdb --engine ray (each side's traces in Ray tasks)
      trace-report compare main/ pr/ --fail-if 'step_time>+5%' --fail-if 'kernel:*gemm*>+10%' -f markdown
    """
    from trace_report.analyses.compare import CompareOptions, compare
    from trace_report.analyses.compare.gate import parse_rule
    from trace_report.present.tables import OutputOptions

    rules = [parse_rule(text) for text in fail_if or []]
    out = OutputOptions(fmt, limit, output, full_names, raw=raw)
    out.resolve()  # an unknown -o suffix is a usage error before any work
    opts = CompareOptions(by=by.value, rank=rank, per_step=per_step, steps_only=steps_only, match=match.value)
    if engine is EngineName.ray:
        from trace_report.analyses.compare.ray import compare_ray

        with ray_session(ray_address), ray_load([a]) as da, ray_load([b]) as db, ExitStack() as stack:
            _one_run(stack, da, "A", run_a, merge_runs)
            _one_run(stack, db, "B", run_b, merge_runs)
            result, head, verdicts = _judged(da, db, opts, rules, compare_ray)
    else:
        with load([a]) as da, load([b]) as db, ExitStack() as stack:
            _one_run(stack, da, "A", run_a, merge_runs)
            _one_run(stack, db, "B", run_b, merge_runs)
            result, head, verdicts = _judged(da, db, opts, rules, compare)
    for text in head.warnings:
        warn(text)
    _show(result, head, verdicts, out, by.value, (str(a), str(b)))
    if chart is not None:
        from trace_report.present.charts import compare_chart, save_chart

        save_chart(compare_chart(result.frame, limit=limit or 20, a=str(a), b=str(b)), chart)
    broken = [v.rule.text for v in verdicts if v.broken]
    if broken:
        err.print(f"gate failed: {len(broken)} of {len(verdicts)} --fail-if rule(s) broken: {', '.join(broken)}",
                  markup=False)
        raise typer.Exit(GATE_BROKEN)


def _judged(da: TraceDB, db: TraceDB, opts: CompareOptions, rules: list[Rule], analysis: Analysis,
            ) -> tuple[CompareResult, Headline, list[Verdict]]:
    """The comparison at ``opts.by``, the headline and the rules' verdicts; a rule on the other level
    (``kernel:`` with ``--by region``, ``region:`` with ``--by kernel``) runs that comparison too."""
    from trace_report.analyses.compare.gate import evaluate, headline, needs

    result = analysis(da, db, opts)
    head = headline(da, db, opts.rank)
    need = needs(rules)
    other = {lvl: analysis(da, db, replace(opts, by=lvl)) for lvl in ("kernel", "region")
             if lvl in need and lvl != opts.by}
    kernels = result if opts.by == "kernel" else other.get("kernel")
    regions = result if opts.by == "region" else other.get("region")
    return result, head, evaluate(rules, head, kernels, regions)


def _show(result: CompareResult, head: Headline, verdicts: list[Verdict], out: OutputOptions, by: str,
          paths: tuple[str, str]) -> None:
    """The headline first, then the rows: table and markdown on the output, csv and json with the
    headline as note lines on stderr (their output stays machine-readable)."""
    from trace_report.present.format import Format
    from trace_report.present.tables import render, write_text

    fmt = out.resolve()
    where = [f"A = {paths[0]}", f"B = {paths[1]}", *result.notes]
    frame = result.frame if out.limit is None else result.frame.head(out.limit)
    title = f"B - A by {by}"
    if fmt in (Format.csv, Format.json):
        notes([*headline_lines(head, verdicts, warnings=False), *where])
        write_text(out.output, render(frame, fmt, title, full_names=out.full_names, raw=out.raw))
        return
    notes(where)
    if fmt is Format.markdown:
        text = markdown_summary(result, head, verdicts, paths, full_names=out.full_names)
        text += f"\n### {title}\n\n" + render(frame, fmt, full_names=out.full_names, raw=out.raw)
    else:
        text = "\n".join(headline_lines(head, verdicts)) + "\n"  # the table's centred title sets them apart
        if out.output is not None or len(frame):  # no empty box on the terminal (as emit)
            text += render(frame, fmt, title, full_names=out.full_names, raw=out.raw)
    write_text(out.output, text)


def _one_run(stack: ExitStack, db: TraceDB, side: str, label: str | None, merge: bool) -> None:
    """Narrow ``db`` to the run ``label`` for the rest of ``stack``; a side holding several runs needs
    one named (:class:`UsageError` listing them) unless ``merge``."""
    if label is not None:
        stack.enter_context(db.scope(db.run(label).trace_ids))
        return
    runs = db.runs()
    if len(runs) > 1 and not merge:
        shown = ", ".join(r.label for r in runs[:12]) + (", ..." if len(runs) > 12 else "")
        raise UsageError(f"{side} holds {len(runs)} runs ({shown}): choose one with --run-{side.lower()} LABEL, "
                         "or compare them merged with --merge-runs")


def _us(value: float | None, *, signed: bool = False) -> str:
    """µs as a time with 4 significant digits (``77.49 ms``); ``n/a`` for None."""
    from trace_report.present.format import si

    if value is None:
        return "n/a"
    text = si(value * 1e-6, "s", 4)
    return f"+{text}" if signed and value > 0 else text


def _pct(value: float | None) -> str:
    """A change in percent with its sign (``+6.1%``, ``+inf%`` for a time that was 0 in A); ``n/a``
    for None."""
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "+inf%" if value > 0 else "-inf%"
    return f"{value:+.1f}%"


def _moved(a: float | None, b: float | None) -> tuple[str, str]:
    """B - A as a signed time and as percent of A (``n/a`` where a side has no value or A is 0)."""
    if a is None or b is None:
        return "n/a", "n/a"
    return _us(b - a, signed=True), _pct(100.0 * (b - a) / a) if a else "n/a"


def _rule_change(v: Verdict) -> str:
    if v.note is not None:
        return "n/a"
    return _pct(v.change) if v.rule.relative else _us(v.change, signed=True)


def headline_lines(head: Headline, verdicts: list[Verdict], *, warnings: bool = True) -> list[str]:
    """The headline as text lines: step time and GPU time A -> B, the warnings (unless not
    ``warnings``: on stderr they are the ``warning:`` lines already), each rule's verdict, the gate."""
    timed = head.a.step_us is not None and head.b.step_us is not None
    lines = [_line("step time", head.a.step_us, head.b.step_us, "no ProfilerStep",
                   "mean step time, the longer of the ProfilerStep's CPU span and the GPU's step period "
                   f"(steps: A {head.a.steps}, B {head.b.steps})"),
             _line("GPU time", head.a.gpu_us, head.b.gpu_us, "no GPU operations", "GPU busy per step" + (
                 "" if timed else " (a trace without ProfilerStep counts as one step: its GPU span)"))]
    lines += [f"warning: {text}" for text in head.warnings] if warnings else []
    for v in verdicts:
        if v.note is not None:
            lines.append(f"rule {v.rule.text}: not judged ({v.note})")
            continue
        matched = f", {v.matched} GPU operation(s) matched" if v.rule.metric == "kernel" else ""
        lines.append(f"rule {v.rule.text}: {'BROKEN' if v.broken else 'pass'}, {_rule_change(v)} "
                     f"(A {_us(v.a_us)} -> B {_us(v.b_us)} per step{matched})")
    if verdicts:
        lines.append(_gate_line(verdicts))
    return lines


def _line(label: str, a: float | None, b: float | None, missing: str, what: str) -> str:
    """``label: A x -> B y (B - A, change), what``; a side without the number says ``missing``."""
    if a is None and b is None:
        return f"{label}: n/a ({missing} in A or B)"
    if a is None or b is None:
        return f"{label}: A {_us(a) if a is not None else f'n/a ({missing})'} -> B " \
               f"{_us(b) if b is not None else f'n/a ({missing})'}, {what}"
    return f"{label}: A {_us(a)} -> B {_us(b)} ({', '.join(_moved(a, b))}), {what}"


def _gate_line(verdicts: list[Verdict]) -> str:
    broken = sum(v.broken for v in verdicts)
    unjudged = sum(v.note is not None for v in verdicts)
    aside = f", {unjudged} not judged" if unjudged else ""
    return (f"gate: FAILED, {broken} of {len(verdicts)} rule(s) broken{aside} (exit {GATE_BROKEN})" if broken
            else f"gate: passed, {len(verdicts) - unjudged} rule(s) kept{aside}")


def _code(text: str) -> str:
    """``text`` as a Markdown code span (a table cell), or escaped text when it holds a backtick."""
    from trace_report.present.tables import markdown_cell

    if "`" in text or "\n" in text:
        return markdown_cell(text)
    return "`" + text.replace("|", "\\|") + "`"  # GFM: a pipe in a table cell is escaped even in code


def markdown_summary(result: CompareResult, head: Headline, verdicts: list[Verdict], paths: tuple[str, str], *,
                     full_names: bool = False, top: int = 5) -> str:
    """The Markdown headline for a pull-request comment: step time and GPU time A -> B, the rules
    and their verdicts, the ``top`` regressions (rows whose time grew most)."""
    from trace_report.analyses.compare import regressions
    from trace_report.present.format import Format
    from trace_report.present.tables import markdown_cell, render

    lines = ["## trace-report compare: B against A", "", f"A: {_code(paths[0])}  ", f"B: {_code(paths[1])}", "",
             "| per step | A | B | B - A | change |", "|---|---:|---:|---:|---:|"]
    for label, a, b in (("step time (the longer of CPU span and GPU period)", head.a.step_us, head.b.step_us),
                        ("GPU time (GPU busy)", head.a.gpu_us, head.b.gpu_us)):
        lines.append(f"| {label} | {_us(a)} | {_us(b)} | {' | '.join(_moved(a, b))} |")
    lines.append(f"| ProfilerSteps | {head.a.steps} | {head.b.steps} | | |")
    for text in head.warnings:  # a blank line apart: each its own quote
        lines += ["", f"> **warning:** {markdown_cell(text)}"]
    if verdicts:
        lines += ["", f"**{_gate_line(verdicts)}**", "", "| rule | A | B | change | verdict |",
                  "|---|---:|---:|---:|---|"]
        lines += [f"| {_code(v.rule.text)} | {_us(v.a_us)} | {_us(v.b_us)} | {_rule_change(v)} | "
                  f"{'**broken**' if v.broken else 'not judged' if v.note else 'pass'} |" for v in verdicts]
    grown = regressions(result, top)
    if len(grown):
        lines += ["", "**Top regressions** (µs per step)", "",
                  render(grown, Format.markdown, full_names=full_names).rstrip("\n")]
    return "\n".join(lines) + "\n"
