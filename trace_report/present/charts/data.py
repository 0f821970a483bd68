"""Frames the trace charts need beyond the analyses' own results: the timeline of one step.

Times are microseconds relative to the start of the chosen step (``ProfilerStep#N``), on the
trace's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from trace_report.analyses.breakdown import kernel_regions
from trace_report.analyses.common.intervals import Partition
from trace_report.errors import InputError
from trace_report.store.tracedb import TraceDB

TIMELINE_COLUMNS = ["lane", "kind", "name", "region", "start_us", "end_us", "dur_us"]
REGION_LANE = "CPU: regions"
MAX_ITEMS = 4000


@dataclass
class Timeline:
    """One step of one trace: ``frame`` (:data:`TIMELINE_COLUMNS`), which trace and step, notes."""

    frame: pd.DataFrame
    trace_id: int
    step: int | None
    step_us: float
    notes: list[str] = field(default_factory=list)



def _pick_trace(con: duckdb.DuckDBPyConnection, trace_id: int | None) -> int:
    if trace_id is not None:
        if not con.execute("SELECT 1 FROM traces WHERE trace_id = ?", [trace_id]).fetchall():
            raise InputError(f"no trace with trace_id {trace_id}")
        return trace_id
    row = con.execute("SELECT trace_id FROM traces ORDER BY n_kernels > 0 DESC, rank, trace_id LIMIT 1").fetchall()
    if not row:
        raise InputError("no traces in the database")
    return int(row[0][0])


def _pick_window(con: duckdb.DuckDBPyConnection, trace_id: int, step: int | None) -> pd.Series:
    """The step window asked for, else the step of median duration (the whole trace without steps)."""
    w = con.execute("SELECT * FROM step_windows WHERE trace_id = ? ORDER BY ts_us", [trace_id]).df()
    if w.empty:
        raise InputError(f"trace {trace_id} has no events")
    if step is not None:
        sel = w[w["step"] == step]
        if sel.empty:
            raise InputError(f"trace {trace_id} has no ProfilerStep#{step}")
        return sel.iloc[0]
    w = w.assign(dur=w["end_us"] - w["ts_us"]).sort_values(["dur", "ts_us"], kind="stable")
    return w.iloc[(len(w) - 1) // 2]


def _region_partition(con: duckdb.DuckDBPyConnection, w: pd.Series) -> tuple[Partition, np.ndarray]:
    regs = con.execute(
        "SELECT region, ts_us, end_us FROM regions WHERE trace_id = ? AND window_id = ? "
        "ORDER BY kind, marker_ts_us DESC, end_us, event_id", [int(w.trace_id), int(w.window_id)]).df()
    part = Partition(float(w.ts_us), float(w.end_us), regs["ts_us"].to_numpy(float), regs["end_us"].to_numpy(float))
    return part, regs["region"].to_numpy(object)


def _region_lane(part: Partition, labels: np.ndarray) -> pd.DataFrame:
    own = part.owner
    lab = np.where(own >= 0, labels[np.maximum(own, 0)] if len(labels) else "other", "other")
    seg = pd.DataFrame({"region": lab, "start": part.seg_start, "end": part.seg_end})
    seg["run"] = (seg["region"] != seg["region"].shift()).cumsum()
    runs = seg.groupby("run").agg(region=("region", "first"), start=("start", "min"), end=("end", "max"))
    return pd.DataFrame({"lane": REGION_LANE, "kind": "region", "name": runs["region"], "region": runs["region"],
                         "ts_us": runs["start"], "end_abs": runs["end"], "dur_us": runs["end"] - runs["start"]})


def _gpu_items(con: duckdb.DuckDBPyConnection, db: TraceDB, w: pd.Series, part: Partition,
               labels: np.ndarray) -> pd.DataFrame:
    rank = con.execute("SELECT rank FROM traces WHERE trace_id = ?", [int(w.trace_id)]).fetchall()[0][0]
    kr = kernel_regions(db, rank=rank, window=(int(w.trace_id), int(w.window_id)))[["event_id", "region"]]
    ks = con.execute("SELECT event_id, name, stream, ts_us, ts_us + dur_us AS end_abs, dur_us FROM kernels "
                     "WHERE trace_id = $t AND event_id IN (SELECT unnest($ids)) ORDER BY ts_us, event_id",
                     {"t": int(w.trace_id), "ids": kr["event_id"].tolist()}).df().merge(kr, on="event_id")
    ks["kind"] = "kernel"
    horizon = max(float(w.end_us), float(ks["end_abs"].max()) if len(ks) else float(w.end_us))
    mem = con.execute("SELECT name, stream, cat, ts_us, ts_us + dur_us AS end_abs, dur_us FROM gpu_ops "
                      "WHERE trace_id = ? AND cat <> 'kernel' AND ts_us >= ? AND ts_us < ? ORDER BY ts_us, event_id",
                      [int(w.trace_id), float(w.ts_us), horizon]).df()
    mem["kind"] = mem.pop("cat").str.removeprefix("gpu_")
    own = part.at(mem["ts_us"].to_numpy(float))
    mem["region"] = np.where(own >= 0, labels[np.maximum(own, 0)] if len(labels) else "other", "other")
    items = pd.concat([ks.drop(columns="event_id"), mem], ignore_index=True)
    items["lane"] = "GPU stream " + items["stream"].astype("Int64").astype(str)
    return items.drop(columns="stream")


def _cpu_items(con: duckdb.DuckDBPyConnection, w: pd.Series, part: Partition, labels: np.ndarray) -> pd.DataFrame:
    """Outermost CPU operators per thread within the step (a CPU-only trace has no GPU lanes)."""
    ops = con.execute("SELECT tid, name, ts_us, ts_us + dur_us AS end_abs, dur_us FROM cpu_ops WHERE trace_id = ? "
                      "AND ts_us >= ? AND ts_us < ? AND (? IS NULL OR pid = ?) ORDER BY tid, ts_us, dur_us DESC",
                      [int(w.trace_id), float(w.ts_us), float(w.end_us), w.pid, w.pid]).df()
    if ops.empty:
        return ops.drop(columns="tid").assign(kind=[], region=[], lane=[])
    covered = ops.groupby("tid")["end_abs"].transform(lambda e: e.cummax().shift())
    ops = ops[covered.isna() | (ops["ts_us"] >= covered)].copy()
    own = part.at(ops["ts_us"].to_numpy(float))
    ops["region"] = np.where(own >= 0, labels[np.maximum(own, 0)] if len(labels) else "other", "other")
    ops["kind"] = "cpu_op"
    ops["lane"] = "CPU thread " + ops.pop("tid").astype(str)
    return ops


def step_timeline(db: TraceDB, *, trace_id: int | None = None, step: int | None = None,
                  max_items: int = MAX_ITEMS) -> Timeline:
    """GPU timeline of one step: kernels, memcpy and memset per stream (kernels colored by the
    region their launch is attributed to, :func:`~trace_report.analyses.breakdown.kernel_regions`),
    under a lane of the CPU-side regions. A CPU-only trace shows its outermost CPU operators per
    thread instead. Defaults: the first trace with kernels (lowest rank), its step of median
    duration. At most ``max_items`` items (the longest) are kept; a note says so."""
    con = db.con
    tid = _pick_trace(con, trace_id)
    w = _pick_window(con, tid, step)
    part, labels = _region_partition(con, w)
    items = _gpu_items(con, db, w, part, labels)
    notes = []
    if items.empty:
        items = _cpu_items(con, w, part, labels)
        notes.append("no GPU activity in this step: outermost CPU operators per thread")
    if len(items) > max_items:
        notes.append(f"{len(items)} operations in the step: the {max_items} longest are shown")
        items = items.nlargest(max_items, "dur_us")
    frame = pd.concat([_region_lane(part, labels), items], ignore_index=True)
    frame["start_us"] = frame["ts_us"] - float(w.ts_us)
    frame["end_us"] = frame["end_abs"] - float(w.ts_us)
    step_no = None if pd.isna(w.step) else int(w.step)
    return Timeline(frame[TIMELINE_COLUMNS].reset_index(drop=True), tid, step_no,
                    float(w.end_us - w.ts_us), notes)
