"""``trace-report report``: one self-contained HTML page for runs or traces.

The page holds the run configuration (``runs`` table of :mod:`trace_report.store.runs`), the
headline numbers, every chart that applies (top kernels, regions per step, kernel classes, the
timeline of one step, the roofline estimate, and the experiments' own charts: worker sweep,
optimizers per epoch, speed-ups, AMP sweep, eager against compile), and where their data is
present the step time per rank, communication (:mod:`~trace_report.present.report_comm`),
operators and memory (:mod:`~trace_report.present.report_sections`), then the kernel-class flags
and the advice with its evidence. The JavaScript is inlined (no network needed to view it) and
every name is escaped (:mod:`trace_report.present.charts.html`).
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import shlex
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from trace_report.analyses.advise import AdviceResult, advise
from trace_report.analyses.kernel_classes import FlagsOptions, flags_summary
from trace_report.analyses.regions import BreakdownOptions, breakdown
from trace_report.analyses.roofline.measured import RooflineOptions, roofline
from trace_report.analyses.top_kernels import TopKernelsOptions, top_kernels
from trace_report.analyses.utilization import gpu_utilization, step_overlap_note
from trace_report.errors import InputError, TraceReportError
from trace_report.present import charts
from trace_report.present.charts import html as chart_html
from trace_report.present.charts.traces import short_name
from trace_report.present.report_comm import comm_section
from trace_report.present.report_more import deeper_section
from trace_report.present.report_parts import Section, attempt, table_html
from trace_report.present.report_sections import memory_section, ops_section, stragglers_section
from trace_report.present.tables import write_atomic
from trace_report.store.block_memo import remembering
from trace_report.store.kept_views import REPORT_VIEWS, materialized
from trace_report.store.tracedb import TraceDB

CONFIG_COLUMNS = ["run_key", "experiment", "variant", "model", "batch_size", "epochs", "steps", "optimizer", "lr",
                  "workers", "amp", "compile", "device", "device_name", "torch_version", "final_loss",
                  "test_accuracy"]
EXPERIMENT_CHARTS = {"workers": "worker_sweep_chart", "amp": "amp_sweep_chart", "compile": "compile_chart",
                     "devices": "speedup_chart", "optimized": "speedup_chart", "no-bn": "speedup_chart"}


@dataclass(frozen=True)
class ReportOptions:
    """``title`` of the page; ``limit``: rows of the top-kernels chart and table; ``step``: the
    ProfilerStep of the timeline (default: the median one); ``rank``: analyses of that rank only."""

    title: str | None = None
    limit: int = 20
    step: int | None = None
    rank: int | None = None
    merge_runs: bool = False
    sources: tuple[str, ...] = ()
    """The paths the report was made from (set by :func:`build_report`): the timeline's slice command."""


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


def _headline_html(items: list[tuple[str, str]]) -> str:
    cells = "".join(f"<div><b>{html.escape(v)}</b>{html.escape(k)}</div>" for k, v in items)
    return f'<div class="headline">{cells}</div>'


def _dur(us: float | None) -> str:
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "n/a"
    return f"{us:,.1f} µs" if abs(us) < 1000 else (f"{us / 1e3:,.2f} ms" if abs(us) < 1e6 else f"{us / 1e6:,.2f} s")


# ---------------------------------------------------------------- sections


def _scalar(con: duckdb.DuckDBPyConnection, query: str) -> Any:
    rows = con.execute(query).fetchall()
    return rows[0][0] if rows else None


def config_section(con: duckdb.DuckDBPyConnection) -> Section | None:
    """The runs' configuration and results, one row per run folder."""
    try:
        runs = con.execute("SELECT * EXCLUDE (manifest, config) FROM runs ORDER BY run_key").df()
    except duckdb.CatalogException:
        return None
    if runs.empty:
        return None
    cols = [c for c in CONFIG_COLUMNS if c in runs.columns and runs[c].notna().any()]
    sec = Section("Run configuration", table_html(runs[cols]))
    sec.notes.append("full configuration and environment of each run: SELECT config, manifest FROM runs")
    return sec


def _trace_facts(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.execute("SELECT trace_id, path, run_id, rank, world_size, device_name, compute_capability, "
                       "torch_version, n_complete_events AS events, n_kernels AS kernels FROM traces "
                       "ORDER BY trace_id").df()


def headline_section(db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
                     advice: AdviceResult | TraceReportError | None = None) -> Section | None:
    """Headline numbers: advise's verdict (the biggest finding), traces, ranks, steps, step time, GPU
    time, utilisation, top GPU operation."""
    traces = _trace_facts(con)
    if traces.empty:
        return None
    steps = con.execute("SELECT rank, count(*) AS n, median(dur_us) AS median_us FROM steps JOIN traces USING "
                        "(trace_id) WHERE $rank IS NULL OR rank = $rank GROUP BY rank ORDER BY rank",
                        {"rank": opts.rank}).df()
    gpu = gpu_time(con, opts.rank)
    util = gpu_utilization(db, opts.rank)
    devices = ", ".join(sorted({d for d in traces["device_name"].dropna()})) or "CPU only"
    items = [("traces", f"{len(traces)}"), ("ranks", f"{traces['rank'].nunique()}"), ("GPU", devices),
             ("ProfilerSteps", _per_rank(steps["n"].tolist(), len(steps))),
             ("median step", _median_step(con, opts.rank)),
             ("GPU kernels", f"{int(traces['kernels'].sum()):,}"),
             ("GPU kernel time", _dur(gpu) if gpu else "n/a"),
             *_utilization_items(util)]
    top = top_kernels(db, TopKernelsOptions(limit=1, rank=opts.rank))
    if len(top.frame):
        row = top.frame.iloc[0]
        what = {"cpu_op": "top CPU operator (self time)", "kernel": "top kernel"}.get(
            row["kind"], f"top GPU operation ({row['kind']})")  # memcpy/memset rank with the kernels
        pct = row.get("pct_of_gpu_time", row.get("pct_of_cpu_self_time"))
        where = "CPU self time" if row["kind"] == "cpu_op" else "GPU time"
        items.append((what, f"{pct:.1f}% of {where}: {short_name(row['name'], 60, identity=True)}"))
    if isinstance(advice, AdviceResult) and advice.verdict:
        items.insert(0, ("biggest finding" if len(advice.frame) else "verdict", advice.verdict))
    sec = Section("Headline numbers", _headline_html(items))
    overlap_note = step_overlap_note(db, opts.rank)
    if overlap_note:
        sec.notes.append(overlap_note)
    sec.body += "<h3>Traces</h3>" + table_html(traces, name_columns=("path",))
    return sec


def _median_step(con: duckdb.DuckDBPyConnection, rank: int | None) -> str:
    """The median step time as the GPU sees it (view ``step_time``: the longer of the ProfilerStep's
    CPU span and the GPU's step period), with the CPU span's median and the GPU-bound steps when
    the two differ."""
    row = con.execute("SELECT median(step_us), median(cpu_us), count(*) FILTER (WHERE bound_by = 'gpu'), count(*) "
                      "FROM step_time WHERE $rank IS NULL OR rank = $rank", {"rank": rank}).fetchone()
    step, cpu, gpu_bound, n = row if row else (None, None, 0, 0)
    if not n or step is None:
        return _dur(None)
    if not gpu_bound:
        return _dur(step)
    return f"{_dur(step)} (CPU span {_dur(cpu)}; {gpu_bound} of {n} steps GPU-bound)"


def gpu_time(con: duckdb.DuckDBPyConnection, rank: int | None) -> float:
    """Summed kernel time (µs) of the selection (view ``gpu_time``)."""
    return float(_scalar_p(con, "SELECT coalesce(sum(kernel_us), 0) FROM gpu_time WHERE $rank IS NULL OR rank = $rank",
                           {"rank": rank}) or 0.0)


def _scalar_p(con: duckdb.DuckDBPyConnection, query: str, params: dict) -> Any:
    rows = con.execute(query, params).fetchall()
    return rows[0][0] if rows else None


def _per_rank(counts: list[int], ranks: int) -> str:
    """``3`` on one rank; ``1 per rank (8 ranks)`` or ``2-3 per rank (4 ranks)`` on several: ranks
    are never counted as steps."""
    if not counts:
        return "0"
    if ranks <= 1:
        return f"{counts[0]}"
    lo, hi = min(counts), max(counts)
    return f"{lo if lo == hi else f'{lo}-{hi}'} per rank ({ranks} ranks)"


def _utilization_items(util: pd.DataFrame) -> list[tuple[str, str]]:
    """The GPU utilisation headline (view ``gpu_utilization_by_rank``, the figure ``advise``
    checks): busy / step time, with the range over ranks when there are several."""
    util = util[util["gpu_util_pct"].notna()]
    if util.empty:
        return [("GPU busy (of step time)", "n/a")]
    basis = "step time" if (util["basis"] == "ProfilerStep").all() else "step time or GPU span"
    total = 100.0 * util["busy_us"].sum() / util["wall_us"].sum()
    text = f"{total:.1f}%"
    if len(util) > 1:
        text += f" (ranks {util['gpu_util_pct'].min():.1f}-{util['gpu_util_pct'].max():.1f}%)"
    return [(f"GPU busy (of {basis})", text)]


def trace_charts_section(db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
                         classes: Callable[[], tuple[pd.DataFrame, list[str]]] | None = None) -> Section | None:
    """Top kernels (chart and table), regions per step, kernel classes, step timeline, roofline.
    ``classes``: :func:`flags_by_run` of these options, computed once per report (the Kernel
    classes section shows the same table)."""
    n = _scalar(con, "SELECT count(*) FROM traces")
    if not n:
        return None
    sec = Section("Where the time goes")
    runs = trace_runs(con)
    if len(runs) > 1:
        sec.notes.append(f"{len(runs)} runs: one colour per run in the top-kernels, region and kernel-class "
                         "charts, never summed (the roofline covers every trace; the timeline shows one step of "
                         "one trace)")
    elif n > 1:
        sec.notes.append(f"the top-kernels chart sums the {n} traces' kernel time; regions are per rank and step "
                         "(the timeline shows one step of one trace)")
    _top_kernels(sec, db, opts, runs)
    _regions(sec, db, con, opts, runs)
    summary = classes or (lambda: flags_by_run(db, opts, runs))
    fl = attempt(sec, "kernel classes", lambda: summary()[0])
    if fl is not None and fl["gpu_us"].fillna(0).gt(0).any():
        sec.charts.append(("kernel-classes", charts.kernel_classes_chart(fl)))
    trace_id = None if opts.rank is None else _scalar(
        con, f"SELECT min(trace_id) FROM traces WHERE rank = {int(opts.rank)}")
    tl = attempt(sec, "timeline", lambda: charts.step_timeline(db, trace_id=trace_id, step=opts.step))
    if tl is not None and len(tl.frame):
        sec.charts.append(("timeline", charts.timeline_chart(tl)))
        sec.notes += tl.notes
        sec.notes.append(slice_note(con, tl, opts.sources))
    _roofline(sec, db)
    return sec


def slice_note(con: duckdb.DuckDBPyConnection, tl: charts.Timeline, sources: tuple[str, ...]) -> str:
    """The ``trace-report slice`` command that writes the timeline's step (of its trace's rank) as a
    Chrome trace for Perfetto, with every event of the step (issue 34 item 5)."""
    rank = _scalar(con, f"SELECT rank FROM traces WHERE trace_id = {int(tl.trace_id)}")
    ranks = _scalar(con, "SELECT count(DISTINCT rank) FROM traces")
    what = f"step {tl.step}" if tl.step is not None else "the trace"
    parts = ["trace-report", "slice", *(shlex.quote(s) for s in sources or ("TRACE",))]
    if tl.step is not None:
        parts += ["--steps", str(tl.step)]
    if rank is not None and (ranks or 0) > 1:
        parts += ["--rank", str(rank)]
    out = f"step-{tl.step}.json.gz" if tl.step is not None else "slice.json.gz"
    return (f"every event of {what} in Perfetto (ui.perfetto.dev) or chrome://tracing, with counter tracks of "
            f"the launch queue and memory: {' '.join([*parts, '-o', out])}")


def trace_runs(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, ...]]:
    """``{run_key: trace ids}`` when the traces belong to capture runs (table ``run_traces``),
    else ``{}``."""
    try:  # of the traces in view: one run's alone inside TraceDB.scope
        rows = con.execute("SELECT run_key, list(trace_id ORDER BY trace_id) FROM run_traces "
                           "WHERE trace_id IN (SELECT trace_id FROM traces) GROUP BY 1 ORDER BY 1").fetchall()
    except duckdb.CatalogException:
        return {}
    return {str(k): tuple(int(t) for t in ids) for k, ids in rows}


def _per_run(runs: dict[str, tuple[int, ...]], build: Callable[[tuple[int, ...] | None], pd.DataFrame]) -> pd.DataFrame:
    """``build`` for every run, with a ``run`` column first (or once, for every trace, when there
    are fewer than two runs)."""
    if len(runs) < 2:
        return build(None)
    parts = [build(ids).assign(run=key) for key, ids in runs.items()]
    parts = [p for p in parts if len(p)]
    if not parts:
        return build(None).iloc[:0]
    frame = pd.concat(parts, ignore_index=True)
    return frame[["run", *[c for c in frame.columns if c != "run"]]]


def _top_kernels(sec: Section, db: TraceDB, opts: ReportOptions, runs: dict[str, tuple[int, ...]]) -> None:
    notes: list[str] = []

    def build(ids: tuple[int, ...] | None) -> pd.DataFrame:
        result = top_kernels(db, TopKernelsOptions(limit=opts.limit, rank=opts.rank, trace_ids=ids))
        notes.extend([result.note] if result.note else [])
        return result.frame

    frame = _per_run(runs, build)
    sec.notes += list(dict.fromkeys(notes))
    if len(frame):
        sec.charts.append(("top-kernels", charts.top_kernels_chart(frame, limit=opts.limit)))
        sec.tail += "<h3>Top kernels</h3>" + table_html(frame)


def _regions(sec: Section, db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
             runs: dict[str, tuple[int, ...]]) -> None:
    """Regions per step: per rank when there are several ranks, per run when several runs (a
    step number of one rank or run is never added to another's)."""
    by_rank = opts.rank is None and _scalar(con, "SELECT count(DISTINCT rank) FROM traces") > 1
    notes: list[str] = []

    def build(ids: tuple[int, ...] | None) -> pd.DataFrame:
        result = breakdown(db, BreakdownOptions(by_step=True, rank=opts.rank, by_rank=by_rank, trace_ids=ids))
        notes.extend(result.notes)
        return result.frame

    frame = attempt(sec, "regions", lambda: _per_run(runs, build))
    if frame is not None and len(frame):
        sec.charts.append(("regions", charts.regions_chart(frame)))
        sec.notes += list(dict.fromkeys(notes))


def _roofline(sec: Section, db: TraceDB) -> None:
    result = attempt(sec, "roofline", lambda: roofline(db, RooflineOptions(by_name=True)))
    if result is not None and len(charts.chart_points(result.frame)):
        sec.charts.append(("roofline", charts.roofline_chart(result)))
        sec.notes += [f"roofline: {n}" for n in result.notes]


def flags_by_run(db: TraceDB, opts: ReportOptions,
                  runs: dict[str, tuple[int, ...]]) -> tuple[pd.DataFrame, list[str]]:
    """``flags_summary(db)`` (one per run, with a ``run`` column, when there are several runs: each
    run's share of its own GPU time) and the notes."""
    notes: list[str] = []

    def build(ids: tuple[int, ...] | None) -> pd.DataFrame:
        summary, got = flags_summary(db, FlagsOptions(rank=opts.rank, trace_ids=ids))
        notes.extend(got)
        return summary

    return _per_run(runs, build), list(dict.fromkeys(notes))


def flags_section(db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
                  classes: Callable[[], tuple[pd.DataFrame, list[str]]] | None = None) -> Section | None:
    """Share of GPU time per kernel class (TF32, tensor core, layout conversion...), per run when
    there are several. ``classes``: as :func:`trace_charts_section`'s."""
    try:
        summary, notes = classes() if classes else flags_by_run(db, opts, trace_runs(con))
    except TraceReportError:
        return None
    if not summary["gpu_us"].fillna(0).gt(0).any():
        return None
    return Section("Kernel classes", table_html(summary), notes=notes)


def advice_of(db: TraceDB, opts: ReportOptions) -> AdviceResult | TraceReportError:
    """``advise``'s result, computed once per report (the headline and the Advice section show it),
    or the error that stopped it."""
    try:
        return advise(db, rank=opts.rank)
    except TraceReportError as exc:
        return exc


def advice_section(advice: AdviceResult | TraceReportError) -> Section | None:
    """The verdict, then the findings sorted by estimated saving, with their numbers and thresholds."""
    if isinstance(advice, TraceReportError):
        return Section("Advice", notes=[str(advice)])
    body = f"<p><b>{html.escape(advice.verdict)}</b></p>"
    body += table_html(advice.frame, name_columns=()) if len(advice.frame) else "<p>No findings.</p>"
    return Section("Advice", body, notes=list(advice.notes))


def _experiment_chart(con: duckdb.DuckDBPyConnection, run_key: str, experiment: str) -> Any:
    results = con.execute("SELECT * FROM run_results WHERE run_key = ?", [run_key]).df().dropna(axis=1, how="all")
    if experiment == "optimizers":
        metrics = con.execute(
            "SELECT r.run_key, r.optimizer, m.* EXCLUDE (run_key) FROM run_metrics m JOIN runs r USING (run_key) "
            "WHERE r.kind = 'run' AND starts_with(r.run_key, ? || '/') ORDER BY r.run_key, m.epoch", [run_key]).df()
        if metrics.empty:
            return None
        return charts.optimizer_epochs_chart(metrics.assign(run=run_lines(metrics)), by="run")
    builder = EXPERIMENT_CHARTS.get(experiment)
    if builder is None or results.empty:
        return None
    return getattr(charts, builder)(results)


def run_lines(metrics: pd.DataFrame) -> list[str]:
    """One line label per run: its optimizer, or ``optimizer (run)`` where several runs share an
    optimizer, so that no line joins the epochs of two runs."""
    shared = metrics.groupby("optimizer")["run_key"].nunique()
    return [f"{o} ({str(k).rsplit('/', 1)[-1]})" if shared.get(o, 1) > 1 or pd.isna(o) else str(o)
            for o, k in zip(metrics["optimizer"], metrics["run_key"], strict=True)]


def _json_list(text: str | None) -> list[Any]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return [text]
    return value if isinstance(value, list) else [value]


def experiments_section(con: duckdb.DuckDBPyConnection) -> Section | None:
    """The experiments' own charts and result tables (``results.csv``)."""
    try:
        exps = con.execute("SELECT run_key, experiment, manifest->>'notes' AS notes FROM runs "
                           "WHERE kind = 'experiment' OR run_key IN (SELECT run_key FROM run_results) "
                           "ORDER BY run_key").fetchall()
    except duckdb.CatalogException:
        return None
    sec = Section("Experiments")
    for run_key, experiment, notes in exps:
        chart = attempt(sec, str(run_key), lambda k=run_key, e=experiment: _experiment_chart(con, k, str(e)))
        results = con.execute("SELECT * FROM run_results WHERE run_key = ?", [run_key]).df().drop(columns="run_key")
        if chart is None and results.empty:
            continue
        sec.body += f"<h3>{html.escape(str(run_key))} ({html.escape(str(experiment))})</h3>"
        if chart is not None:
            sec.body += sec.inline_chart(f"experiment-{run_key}", chart)
        for note in _json_list(notes):
            sec.body += f'<p class="note">{chart_html.linkify(str(note))}</p>'
        if len(results):
            table = table_html(results.dropna(axis=1, how="all"), name_columns=("run_dir",))
            sec.body += f"<details><summary>results.csv ({len(results)} rows)</summary>{table}</details>"
    return sec if sec.charts or sec.body else None


# ---------------------------------------------------------------- assembling


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
    con = db.con
    title = opts.title or f"trace-report: {', '.join(Path(s).name for s in sources)[:120]}"
    report = Report(title, sources, specs={} if specs is None else specs)
    runs = db.runs()
    captured = all(r.source == "run.json" for r in runs)  # capture runs: compared side by side (run_traces)
    if len(runs) > 1 and not opts.merge_runs and not captured:
        report.sections += [s for s in (config_section(con), runs_section(db), experiments_section(con)) if s]
        for run in runs:
            with db.scope(run.trace_ids):
                for section in _trace_sections(db, opts, report.specs_ahead):
                    section.title = f"{run.label} · {section.title}"
                    report.sections.append(section)
    else:
        report.sections += [s for s in (config_section(con),) if s]
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
    with materialized(db.con, REPORT_VIEWS), remembering(db.con):
        return _sections_of(db, opts, experiments, done)


def _sections_of(db: TraceDB, opts: ReportOptions, experiments: bool,
                 done: Callable[[Section], Section]) -> list[Section]:
    con = db.con
    advice = advice_of(db, opts)
    classes = cache(lambda: flags_by_run(db, opts, trace_runs(con)))  # charted, then tabled
    builders = [lambda: headline_section(db, con, opts, advice),
                lambda: trace_charts_section(db, con, opts, classes), lambda: stragglers_section(db, opts.rank),
                lambda: comm_section(db, opts.rank, Section, table_html), lambda: ops_section(db, opts.rank),
                lambda: memory_section(db, opts.rank, trace_runs(con)),
                lambda: experiments_section(con) if experiments else None,
                lambda: flags_section(db, con, opts, classes), lambda: deeper_section(db, opts.rank, opts.step),
                lambda: advice_section(advice)]
    return [done(s) for s in (build() for build in builders) if s is not None]


def runs_section(db: TraceDB) -> Section:
    """The runs of the input (:mod:`trace_report.store.run_identity`), one row each."""
    frame = db.con.execute(
        "SELECT r.run, any_value(r.run_source) AS grouped_by, count(*) AS traces, "
        "string_agg(DISTINCT CAST(t.rank AS VARCHAR), ', ') AS ranks, "
        "string_agg(DISTINCT t.device_name, ', ') AS gpu, min(t.trace_id) AS first_trace "
        "FROM trace_runs r JOIN traces t USING (trace_id) GROUP BY r.run ORDER BY first_trace").df()
    sec = Section("Runs", table_html(frame.drop(columns=["first_trace"])))
    sec.notes.append("each run is analysed alone below (trace-report report --merge-runs for one analysis of all)")
    return sec


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
