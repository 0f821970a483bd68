"""``trace-report compare A B``'s own body (:func:`main`): the command, its options and its notebook
method are made from the declaration in :mod:`trace_report.analyses.compare`; the comparison, the
headline and the ``--fail-if`` verdicts are computed there (:func:`~trace_report.analyses.compare.gate.judged`).
Here: the headline first, the rows, the Markdown summary, exit 3 when a rule is broken."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import typer

from trace_report.cli.options import err, notes, warn

if TYPE_CHECKING:
    from trace_report.analyses.compare import CompareOptions
    from trace_report.analyses.compare.compute import CompareResult
    from trace_report.analyses.compare.gate import Headline, Judged, Verdict
    from trace_report.present.format import OutputOptions

GATE_BROKEN = 3
"""The exit status of ``compare`` when a ``--fail-if`` rule is broken (1: bad input, 2: usage)."""


def main(judged: Judged, options: CompareOptions, given: dict[str, Any]) -> None:
    """The command line's body of ``compare`` (:attr:`trace_report.declare.Command.main` of a
    :class:`~trace_report.declare.Pair`): the headline's warnings, the headline and the rows
    (:func:`_show`), the chart, then exit :data:`GATE_BROKEN` with a line naming the broken rules."""
    from trace_report.present.tables import OutputOptions

    paths = (str(given["a"]), str(given["b"]))
    out = OutputOptions(given["fmt"], given["limit"], given["output"], given["full_names"], raw=given["raw"])
    for text in judged.warnings:
        warn(text)
    _show(judged.result, judged.headline, judged.verdicts, out, options.by, paths)
    if given["chart"] is not None:
        from trace_report.present.charts import compare_chart, save_chart

        save_chart(compare_chart(judged.frame, limit=given["limit"] or 20, a=paths[0], b=paths[1]), given["chart"])
    broken = [v.rule.text for v in judged.broken]
    if broken:
        err.print(f"gate failed: {len(broken)} of {len(judged.verdicts)} --fail-if rule(s) broken: "
                  f"{', '.join(broken)}", markup=False)
        raise typer.Exit(GATE_BROKEN)


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
    from trace_report.analyses.compare.compute import regressions
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
