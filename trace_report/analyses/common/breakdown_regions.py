"""The step breakdown by region (forward, loss, backward, optimizer_step, data_loading, other):
what ``trace-report breakdown`` shows (its declaration: :mod:`trace_report.analyses.breakdown`),
``advise`` and ``compare --by region`` read.

For each ProfilerStep (the whole trace when a trace has none) and each region:

- ``wall_us``: wall time (µs) during which the region is the innermost one active on any thread
  of the process that recorded the step. The regions partition the step: their ``wall_us`` add
  up to the step's duration.
- ``gpu_us``: GPU kernel time (sum of kernel ``dur``, µs) attributed to the region by launch
  (docs/analysis.md): the region enclosing the kernel's ``cuda_runtime`` launch (same
  ``correlation``), innermost first on the launching thread, then by time on any thread of the
  process, then the fallback spans. Kernels without a launch go to the ``gpu_user_annotation``
  enclosing them, else the region active at their start, else ``other``. A kernel belongs to the
  step its launch (or, without one, its start) falls in; every kernel of a step is counted once.
- ``idle_us``: time (µs) within the region's wall time when no GPU activity (kernel, memcpy,
  memset) runs on the trace's GPU(s), on the trace's shared clock. The busy intervals are the
  view ``gpu_busy_intervals`` (``store/sql/views_step_numbers.sql``), the one definition GPU
  utilisation uses: per step, the regions' ``wall_us - idle_us`` adds up to the
  ``gpu_utilization`` view's ``busy_us`` (tests/analyses/breakdown/test_breakdown_utilization.py).
- ``cpu_us``: CPU operator time (µs): for every thread of the process, the time inside some
  ``cpu_op`` during the region's wall time, summed over threads.

The region intervals are SQL views (``sql/views_regions.sql``): ``region_rules`` (which
annotation names mark which region), ``region_markers``, ``step_windows``, ``regions`` (per
step, with the fallback spans) and ``kernel_steps`` (each kernel's launch and step). This module
partitions time between them (:class:`~trace_report.analyses.common.intervals.Partition`, innermost
first) and attributes kernels (:func:`kernel_regions`).

The rows per (trace, step, region) depend on the trace's events alone: the ingest of a large
trace (:func:`keep_region_rows`, ``ingest --precompute``) or else the first query keeps them
beside the database (:data:`KEPT`, ``<db>.events/derived/breakdown/``) and later queries read them
(:func:`region_table`).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from trace_report.analyses.common.breakdown_kept import RegionPart, bases_frame, parts_from_arrow, parts_to_arrow
from trace_report.analyses.common.breakdown_sums import (  # noqa: F401  (the names breakdown's callers import from here)
    BEFORE_FIRST_STEP,
    BREAKDOWN_COLUMNS,
    REGIONS,
    STEP_SPAN_COLUMNS,
    BreakdownResult,
    BreakdownSelection,
    breakdown_from,
    merge_region_tables,
)
from trace_report.analyses.common.columns import Columns, numpy_column, text_codes, text_vocabulary
from trace_report.analyses.common.intervals import BusyTime, Partition, positions_by_key, positions_by_pair
from trace_report.analyses.common.iterations import inferred_note
from trace_report.analyses.common.selection import selected_traces, trace_ids
from trace_report.errors import InputError
from trace_report.store.cache import PerTrace
from trace_report.store.kept_views import materialize
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import views_named_in

# ---------------------------------------------------------------------------------------------
# Queries


def breakdown_traces(con: duckdb.DuckDBPyConnection, opts: BreakdownSelection) -> pd.DataFrame:
    """:func:`selected_traces` of ``opts.rank``, narrowed to ``opts.trace_ids``; raises
    :class:`InputError` when none of those is in the database."""
    traces = selected_traces(con, opts.rank)
    if opts.trace_ids is not None:
        traces = traces[traces["trace_id"].isin(opts.trace_ids)].reset_index(drop=True)
        if traces.empty:
            raise InputError("none of the selected traces is in the database")
    return traces


_QUERIES = {
    # wall_ts_us: where the window's summed time starts (view step_wall_windows: a step that starts
    # before earlier ones have ended starts at their end; a nested one's at its own end, no time)
    "windows": "SELECT w.trace_id, w.window_id, w.step, w.pid, w.ts_us, w.end_us, "
               "coalesce(s.ts_us, w.ts_us) AS wall_ts_us, s.overlap FROM step_windows w "
               "LEFT JOIN step_wall_windows s ON s.trace_id = w.trace_id AND s.event_id = w.window_id "
               "WHERE list_contains($ids, w.trace_id) ORDER BY w.trace_id, w.ts_us",
    # priority order within a window: markers before spans, then the latest start, then the shortest
    "regions": "SELECT trace_id, window_id, region, kind, tid, ts_us, end_us FROM regions "
               "WHERE list_contains($ids, trace_id) "
               "ORDER BY trace_id, window_id, kind, marker_ts_us DESC, end_us, event_id",
    # sorted: sums over them must not depend on the order DuckDB returns them in (sorted by DuckDB,
    # not pyarrow: the same speed, without a second copy of 1.6 M rows beside the first)
    "kernels": "SELECT trace_id, event_id, window_id, step, device_pid, ts_us, dur_us, launch_tid, launch_ts_us, "
               "before_first_step FROM kernel_steps WHERE list_contains($ids, trace_id) ORDER BY trace_id, event_id",
    "gpu_markers": "SELECT trace_id, pid, region, ts_us, end_us FROM region_markers "
                   "WHERE cat = 'gpu_user_annotation' AND list_contains($ids, trace_id) "
                   "ORDER BY trace_id, pid, ts_us DESC, end_us",
    # GPU busy time: the union of GPU operations computed once, in SQL (view gpu_busy_intervals), which the
    # gpu_utilization view clips to steps too: breakdown's wall_us - idle_us per step is that view's busy_us
    "gpu": "SELECT trace_id, start_us AS ts_us, end_us FROM gpu_busy_intervals WHERE list_contains($ids, trace_id)",
    # one row per thread, its operators' starts and ends as lists (no text column per operator)
    "cpu": "SELECT trace_id, pid, tid, list(ts_us) AS ts_us, list(ts_us + dur_us) AS end_us FROM cpu_ops "
           "WHERE list_contains($ids, trace_id) GROUP BY trace_id, pid, tid ORDER BY trace_id, pid, tid",
}


def views_read() -> list[str]:
    """The views :func:`compute_region_parts` reads (its queries and the two it materializes)."""
    return views_named_in(*_QUERIES.values(), "steps region_markers")


def _fetch(con: duckdb.DuckDBPyConnection, ids: list[int], *names: str) -> dict[str, pa.Table]:
    materialize(con, "steps", "region_markers")  # read four times and twice by these queries
    return {n: con.sql(_QUERIES[n], params={"ids": ids}).to_arrow_table() for n in names}


@dataclass(frozen=True)
class _Window:
    trace_id: int
    window_id: int
    step: float
    pid: str | None
    ts_us: float
    end_us: float
    wall_ts_us: float  # where its time is counted from: ts_us, or later where it overlaps earlier steps


def _windows(table: pa.Table) -> list[_Window]:
    cols = table.to_pydict()
    return [_Window(int(t), int(w), np.nan if s is None else float(s), p, float(a), float(b), float(c))
            for t, w, s, p, a, b, c in zip(cols["trace_id"], cols["window_id"], cols["step"], cols["pid"],
                                           cols["ts_us"], cols["end_us"], cols["wall_ts_us"], strict=True)]


def _label_kernels(w: _WindowRegions, ks: Columns, gpu_marks: dict) -> tuple[np.ndarray, np.ndarray]:
    """Region (code) and basis of the kernels ``ks`` of one window (see :func:`kernel_regions`)."""
    region = np.full(len(ks), _OTHER, dtype=np.int64)
    basis = np.full(len(ks), "no_region", dtype=object)
    regs, whole = w.regs, w.part
    labels, kinds = regs["code"], regs["kind"]
    reg_ts, reg_end = regs["ts_us"], regs["end_us"]
    launch_ts, ts = ks["launch_ts_us"], ks["ts_us"]
    launched = ~np.isnan(launch_ts)
    at = np.where(launched, launch_ts, ts)
    own = whole.at(at)
    hit = own >= 0
    region[hit] = labels[own[hit]]
    basis[hit & launched] = np.where(kinds[own[hit & launched]] == "marker", "launch_time", "launch_span")
    basis[hit & ~launched] = "kernel_time"
    basis[~hit & ~launched] = "no_launch"
    markers = kinds == "marker"
    rows_launched = np.flatnonzero(launched)
    tids = ks["tid_code"][rows_launched]
    for tid in np.unique(tids[tids >= 0]).tolist():
        mine = np.flatnonzero(markers & (regs["tid_code"] == tid))
        if not len(mine):
            continue
        part = Partition(w.w.ts_us, w.w.end_us, reg_ts[mine], reg_end[mine])
        rows = rows_launched[tids == tid]
        o = part.at(at[rows])
        found = o >= 0
        region[rows[found]] = labels[mine[o[found]]]
        basis[rows[found]] = "launch_thread"
    if not gpu_marks:
        return region, basis
    rows_unlaunched = np.flatnonzero(~launched)
    pids = ks["pid_code"][rows_unlaunched]
    for pid in np.unique(pids[pids >= 0]).tolist():
        part_labels = gpu_marks.get((w.w.trace_id, pid))
        if part_labels is None:
            continue
        part, glabels = part_labels
        rows = rows_unlaunched[pids == pid]
        o = part.at(ts[rows])
        found = o >= 0
        region[rows[found]] = glabels[o[found]]
        basis[rows[found]] = "gpu_annotation"
    return region, basis


_REGION_CODE = {r: i for i, r in enumerate(REGIONS)}
_OTHER = _REGION_CODE["other"]


def _region_code(labels: np.ndarray) -> np.ndarray:
    """Index in :data:`REGIONS` of each region name (the region rules name no other)."""
    return np.array([_REGION_CODE[r] for r in labels], dtype=np.int64)


def _regions_by_window(regions: pa.Table, tids: pa.Array) -> tuple[Columns, dict]:
    """The ``regions`` rows as :class:`Columns` (``code``: the index in :data:`REGIONS`;
    ``tid_code``: the position of ``tid`` in ``tids``) and their positions per
    ``(trace_id, window_id)``, in the query's priority order."""
    regs = Columns.of(regions, ["trace_id", "window_id", "ts_us", "end_us"], ("region", "kind"))
    regs.cols["code"] = _region_code(regs["region"])
    regs.cols["tid_code"] = text_codes(regions.column("tid"), tids)
    return regs, positions_by_pair(regs["trace_id"], regs["window_id"])


_NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass
class _WindowRegions:
    """A window, its region rows (priority order) and the Partition of its time between them."""

    w: _Window
    regs: Columns
    part: Partition


def _window_regions(rows: dict[str, pa.Table]) -> tuple[list[_WindowRegions], pa.Array]:
    """Each window with its regions and their Partition, and the vocabulary of the regions'
    thread ids (the codes :func:`_attribute` matches launching threads against)."""
    tids = text_vocabulary(rows["regions"].column("tid"))
    regs, regs_by = _regions_by_window(rows["regions"], tids)
    out = []
    for w in _windows(rows["windows"]):
        r = regs.take(regs_by.get((w.trace_id, w.window_id), _NO_ROWS))
        out.append(_WindowRegions(w, r, Partition(w.ts_us, w.end_us, r["ts_us"], r["end_us"])))
    return out, tids


def _gpu_marker_partitions(gm: pa.Table, pids: pa.Array) -> dict:
    """Per ``(trace_id, pid code)``: the Partition of its ``gpu_user_annotation`` regions and their labels."""
    out = {}
    if not gm.num_rows:
        return out
    cols = Columns.of(gm, ["trace_id", "ts_us", "end_us"], ("region",))
    code = text_codes(gm.column("pid"), pids).astype(float)
    for (t, pid), g in positions_by_pair(cols["trace_id"], code).items():
        ts, end = cols["ts_us"][g], cols["end_us"][g]
        out[(t, pid)] = (Partition(float(ts.min()), float(end.max()), ts, end), _region_code(cols["region"][g]))
    return out


@dataclass
class _Attribution:
    """Every kernel (the ``kernels`` query's rows) with its window (position in the windows
    list, -1 for none), region (index in :data:`REGIONS`) and basis."""

    ks: Columns
    window: np.ndarray
    code: np.ndarray
    basis: np.ndarray


def kernel_regions(db: TraceDB, rank: int | None = None, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """Every GPU kernel with the step and region it is attributed to, and the basis.

    Columns: ``trace_id``, ``event_id``, ``window_id`` (the ProfilerStep's event id, -1 for a
    whole-trace window, NULL outside every step), ``step``, ``dur_us``, ``region``, ``basis``:

    - ``launch_thread``: the innermost region marker enclosing the launch on the launching thread
    - ``launch_time``: else the innermost marker enclosing the launch time on any thread of the process
    - ``launch_span``: else a fallback span (``regions.kind = 'span'``) enclosing the launch time
    - ``no_region``: launch found, nothing encloses it -> ``other``
    - ``gpu_annotation``: no launch (no correlation match): the ``gpu_user_annotation`` enclosing it
    - ``kernel_time``: no launch: the region active at the kernel's start
    - ``no_launch``: no launch and nothing encloses the kernel -> ``other``

    ``window`` ``(trace_id, window_id)``: only the kernels of that window (the same rows as
    without it: each window's kernels are attributed from its own regions alone).
    """
    con = db.con
    traces = selected_traces(con, rank)
    rows = _fetch(con, trace_ids(traces), "windows", "regions", "kernels", "gpu_markers")
    if window is not None:
        rows |= {n: _of_window(rows[n], window) for n in ("windows", "regions", "kernels")}
    k = _attribute(rows, *_window_regions(rows))
    kernels = rows["kernels"]
    return pd.DataFrame({
        "trace_id": kernels.column("trace_id").to_numpy(), "event_id": kernels.column("event_id").to_numpy(),
        "window_id": pd.array(k.ks["window_id"], dtype="Int64"), "step": pd.array(k.ks["step"], dtype="Int64"),
        "dur_us": k.ks["dur_us"], "region": np.array(REGIONS, dtype=object)[k.code], "basis": k.basis,
    })


def _of_window(table: pa.Table, window: tuple[int, int]) -> pa.Table:
    """The rows of ``table`` (a ``trace_id`` and a ``window_id`` column) of one window."""
    t, w = window
    keep = np.asarray(table.column("trace_id").to_numpy(zero_copy_only=False) == t) & np.asarray(
        table.column("window_id").fill_null(-2).to_numpy(zero_copy_only=False) == w)
    return table.filter(pa.array(keep))


def _attribute(rows: dict[str, pa.Table], windows: list[_WindowRegions], tids: pa.Array) -> _Attribution:
    """Region and basis of every kernel (see :func:`kernel_regions`); ``windows`` and ``tids``
    from :func:`_window_regions`."""
    kernels = rows["kernels"]
    pids = text_vocabulary(rows["gpu_markers"].column("pid"))
    ks = Columns.of(kernels, ["trace_id", "window_id", "step", "dur_us", "launch_ts_us", "ts_us", "before_first_step"])
    ks.cols["tid_code"] = text_codes(kernels.column("launch_tid"), tids)
    ks.cols["pid_code"] = text_codes(kernels.column("device_pid"), pids)
    # labels gathered in numpy and set once per window
    window = np.full(len(ks), -1, dtype=np.int64)
    code = np.full(len(ks), _OTHER, dtype=np.int64)
    basis = np.full(len(ks), None, dtype=object)
    gpu_marks = _gpu_marker_partitions(rows["gpu_markers"], pids)
    ks_by = positions_by_pair(ks["trace_id"], ks["window_id"])  # NULL windows left out
    for i, wr in enumerate(windows):
        idx = ks_by.get((wr.w.trace_id, wr.w.window_id))
        if idx is None:
            continue
        window[idx] = i
        code[idx], basis[idx] = _label_kernels(wr, ks.take(idx), gpu_marks)
    unset = window < 0  # in no window: _label_kernels gave every other kernel its basis
    early = ks["before_first_step"].astype(bool)
    basis[unset & early] = BEFORE_FIRST_STEP
    basis[unset & ~early] = "outside_steps"
    return _Attribution(ks, window, code, basis)


def _region_sums(windows: list[_WindowRegions], gpu_by_trace: dict[int, BusyTime],
                 threads_of: dict[tuple, list[BusyTime]]) -> np.ndarray:
    """wall/idle/cpu µs per (window, region): shape (len(windows) * 6, 3), rows window by window in
    :data:`REGIONS` order. Each window's time is cut into the segments of its Partition, each owned
    by a region (``other`` where none covers it); busy time is looked up for all segments at once.

    Only the time from the window's ``wall_ts_us`` on is counted, so that overlapping steps count
    each instant once, as GPU utilisation does (view ``step_wall_windows``): a step clipped to
    start where earlier ones end loses its first segments, a nested one counts no time (its
    kernels keep their GPU time: each kernel is in one step)."""
    n = len(REGIONS)
    win, lab, a, b = [], [], [], []
    for i, wr in enumerate(windows):
        part = wr.part
        owner = part.owner
        if len(wr.regs):
            code = np.where(owner >= 0, wr.regs["code"][np.maximum(owner, 0)], _OTHER)
        else:
            code = np.full(len(owner), _OTHER, dtype=np.int64)
        win.append(np.full(len(owner), i, dtype=np.int64))
        lab.append(code)
        a.append(part.seg_start)
        b.append(part.seg_end)
    out = np.zeros((len(windows) * n, 3))
    if not windows:
        return out
    win, lab, a, b = (np.concatenate(x) for x in (win, lab, a, b))
    counted_from = np.array([wr.w.wall_ts_us for wr in windows])[win]
    a, b = np.maximum(a, counted_from), np.maximum(b, counted_from)
    cell, length = win * n + lab, b - a
    out[:, 0] = np.bincount(cell, weights=length, minlength=len(out))
    traces = np.array([wr.w.trace_id for wr in windows], dtype=np.int64)
    busy = np.zeros(len(a))
    for t, seg in positions_by_key(traces[win]).items():
        if t in gpu_by_trace:
            busy[seg] = gpu_by_trace[t].between(a[seg], b[seg])
    out[:, 1] = np.bincount(cell, weights=length - busy, minlength=len(out))
    out[~np.repeat(np.isin(traces, list(gpu_by_trace)), n), 1] = np.nan  # no GPU activity in the trace
    keys = [(wr.w.trace_id, wr.w.pid) for wr in windows]
    key_of = {k: j for j, k in enumerate(dict.fromkeys(keys))}
    key_idx = np.array([key_of[k] for k in keys], dtype=np.int64)
    cpu = np.zeros(len(a))
    segments_of = positions_by_key(key_idx[win])
    for k, j in key_of.items():
        seg = segments_of.get(j, _NO_ROWS)
        for t in threads_of.get(k, []):
            cpu[seg] += t.between(a[seg], b[seg])
    out[:, 2] = np.bincount(cell, weights=cpu, minlength=len(out))
    return out


def _gpu_busy(gpu: pa.Table) -> dict[int, BusyTime]:
    """The GPU busy intervals per trace."""
    ts, end = numpy_column(gpu.column("ts_us"), False), numpy_column(gpu.column("end_us"), False)
    return {t: BusyTime(ts[rows], end[rows])
            for t, rows in positions_by_key(gpu.column("trace_id").to_numpy().astype(np.int64)).items()}


def _threads(cpu: pa.Table) -> dict[tuple, list[BusyTime]]:
    """CPU operator busy time per thread, listed per ``(trace_id, pid)`` and per ``(trace_id, None)``."""
    out: dict[tuple, list[BusyTime]] = {}
    ts, end = cpu.column("ts_us").combine_chunks(), cpu.column("end_us").combine_chunks()
    offsets = ts.offsets.to_numpy()
    flat_ts, flat_end = ts.flatten().to_numpy(), end.flatten().to_numpy()
    for i, (t, pid) in enumerate(zip(cpu.column("trace_id").to_pylist(), cpu.column("pid").to_pylist(), strict=True)):
        a, b = offsets[i], offsets[i + 1]
        bt = BusyTime(flat_ts[a:b], flat_end[a:b])
        out.setdefault((t, pid), []).append(bt)
        out.setdefault((t, None), []).append(bt)
    return out


def region_table(con: duckdb.DuckDBPyConnection, traces: pd.DataFrame, *, keep: bool = True
                 ) -> tuple[pd.DataFrame, dict]:
    """One row per (trace, window, region) with wall/gpu/idle/cpu µs and kernel counts, in
    ``trace_id`` order.

    Also returns facts for notes: kernel bases, kernels outside steps, traces without GPU activity.
    Each trace's rows and facts depend on that trace's events alone: they are read from the rows
    kept beside the database (:data:`KEPT`), else computed and kept for the next query; ``keep``
    False computes them all and keeps nothing.
    """
    ids = trace_ids(traces)
    parts = parts_from_arrow(KEPT.rows(con, ids), ids) if keep else compute_region_parts(con, ids)
    return merge_region_tables([parts[t] for t in ids])


def keep_region_rows(con: duckdb.DuckDBPyConnection, ids: list[int]) -> list[int]:
    """Compute and keep (:func:`region_table`) the rows of the traces of ``ids`` that have none
    kept for this code yet, so that the first ``breakdown`` reads them: what ``trace-report ingest
    --precompute`` does. Returns the ids by ``trace_id``. Raises :class:`InputError` when none of
    ``ids`` is in the database."""
    traces = breakdown_traces(con, BreakdownSelection(trace_ids=tuple(int(t) for t in ids)))
    region_table(con, traces)
    return trace_ids(traces)


def compute_region_parts(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, RegionPart]:
    """:func:`region_table`'s rows and facts of each of ``ids``, computed from the events."""
    rows = _fetch(con, ids, *_QUERIES)
    gpu_by_trace = _gpu_busy(rows.pop("gpu"))  # their Arrow tables go once read (the peak of a large trace)
    threads_of = _threads(rows.pop("cpu"))
    wregs, tids = _window_regions(rows)
    windows = [wr.w for wr in wregs]
    n = len(REGIONS)
    values = _region_sums(wregs, gpu_by_trace, threads_of)
    k = _attribute(rows, wregs, tids)
    kernels, gpu_us = _kernel_sums(k, windows)
    table = pd.DataFrame({
        "trace_id": np.repeat(np.array([w.trace_id for w in windows], dtype=np.int64), n),
        "window_id": np.repeat(np.array([w.window_id for w in windows], dtype=np.int64), n),
        "step": np.repeat(np.array([w.step for w in windows], dtype=float), n),
        "region": np.tile(np.array(REGIONS, dtype=object), len(windows)),
        "wall_us": values[:, 0], "idle_us": values[:, 1], "cpu_us": values[:, 2],
        "kernels": kernels, "gpu_us": gpu_us,
    })
    early = _early_rows(k)
    if len(early):
        table = pd.concat([early[table.columns], table], ignore_index=True)
    table.loc[~table["trace_id"].isin(list(gpu_by_trace)), "gpu_us"] = np.nan
    bases = _bases_by_trace(k)
    fwd = {}
    for wr in wregs:
        spans = int(((wr.regs["kind"] == "span") & (wr.regs["code"] == _REGION_CODE["forward"])).sum())
        fwd[wr.w.trace_id] = fwd.get(wr.w.trace_id, 0) + spans
    no_steps = {w.trace_id for w in windows if w.window_id == -1}
    overlaps = _overlaps(rows["windows"])
    rows_of = {t: g for t, g in table.groupby("trace_id", sort=False)}
    out = {}
    for t in ids:
        out[t] = (rows_of[t].reset_index(drop=True) if t in rows_of else table.iloc[:0],
                  {"bases": bases.get(t, bases_frame([], [], [])), "no_gpu": [t] if t not in gpu_by_trace else [],
                   "no_steps": [t] if t in no_steps else [], "fwd_spans": fwd.get(t, 0),
                   "overlaps": overlaps.get(t, [0, 0])})
    return out


def _overlaps(windows: pa.Table) -> dict[int, list[int]]:
    """Per trace with overlapping steps: [clipped, nested] step counts (view step_wall_windows)."""
    out: dict[int, list[int]] = {}
    for t, kind in zip(windows.column("trace_id").to_pylist(), windows.column("overlap").to_pylist(), strict=True):
        if kind in ("clipped", "nested"):
            out.setdefault(int(t), [0, 0])[kind == "nested"] += 1
    return out


def _bases_by_trace(k: _Attribution) -> dict[int, pd.DataFrame]:
    """Per trace: kernels and summed ``dur_us`` per basis (the bases it has), indexed by basis.
    The bases are a handful of strings over every kernel: coded once (hashing), counted in numpy."""
    codes, names = pd.factorize(k.basis)
    out = {}
    for t, rows in positions_by_key(k.ks["trace_id"].astype(np.int64)).items():
        n = np.bincount(codes[rows], minlength=len(names))
        us = np.bincount(codes[rows], weights=k.ks["dur_us"][rows], minlength=len(names))
        has = np.flatnonzero(n)
        out[t] = bases_frame(list(names[has]), n[has], us[has])
    return out


def _kernel_sums(k: _Attribution, windows: list[_Window]) -> tuple[np.ndarray, np.ndarray]:
    """Kernel count and summed ``dur_us`` per (window, region), in the table's row order."""
    n = len(REGIONS)
    inside = k.window >= 0
    cell = k.window[inside] * n + k.code[inside]
    size = len(windows) * n
    return (np.bincount(cell, minlength=size).astype(np.int64),
            np.bincount(cell, weights=k.ks["dur_us"][inside], minlength=size))


def _early_rows(k: _Attribution) -> pd.DataFrame:
    """One ``before_first_step`` row per trace that has such kernels."""
    early = k.basis == BEFORE_FIRST_STEP
    if not early.any():
        return pd.DataFrame()
    g = pd.DataFrame({"trace_id": k.ks["trace_id"][early].astype(np.int64), "kernels": 1,
                      "gpu_us": k.ks["dur_us"][early]}).groupby("trace_id", as_index=False).sum()
    return g.assign(window_id=-2, step=np.nan, region=BEFORE_FIRST_STEP, wall_us=0.0, idle_us=0.0, cpu_us=0.0)


def step_breakdown(db: TraceDB, selection: BreakdownSelection | None = None) -> BreakdownResult:
    """Wall, GPU-kernel, GPU-idle and CPU time per region (see the module docstring) of the traces
    and groups of ``selection``.

    ``db``: a :class:`~trace_report.api.TraceDB` or a duckdb connection. Percentages:
    ``wall_pct`` of the group's wall time, ``gpu_pct`` of the group's kernel time (a group = one
    step with ``by_step``, one rank with ``by_rank``); each adds up to 100 over the six regions.
    Summed over steps (the default) the ``steps`` column counts the windows. Raises
    :class:`InputError` for an empty database or an unknown rank.
    """
    opts = selection or BreakdownSelection()
    traces = breakdown_traces(db.con, opts)
    table, facts = region_table(db.con, traces)
    result = breakdown_from(table, facts, traces, opts, step_spans(db.con, trace_ids(traces)))
    inferred = inferred_note(db.con, trace_ids(traces))
    if inferred:
        result.notes.insert(0, inferred)
    return result


def step_spans(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pd.DataFrame:
    """The rows of view ``step_time`` of the traces of ``ids`` (``trace_id``, ``window_id``,
    ``step``, ``cpu_us``, ``gpu_us``, ``step_us``): breakdown's step columns."""
    return con.execute("SELECT trace_id, window_id, step, cpu_us, gpu_us, step_us FROM step_time "
                       "WHERE list_contains($ids, trace_id) ORDER BY trace_id, cpu_start_us, window_id",
                       {"ids": ids}).df()  # in order: sums over them are the same every time


def _kept_parts(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pa.Table:
    return parts_to_arrow(compute_region_parts(con, ids))


KEPT = PerTrace("breakdown", _kept_parts, __name__)
"""The rows and facts of :func:`region_table`, kept per trace beside a database
(:mod:`~trace_report.analyses.common.breakdown_kept` gives their form)."""
