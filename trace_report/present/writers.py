"""The output of commands that print more than one table, or a rendering of their own: the
``write`` hooks their declarations name (:class:`trace_report.declare.Command`). Each takes the
per-run results (:class:`~trace_report.store.per_run.PerRun`), the command's options and the
output options, writes the output, and returns lines for stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trace_report.present.findings import render_markdown, render_text, text_width
from trace_report.present.format import Format
from trace_report.present.tables import OutputOptions, emit, render, text_lists, write_text
from trace_report.store.per_run import PerRun, stacked

if TYPE_CHECKING:
    from trace_report.analyses.advise import AdviseOptions
    from trace_report.analyses.flags import FlagsOptions


def flags_output(per: PerRun[Any], options: FlagsOptions, out: OutputOptions) -> list[str]:
    """``flags``: the rule table (``explain``: the first run's), the per-class summary
    (``summary``), or the flagged names then the summary: as a second table in table and
    Markdown output, as ``summary:`` lines on stderr beside CSV and JSON."""
    fmt = out.resolve()
    if options.explain:
        emit(per.results[0][1].explain, out, title="Kernel class rules")
        return []
    summaries = stacked(per, lambda r: r.summary)
    if options.summary:
        emit(summaries, out, title="Share of GPU time")
        return []
    rows = text_lists(stacked(per, lambda r: r.frame), fmt, ["classes"])
    if fmt in (Format.table, Format.markdown):
        text = render(rows, fmt, "Flagged kernels", full_names=out.full_names, raw=out.raw) + "\n" + \
            render(summaries, fmt, "Share of GPU time", raw=out.raw)
        write_text(out.output, text)
        return []
    emit(rows, out)
    lines = []
    for r in summaries.to_dict(orient="records"):
        who = (f"run {r['run']} " if per.several else "") + (f"rank {r['rank']} " if options.by_rank else "")
        lines.append(f"summary: {who}{r['class']}: {r['count']} ops, {r['total_us']:,.1f} us, "
                     f"{r['pct_of_gpu_time']:.2f}% of GPU time")
    return lines


def findings_output(per: PerRun[Any], options: AdviseOptions, out: OutputOptions) -> list[str]:
    """``advise``: per run the verdict then one block per finding (table: text blocks, Markdown: a
    pull-request comment, :mod:`trace_report.present.findings`), a heading per run when there are
    several; CSV and JSON: every column of the findings, the ranks' lists joined but in JSON."""
    chosen = out.resolve()
    if chosen in (Format.table, Format.markdown):
        render_one = render_text if chosen is Format.table else render_markdown
        width = (text_width(),) if chosen is Format.table else ()
        parts = [(label, render_one(r.frame, r.verdict, *width)) for label, r in per.results]
        heading = "== run {} ==\n" if chosen is Format.table else "## Run `{}`\n\n"
        write_text(out.output, "\n".join(heading.format(label) + text if per.several else text
                                         for label, text in parts))
        return []
    emit(text_lists(stacked(per, lambda r: r.frame), chosen, ["ranks"]), out, title="Findings")
    return []
