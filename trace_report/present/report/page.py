"""``trace-report report``: one self-contained HTML page for runs or traces.

The page holds the run configuration (``runs`` table of :mod:`trace_report.store.runs`), the
headline numbers, every chart that applies (top kernels, regions per step, kernel classes, the
timeline of one step, the roofline estimate, and the experiments' own charts: worker sweep,
optimizers per epoch, speed-ups, AMP sweep, eager against compile), and where their data is
present the step time per rank, communication, operators and memory, then the kernel-class flags
and the advice with its evidence: one module per section in ``sections/``, each with
``build(ctx) -> Section | None`` (:class:`~trace_report.present.report.context.ReportContext`),
listed in :data:`SECTIONS`. The JavaScript is inlined (no network needed to view it) and
every name is escaped (:mod:`trace_report.present.charts.html`).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

from trace_report.errors import InputError
from trace_report.present.charts import html as chart_html
from trace_report.present.report.context import ReportContext, ReportOptions, flags_by_run, trace_runs
from trace_report.present.report.parts import Section
from trace_report.present.report.sections import (
    advice,
    comm,
    config,
    deeper,
    experiments,
    flags,
    headline,
    memory,
    ops,
    stragglers,
    trace_charts,
)
from trace_report.present.report.sections import (
    runs as run_list,
)
from trace_report.present.tables import write_atomic
from trace_report.store.kept_views import REPORT_VIEWS, materialized
from trace_report.store.tracedb import TraceDB

SECTIONS = (headline, trace_charts, stragglers, comm, ops, memory, experiments, flags, deeper, advice)
"""The sections of a set of traces, in page order: each module's ``build(ctx) -> Section | None``
(None: the section does not apply)."""


@dataclass
class Report:
    """The page's content before rendering."""

    title: str
    sources: list[str]
    sections: list[Section] = field(default_factory=list)
    specs: dict[int, Future[Any]] = field(default_factory=dict, repr=False, compare=False)
    """Vega-Lite specs of the sections' charts, started as each section is done
    (:func:`~trace_report.present.charts.html.spec_ahead`), by ``id`` of the chart."""

    @property
    def charts(self) -> list[Any]:
        return [c for s in self.sections for _, c in s.charts]

    def specs_ahead(self, section: Section) -> Section:
        """Start the specs of ``section``'s charts (not those already placed in its body)."""
        for name, chart in section.charts:
            if name not in section.inline and id(chart) not in self.specs:
                self.specs[id(chart)] = chart_html.spec_ahead(chart)
        return section


# ---------------------------------------------------------------- HTML pieces


def build_report(db: TraceDB, sources: list[str], options: ReportOptions | None = None, *,
                 specs: dict[int, Future[Any]] | None = None) -> Report:
    """Every section that applies to ``db`` (a TraceDB opened with
    :func:`~trace_report.store.runs.open_runs`, so that the run tables exist).

    Several runs (:meth:`TraceDB.runs`) and not ``merge_runs``: the capture configuration, a
    list of the runs, then the sections of each run alone, titled ``<run> · <section>``. Capture
    runs alone (run.json) keep one set of sections where every chart and table has a run colour
    or column (``run_traces``): an experiment's runs compared side by side, never summed.

    ``specs``: the dict that keeps the charts' specs started ahead (:attr:`Report.specs`), for a
    caller that cancels those not started when the report fails."""
    opts = dataclasses.replace(options or ReportOptions(), sources=tuple(str(s) for s in sources))
    title = opts.title or f"trace-report: {', '.join(Path(s).name for s in sources)[:120]}"
    report = Report(title, sources, specs={} if specs is None else specs)
    runs = db.runs()
    captured = all(r.source == "run.json" for r in runs)  # capture runs: compared side by side (run_traces)
    if len(runs) > 1 and not opts.merge_runs and not captured:
        page = ReportContext(db, opts, experiments=True)
        report.sections += [s for s in (config.build(page), run_list.build(page), experiments.build(page)) if s]
        for run in runs:
            with db.scope(run.trace_ids):
                for section in _trace_sections(db, opts, report.specs_ahead):
                    section.title = f"{run.label} · {section.title}"
                    report.sections.append(section)
    else:
        report.sections += [s for s in (config.build(ReportContext(db, opts)),) if s]
        report.sections += _trace_sections(db, opts, report.specs_ahead, experiments=True)
        if opts.merge_runs and len(runs) > 1 and report.sections:
            report.sections[0].notes.append(f"--merge-runs: {len(runs)} runs analysed as one: "
                                            f"{', '.join(r.label for r in runs)}")
    if not report.sections:
        raise InputError("nothing to report: no traces and no runs")
    return report


def _trace_sections(db: TraceDB, opts: ReportOptions, done: Callable[[Section], Section], *,
                    experiments: bool = False) -> list[Section]:
    """The sections computed from the traces in view (all, or one run's inside a scope), each
    given to ``done`` as it is complete."""
    # the views read by the headline, advise, the timeline, memory...; per-trace rows asked for twice
    with materialized(db.con, REPORT_VIEWS):
        return _sections_of(db, opts, experiments, done)


def _sections_of(db: TraceDB, opts: ReportOptions, experiments: bool,
                 done: Callable[[Section], Section]) -> list[Section]:
    ctx = ReportContext(db, opts, experiments=experiments, advice=advice.advice_of(db, opts))
    ctx.classes = cache(lambda: flags_by_run(db, opts, trace_runs(db.con)))  # charted, then tabled
    return [done(s) for s in (section.build(ctx) for section in SECTIONS) if s is not None]


def _section_html(sec: Section, index: int, specs: dict[int, Future[Any]]) -> str:
    parts = [f"<section><h2>{html.escape(sec.title)}</h2>", sec.body]
    for k, (name, chart) in enumerate(sec.charts):
        if name not in sec.inline:
            ahead = specs.get(id(chart))
            spec = chart if ahead is None or ahead.cancelled() else ahead.result()
            parts.append(chart_html.chart_block(f"chart-{index}-{k}-{name}", spec))
    if sec.notes:
        items = "".join(f"<li>{chart_html.linkify(n)}</li>" for n in sec.notes)
        parts.append(f'<ul class="note">{items}</ul>')
    parts += [sec.tail, "</section>"]
    return "\n".join(parts)


def render_html(report: Report) -> str:
    """The report as one self-contained HTML document."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sources = ", ".join(html.escape(s) for s in report.sources)
    head = (f"<h1>{html.escape(report.title)}</h1><p class=\"note\">{sources}<br>generated {stamp} by "
            "trace-report; charts: Vega-Lite (inlined, works offline)</p>")
    body = head + "\n".join(_section_html(s, i, report.specs) for i, s in enumerate(report.sections))
    return chart_html.page(report.title, body)


def check_output(output: Path) -> None:
    """Raise :class:`InputError` unless ``output`` names an HTML file in an existing folder."""
    if output.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"{output}: the report is an HTML page: give a file ending in .html")
    if not output.absolute().parent.is_dir():
        raise InputError(f"{output.parent}: no such directory")


def write_report(db: TraceDB, sources: list[str], output: Path, options: ReportOptions | None = None) -> Report:
    """Build the report of ``db`` and write it to ``output`` (atomically)."""
    check_output(output)
    db.check_rank(options.rank if options else None)
    specs: dict[int, Future[Any]] = {}
    try:
        report = build_report(db, sources, options, specs=specs)
        write_atomic(output, render_html(report))
    finally:
        for future in specs.values():  # none left after a rendered page; the rest of a failed one
            future.cancel()
    return report
