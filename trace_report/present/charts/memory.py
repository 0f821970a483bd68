"""Chart of a memory timeline (:func:`trace_report.analyses.memory.memory_timeline`): allocated
and reserved bytes (GiB) per device against ms since the trace began, a step line per series."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from trace_report.analyses.memory import memory_timeline
from trace_report.present.charts.loading import altair

if TYPE_CHECKING:
    import altair as alt

    from trace_report.analyses.memory import MemoryOptions
    from trace_report.store.tracedb import TraceDB

GIB = float(1 << 30)
BUCKETS = 1000  # per lane: above this many events, each of 1000 time buckets keeps its maximum


def _envelope(data: pd.DataFrame) -> pd.DataFrame:
    """At most :data:`BUCKETS` points per lane: the maximum of each time bucket (peaks survive)."""
    if data.groupby("lane").size().max() <= BUCKETS:
        return data
    t = data["time_ms"].astype(float)
    span = (t.max() - t.min()) or 1.0
    data = data.assign(bucket=((t - t.min()) / span * (BUCKETS - 1)).round().astype(int))
    return data.groupby(["lane", "bucket"], as_index=False).agg(
        time_ms=("time_ms", "first"), allocated_bytes=("allocated_bytes", "max"),
        reserved_bytes=("reserved_bytes", "max"))


def memory_chart(timeline: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Lines of ``allocated_bytes`` and ``reserved_bytes`` (as GiB) over ``time_ms``, one colour per
    series and one row per device (and rank; and run with a ``run`` column, else trace with a
    ``trace_id`` column: runs and traces are never drawn on one line). ``timeline`` is not modified."""
    alt = altair()

    cols = [c for c in ("run", "trace_id", "rank", "device", "time_ms", "allocated_bytes", "reserved_bytes")
            if c in timeline]
    data = timeline[cols].copy()
    if "run" in data:
        data["lane"] = data["run"].astype(str) + " · "
    elif "trace_id" in data:  # several traces of one rank: one line each
        data["lane"] = "trace " + data["trace_id"].astype(str) + " · "
    else:
        data["lane"] = ""
    data["lane"] += (("rank " + data["rank"].astype(str) + " ") if "rank" in data else "") + data["device"]
    data = _envelope(data)
    long = data.melt(id_vars=["lane", "time_ms"], value_vars=["allocated_bytes", "reserved_bytes"],
                     var_name="series", value_name="bytes").dropna(subset=["bytes"])
    long["GiB"] = long["bytes"].astype(float) / GIB
    long["series"] = long["series"].str.replace("_bytes", "", regex=False)
    return alt.Chart(long, title=title or "Memory per device").mark_line(interpolate="step-after").encode(
        x=alt.X("time_ms:Q", title="time since trace start (ms)"),
        y=alt.Y("GiB:Q", title="GiB"),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="top")),
        row=alt.Row("lane:N", title=None),
        tooltip=[alt.Tooltip("lane:N"), alt.Tooltip("series:N"), alt.Tooltip("time_ms:Q", format=",.3f"),
                 alt.Tooltip("GiB:Q", format=",.3f")],
    ).properties(width=620, height=160 if data["lane"].nunique() <= 2 else 100)


def timeline_chart(db: TraceDB, options: MemoryOptions) -> alt.Chart | None:
    """The chart of ``memory --chart``: :func:`memory_chart` of the memory timeline of ``db``
    (:func:`~trace_report.analyses.memory.memory_timeline`), None without ``[memory]`` events."""
    frame = memory_timeline(db, options).frame
    return None if frame.empty else memory_chart(frame)
