"""The report's "Where the time goes" section: top kernels (chart and table), regions per
step, kernel classes, the timeline of one step and the roofline estimate."""

from __future__ import annotations

import shlex
from collections.abc import Callable

import duckdb
import pandas as pd

from trace_report.analyses.breakdown import BreakdownOptions, breakdown
from trace_report.analyses.roofline.measured import RooflineOptions, roofline
from trace_report.analyses.top_kernels import TopKernelsOptions, top_kernels
from trace_report.present import charts
from trace_report.present.report.context import ReportContext, ReportOptions, flags_by_run, per_run, scalar, trace_runs
from trace_report.present.report.parts import TOP_ROWS, Section, attempt, table_html
from trace_report.store.tracedb import TraceDB


def trace_charts_section(db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
                         classes: Callable[[], tuple[pd.DataFrame, list[str]]] | None = None) -> Section | None:
    """Top kernels (chart and table), regions per step, kernel classes, step timeline, roofline.
    ``classes``: :func:`flags_by_run` of these options, computed once per report (the Kernel
    classes section shows the same table)."""
    n = scalar(con, "SELECT count(*) FROM traces")
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
    trace_id = None if opts.rank is None else scalar(
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
    Chrome trace for Perfetto, with every event of the step."""
    rank = scalar(con, f"SELECT rank FROM traces WHERE trace_id = {int(tl.trace_id)}")
    ranks = scalar(con, "SELECT count(DISTINCT rank) FROM traces")
    what = f"step {tl.step}" if tl.step is not None else "the trace"
    parts = ["trace-report", "slice", *(shlex.quote(s) for s in sources or ("TRACE",))]
    if tl.step is not None:
        parts += ["--steps", str(tl.step)]
    if rank is not None and (ranks or 0) > 1:
        parts += ["--rank", str(rank)]
    out = f"step-{tl.step}.json.gz" if tl.step is not None else "slice.json.gz"
    return (f"every event of {what} in Perfetto (ui.perfetto.dev) or chrome://tracing, with counter tracks of "
            f"the launch queue and memory: {' '.join([*parts, '-o', out])}")


def _top_kernels(sec: Section, db: TraceDB, opts: ReportOptions, runs: dict[str, tuple[int, ...]]) -> None:
    notes: list[str] = []

    def build(ids: tuple[int, ...] | None) -> pd.DataFrame:
        result = top_kernels(db, TopKernelsOptions(limit=opts.limit, rank=opts.rank, trace_ids=ids))
        notes.extend([result.note] if result.note else [])
        return result.frame

    frame = per_run(runs, build)
    sec.notes += list(dict.fromkeys(notes))
    if len(frame):
        sec.charts.append(("top-kernels", charts.top_kernels_chart(frame, limit=opts.limit)))
        sec.tail += "<h3>Top kernels</h3>" + table_html(frame, top=TOP_ROWS)


UNNAMED_REGIONS = {"other", "before_first_step"}
"""Regions of a trace without forward/backward/optimizer/data-loading ranges: a chart of them alone
is one grey bar."""


def named_regions(frame: pd.DataFrame) -> set[str]:
    """The regions of a ``breakdown(by_step=True)`` frame with wall or GPU time, other than
    :data:`UNNAMED_REGIONS` (breakdown lists every region of a step, with zeros)."""
    timed = frame[frame["wall_us"].fillna(0).gt(0) | frame["gpu_us"].fillna(0).gt(0)]
    return set(timed["region"]) - UNNAMED_REGIONS


def _regions(sec: Section, db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
             runs: dict[str, tuple[int, ...]]) -> None:
    """Regions per step: per rank when there are several ranks, per run when several runs (a
    step number of one rank or run is never added to another's)."""
    by_rank = opts.rank is None and scalar(con, "SELECT count(DISTINCT rank) FROM traces") > 1
    notes: list[str] = []

    def build(ids: tuple[int, ...] | None) -> pd.DataFrame:
        result = breakdown(db, BreakdownOptions(by_step=True, rank=opts.rank, by_rank=by_rank, trace_ids=ids))
        notes.extend(result.notes)
        return result.frame

    frame = attempt(sec, "regions", lambda: per_run(runs, build))
    if frame is not None and len(frame) and not named_regions(frame):
        sec.notes.append("regions: no forward, backward, optimizer or data-loading region in the trace "
                         "(no record_function ranges that name them): no region chart")
        return
    if frame is not None and len(frame):
        sec.charts.append(("regions", charts.regions_chart(frame)))
        sec.notes += list(dict.fromkeys(notes))


def _roofline(sec: Section, db: TraceDB) -> None:
    result = attempt(sec, "roofline", lambda: roofline(db, RooflineOptions(by_name=True)))
    if result is not None and len(charts.chart_points(result.frame)):
        sec.charts.append(("roofline", charts.roofline_chart(result)))
        sec.notes += [f"roofline: {n}" for n in result.notes]


def build(ctx: ReportContext) -> Section | None:
    """:func:`trace_charts_section` of the report's traces (kernel classes computed once per report)."""
    return trace_charts_section(ctx.db, ctx.con, ctx.opts, ctx.classes)
