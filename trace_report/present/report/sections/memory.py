"""The report's "Memory" section (``[memory]`` events, ``profile_memory=True``):
:func:`~trace_report.analyses.memory.memory_peaks` per device and step and the timeline chart
(:func:`~trace_report.present.charts.memory.memory_chart`), as ``trace-report memory``.

Every number is the command's own (same analysis, same rows); long tables are cut with a line
naming the command that lists the rest (the sections ``stragglers`` and ``ops`` beside this
one do the same).
"""

from __future__ import annotations

import html

import pandas as pd

from trace_report.analyses.memory import MemoryOptions, memory_peaks, memory_timeline
from trace_report.errors import TraceReportError
from trace_report.present.charts.memory import memory_chart
from trace_report.present.report.context import ReportContext, trace_runs
from trace_report.present.report.parts import Section, table_html
from trace_report.store.kept_views import materialized
from trace_report.store.tracedb import TraceDB

MEMORY_ROWS = 24
GIB = float(1 << 30)


def _more(shown: int, total: int, command: str) -> str:
    return f"<p>{total - shown} more rows: <code>{html.escape(command)}</code>.</p>" if total > shown else ""


def _bytes(value: float) -> str:
    """Bytes as GiB from 1 GiB up, MiB from 1 MiB up, else bytes (binary units, as
    ``torch.cuda.memory_summary``)."""
    if abs(value) >= GIB:
        return f"{value / GIB:,.2f} GiB"
    return f"{value / (1 << 20):,.1f} MiB" if abs(value) >= 1 << 20 else f"{value:,.0f} bytes"


def _peak_lead(peaks: pd.DataFrame) -> str:
    """One line per device (of each run or trace): its highest allocated bytes, the reserved bytes
    of that step and the step."""
    lines = []
    keys = [c for c in ("run", "trace_id") if c in peaks.columns][:1] + ["rank", "device"]
    for key, g in peaks.groupby(keys, sort=True):
        *first, rank, device = key
        if g["peak_allocated_bytes"].isna().all():
            continue
        top = g.loc[g["peak_allocated_bytes"].astype("float64").idxmax()]
        where = f"step {int(top['step'])}" if pd.notna(top["step"]) else "outside the steps"
        reserved = ("" if pd.isna(top["peak_reserved_bytes"])
                    else f", reserved {_bytes(float(top['peak_reserved_bytes']))}")
        who = f"rank {rank} {device}" if peaks["rank"].nunique() > 1 else str(device)
        if first:
            who = (f"{first[0]} · " if "run" in peaks.columns else f"trace {first[0]} · ") + who
        lines.append(f"{who}: peak allocated {_bytes(float(top['peak_allocated_bytes']))}{reserved} "
                     f"({where})")
    return "".join(f"<p>{html.escape(line)}</p>" for line in lines)


def _by_run(db: TraceDB, frame: pd.DataFrame, runs: dict[str, tuple[int, ...]]) -> pd.DataFrame:
    """``frame`` with a ``run`` column first in place of ``trace_id`` when there are several runs
    (a trace outside every run keeps its ``trace <id>``); else ``frame``."""
    if len(runs) < 2 or frame.empty:
        return frame
    if "trace_id" in frame.columns:
        ids = frame["trace_id"]
    else:  # one trace per rank: the analysis left trace_id out
        ids = frame["rank"].map(dict(db.con.execute("SELECT rank, min(trace_id) FROM traces GROUP BY 1").fetchall()))
    of = {t: key for key, trace_ids in runs.items() for t in trace_ids}
    out = frame.drop(columns=[c for c in ("trace_id",) if c in frame.columns])
    out.insert(0, "run", [of.get(int(t), f"trace {int(t)}") for t in ids])
    return out


def memory_section(db: TraceDB, rank: int | None, runs: dict[str, tuple[int, ...]]) -> Section | None:
    """Peak allocated/reserved bytes per device and step (``trace-report memory``) and the
    allocated/reserved timeline chart, per run when ``runs`` (``{run_key: trace ids}``) has
    several; None without ``[memory]`` events."""
    try:
        # the [memory] events' args are parsed once for the peaks, the timeline and their notes
        # (five reads otherwise, each a JSON parse of every memory event); inside the report, which
        # keeps memory_events for its length (REPORT_VIEWS), this keeps nothing more
        with materialized(db.con, ("memory_events",)):
            peaks = memory_peaks(db, MemoryOptions(rank=rank))
            if peaks.frame.empty:
                return None
            timeline = memory_timeline(db, MemoryOptions(rank=rank))
    except TraceReportError:
        return None
    frame = _by_run(db, peaks.frame, runs)
    shown = frame.head(MEMORY_ROWS)
    sec = Section("Memory", _peak_lead(frame) + "<h3>Peak per device and step (bytes)</h3>"
                  + table_html(shown, name_columns=()) + _more(len(shown), len(frame), "trace-report memory"),
                  notes=list(peaks.notes))
    if len(runs) > 1:
        sec.notes.append("one row per run and device: runs are never added up")
    if len(timeline.frame):
        sec.charts.append(("memory", memory_chart(_by_run(db, timeline.frame, runs))))
        sec.notes.append("the chart keeps each time bucket's maximum when a device has more than 1,000 events")
    return sec


def build(ctx: ReportContext) -> Section | None:
    """:func:`memory_section` of the report's rank(s), per capture run when there are several."""
    return memory_section(ctx.db, ctx.opts.rank, trace_runs(ctx.con))
