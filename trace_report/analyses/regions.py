"""Step breakdown by region: forward, loss, backward, optimizer_step, data_loading, other.

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
  ``gpu_utilization`` view's ``busy_us`` (tests/analyses/test_breakdown_utilization.py).
- ``cpu_us``: CPU operator time (µs): for every thread of the process, the time inside some
  ``cpu_op`` during the region's wall time, summed over threads.

The region intervals are SQL views (``sql/views_regions.sql``): ``region_rules`` (which
annotation names mark which region), ``region_markers``, ``step_windows``, ``regions`` (per
step, with the fallback spans) and ``kernel_steps`` (each kernel's launch and step). This module
partitions time between them (:class:`Partition`, innermost first) and attributes kernels
(:func:`kernel_regions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from trace_report.errors import InputError, UsageError
from trace_report.store.tracedb import TraceDB

REGIONS = ("forward", "loss", "backward", "optimizer_step", "data_loading", "other")
BEFORE_FIRST_STEP = "before_first_step"
"""The row of kernels launched before the first ProfilerStep (or whose launch predates the trace):
no wall time of their own, never counted in the first step (view ``kernel_steps``)."""
BREAKDOWN_COLUMNS = ["step", "region", "wall_us", "wall_pct", "gpu_us", "gpu_pct", "kernels",
                     "idle_us", "cpu_us"]


@dataclass(frozen=True)
class BreakdownOptions:
    """``by_step``: one group of rows per step (else summed over steps); ``rank``: only that rank;
    ``by_rank``: one group per rank (else summed over ranks); ``trace_ids``: only these traces
    (one run of several)."""

    by_step: bool = False
    rank: int | None = None
    by_rank: bool = False
    trace_ids: tuple[int, ...] | None = None


@dataclass
class BreakdownResult:
    """Rows (``rank`` first with ``by_rank``, then :data:`BREAKDOWN_COLUMNS`, then ``steps`` when
    summed over steps) and notes for the user."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)



# ---------------------------------------------------------------------------------------------
# Interval helpers (all times in µs)


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of ``[start, end)`` intervals as sorted, disjoint ``(starts, ends)`` arrays."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s))
    np.maximum.at(out_e, group, run_end)
    return out_s, out_e


class BusyTime:
    """Cumulative busy time of a set of intervals: ``between(a, b)`` = busy µs within ``[a, b)``."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.s, self.e = merge_intervals(np.asarray(starts, float), np.asarray(ends, float))
        self.cum = np.concatenate([[0.0], np.cumsum(self.e - self.s)])

    def until(self, t: np.ndarray) -> np.ndarray:
        """Busy µs in ``(-inf, t)`` for each ``t``."""
        t = np.asarray(t, float)
        if len(self.s) == 0:
            return np.zeros_like(t)
        i = np.searchsorted(self.s, t, side="right") - 1
        inside = np.where(i >= 0, np.clip(t - self.s[np.maximum(i, 0)], 0.0,
                                          (self.e - self.s)[np.maximum(i, 0)]), 0.0)
        return np.where(i >= 0, self.cum[np.maximum(i, 0)] + inside, 0.0)

    def between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.until(b) - self.until(a)

    @property
    def total(self) -> float:
        return float(self.cum[-1])


class Partition:
    """``[w0, w1)`` split into segments, each owned by the first interval (in the given priority
    order) that covers it, or by none (-1): ``owner[k] = min{i : start_i <= cut_k < end_i}``.
    Each interval covers a contiguous run of segments; writing the runs from the last interval to
    the first leaves the first covering one: O(n log n + n * run length) in numpy slices."""

    def __init__(self, w0: float, w1: float, starts: np.ndarray, ends: np.ndarray):
        starts = np.clip(np.asarray(starts, float), w0, w1)
        ends = np.clip(np.asarray(ends, float), w0, w1)
        self.cuts = np.unique(np.concatenate([[w0, w1], starts, ends]))
        owner = np.full(len(self.cuts) - 1, -1, dtype=np.int64)
        lo = np.searchsorted(self.cuts, starts, side="left")
        hi = np.searchsorted(self.cuts, ends, side="left")
        for i in np.flatnonzero(hi > lo)[::-1].tolist():
            owner[lo[i]:hi[i]] = i
        self.owner = owner

    @property
    def seg_start(self) -> np.ndarray:
        return self.cuts[:-1]

    @property
    def seg_end(self) -> np.ndarray:
        return self.cuts[1:]

    def at(self, t: np.ndarray) -> np.ndarray:
        """Owner (interval index, -1 for none) at each time ``t``; -1 outside ``[w0, w1)``."""
        t = np.asarray(t, float)
        k = np.searchsorted(self.cuts, t, side="right") - 1
        ok = (k >= 0) & (k < len(self.owner))
        return np.where(ok, self.owner[np.clip(k, 0, max(len(self.owner) - 1, 0))], -1) \
            if len(self.owner) else np.full(len(t), -1)


# ---------------------------------------------------------------------------------------------
# Queries


def selected_traces(con: duckdb.DuckDBPyConnection, rank: int | None) -> pd.DataFrame:
    """``trace_id``, ``rank``, ``device_name``, ``path`` of the traces of ``rank`` (all when None),
    by ``trace_id``. Raises :class:`InputError` for no traces, :class:`UsageError` for an unknown rank."""
    traces = con.execute("SELECT trace_id, rank, device_name, path FROM traces ORDER BY trace_id").df()
    if traces.empty:
        raise InputError("no traces in the database")
    if rank is not None:
        sel = traces[traces["rank"] == rank]
        if sel.empty:
            ranks = ", ".join(str(r) for r in sorted(traces["rank"].dropna().unique()))
            raise UsageError(f"no trace of rank {rank} (ranks: {ranks or 'none'})")
        traces = sel
    return traces.reset_index(drop=True)


def _ids(traces: pd.DataFrame) -> list[int]:
    return [int(t) for t in traces["trace_id"]]


_QUERIES = {
    "windows": "SELECT * FROM step_windows WHERE list_contains($ids, trace_id) ORDER BY trace_id, ts_us",
    # priority order within a window: markers before spans, then the latest start, then the shortest
    "regions": "SELECT trace_id, window_id, region, kind, tid, ts_us, end_us FROM regions "
               "WHERE list_contains($ids, trace_id) "
               "ORDER BY trace_id, window_id, kind, marker_ts_us DESC, end_us, event_id",
    "kernels": "SELECT trace_id, event_id, window_id, step, device_pid, ts_us, dur_us, launch_tid, launch_ts_us, "
               "before_first_step FROM kernel_steps WHERE list_contains($ids, trace_id)",
    "gpu_markers": "SELECT trace_id, pid, region, ts_us, end_us FROM region_markers "
                   "WHERE cat = 'gpu_user_annotation' AND list_contains($ids, trace_id) "
                   "ORDER BY trace_id, pid, ts_us DESC, end_us",
    # GPU busy time: the union of GPU operations computed once, in SQL (view gpu_busy_intervals), which the
    # gpu_utilization view clips to steps too: breakdown's wall_us - idle_us per step is that view's busy_us
    "gpu": "SELECT trace_id, start_us AS ts_us, end_us FROM gpu_busy_intervals WHERE list_contains($ids, trace_id)",
    "cpu": "SELECT trace_id, pid, tid, ts_us, ts_us + dur_us AS end_us FROM cpu_ops "
           "WHERE list_contains($ids, trace_id)",
}


def _fetch(con: duckdb.DuckDBPyConnection, ids: list[int], *names: str) -> dict[str, pd.DataFrame]:
    return {n: con.execute(_QUERIES[n], {"ids": ids}).df() for n in names}


@dataclass
class _Cols:
    """Columns of a frame as numpy arrays (object for text), sliced by row positions."""

    cols: dict[str, np.ndarray]

    @classmethod
    def of(cls, frame: pd.DataFrame, names: list[str]) -> _Cols:
        out = {}
        for n in names:
            col = frame[n]
            out[n] = col.to_numpy(float, na_value=np.nan) if col.dtype.kind in "fiu" or n.endswith("_us") \
                else col.to_numpy(object, na_value=None)
        return cls(out)

    def take(self, idx: np.ndarray) -> _Cols:
        return _Cols({n: c[idx] for n, c in self.cols.items()})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0


def _label_kernels(w: pd.Series, regs: _Cols, ks: _Cols, gpu_marks: dict) -> tuple[np.ndarray, np.ndarray]:
    """Region and basis of the kernels ``ks`` of one window (see :func:`kernel_regions`)."""
    region = np.full(len(ks), "other", dtype=object)
    basis = np.full(len(ks), "no_region", dtype=object)
    labels, kinds = regs["region"], regs["kind"]
    reg_ts, reg_end = regs["ts_us"], regs["end_us"]
    whole = Partition(w.ts_us, w.end_us, reg_ts, reg_end)
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
    tids = ks["launch_tid"][rows_launched]
    for tid in dict.fromkeys(t for t in tids if t is not None):
        mine = np.flatnonzero(markers & (regs["tid"] == tid))
        if not len(mine):
            continue
        part = Partition(w.ts_us, w.end_us, reg_ts[mine], reg_end[mine])
        rows = rows_launched[tids == tid]
        o = part.at(at[rows])
        found = o >= 0
        region[rows[found]] = labels[mine[o[found]]]
        basis[rows[found]] = "launch_thread"
    rows_unlaunched = np.flatnonzero(~launched)
    pids = ks["device_pid"][rows_unlaunched]
    for pid in dict.fromkeys(p for p in pids if p is not None):
        part_labels = gpu_marks.get((w.trace_id, pid))
        if part_labels is None:
            continue
        part, glabels = part_labels
        rows = rows_unlaunched[pids == pid]
        o = part.at(ts[rows])
        found = o >= 0
        region[rows[found]] = glabels[o[found]]
        basis[rows[found]] = "gpu_annotation"
    return region, basis


_REGION_COLS = ["region", "kind", "tid", "ts_us", "end_us"]
_REGION_CODE = {r: i for i, r in enumerate(REGIONS)}


def _regions_by_window(regions: pd.DataFrame) -> tuple[_Cols, dict]:
    """The ``regions`` rows as :class:`_Cols` (with ``code``: the index in :data:`REGIONS`, -1 for
    any other name) and their positions per ``(trace_id, window_id)``."""
    regs = _Cols.of(regions, _REGION_COLS)
    regs.cols["code"] = np.array([_REGION_CODE.get(r, -1) for r in regs["region"]], dtype=np.int64)
    return regs, regions.groupby(["trace_id", "window_id"], sort=False).indices


_NO_ROWS = np.zeros(0, dtype=np.int64)
_KERNEL_COLS = ["launch_ts_us", "ts_us", "launch_tid", "device_pid"]


def _gpu_marker_partitions(gm: pd.DataFrame) -> dict:
    out = {}
    for (t, pid), g in gm.groupby(["trace_id", "pid"], sort=False):
        part = Partition(float(g["ts_us"].min()), float(g["end_us"].max()), g["ts_us"].to_numpy(float),
                         g["end_us"].to_numpy(float))
        out[(t, pid)] = (part, g["region"].to_numpy(object))
    return out


def kernel_regions(db: TraceDB, rank: int | None = None) -> pd.DataFrame:
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
    """
    con = db.con
    traces = selected_traces(con, rank)
    rows = _fetch(con, _ids(traces), "windows", "regions", "kernels", "gpu_markers")
    return _attribute(rows)


def _attribute(rows: dict[str, pd.DataFrame]) -> pd.DataFrame:
    ks = rows["kernels"]
    out = ks[["trace_id", "event_id", "window_id", "step", "dur_us"]].copy()
    # labels gathered in numpy and set once: a pandas setitem per window on string columns cost
    # seconds on a 240-step trace
    region = np.full(len(ks), "other", dtype=object)
    basis = np.full(len(ks), None, dtype=object)
    gpu_marks = _gpu_marker_partitions(rows["gpu_markers"])
    regs, regs_by = _regions_by_window(rows["regions"])
    kcols = _Cols.of(ks, _KERNEL_COLS)
    ks_by = ks.groupby(["trace_id", "window_id"], sort=False).indices  # positions in ks; NaN windows left out
    for w in rows["windows"].itertuples(index=False):
        idx = ks_by.get((w.trace_id, w.window_id))
        if idx is None:
            continue
        region[idx], basis[idx] = _label_kernels(w, regs.take(regs_by.get((w.trace_id, w.window_id), _NO_ROWS)),
                                                 kcols.take(idx), gpu_marks)
    unset = pd.isna(basis)
    basis[unset & ks["before_first_step"].to_numpy(bool)] = BEFORE_FIRST_STEP
    basis[pd.isna(basis)] = "outside_steps"
    out["region"], out["basis"] = region, basis
    return out


def _window_sums(w: pd.Series, regs: _Cols, gpu: BusyTime | None, threads: list[BusyTime]) -> np.ndarray:
    """wall/idle/cpu µs per region (rows in :data:`REGIONS` order) for one window: shape (6, 3)."""
    part = Partition(w.ts_us, w.end_us, regs["ts_us"], regs["end_us"])
    a, b = part.seg_start, part.seg_end
    other = len(REGIONS) - 1
    if len(regs):
        lab = np.where(part.owner >= 0, regs["code"][np.maximum(part.owner, 0)], other)
    else:
        lab = np.full(len(a), other, dtype=np.int64)
    keep = lab >= 0  # a region outside REGIONS is left out (no rule makes one)
    lab, a, b = lab[keep], a[keep], b[keep]
    out = np.zeros((len(REGIONS), 3))
    out[:, 0] = np.bincount(lab, weights=b - a, minlength=len(REGIONS))
    out[:, 1] = np.bincount(lab, weights=(b - a) - gpu.between(a, b), minlength=len(REGIONS)) \
        if gpu is not None else np.nan
    cpu = sum((t.between(a, b) for t in threads), np.zeros(len(a)))
    out[:, 2] = np.bincount(lab, weights=cpu, minlength=len(REGIONS))
    return out



def region_table(con: duckdb.DuckDBPyConnection, traces: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """One row per (trace, window, region) with wall/gpu/idle/cpu µs and kernel counts.

    Also returns facts for notes: kernel bases, kernels outside steps, traces without GPU activity.
    """
    rows = _fetch(con, _ids(traces), *_QUERIES)
    gpu_by_trace = {t: BusyTime(g["ts_us"].to_numpy(), g["end_us"].to_numpy())
                    for t, g in rows["gpu"].groupby("trace_id")}
    threads_of: dict[tuple, list[BusyTime]] = {}
    for (t, pid, _), g in rows["cpu"].groupby(["trace_id", "pid", "tid"]):
        bt = BusyTime(g["ts_us"].to_numpy(), g["end_us"].to_numpy())
        threads_of.setdefault((t, pid), []).append(bt)
        threads_of.setdefault((t, None), []).append(bt)
    regs, regs_by = _regions_by_window(rows["regions"])
    windows = rows["windows"]
    sums = [_window_sums(w, regs.take(regs_by.get((w.trace_id, w.window_id), _NO_ROWS)), gpu_by_trace.get(w.trace_id),
                         threads_of.get((w.trace_id, None if pd.isna(w.pid) else w.pid), []))
            for w in windows.itertuples(index=False)]
    n = len(REGIONS)
    values = np.concatenate(sums) if sums else np.zeros((0, 3))
    table = pd.DataFrame({
        "trace_id": np.repeat(windows["trace_id"].to_numpy(), n),
        "window_id": np.repeat(windows["window_id"].to_numpy(), n),
        "step": np.repeat(windows["step"].to_numpy(), n),
        "region": np.tile(np.array(REGIONS, dtype=object), len(windows)),
        "wall_us": values[:, 0], "idle_us": values[:, 1], "cpu_us": values[:, 2],
    })
    k = _attribute(rows)
    k["kernels"] = 1
    inside = k[k["window_id"].notna()].groupby(["trace_id", "window_id", "region"], as_index=False)[
        ["kernels", "dur_us"]].sum().rename(columns={"dur_us": "gpu_us"})
    table = table.merge(inside, on=["trace_id", "window_id", "region"], how="left")
    early = k[k["basis"] == BEFORE_FIRST_STEP].groupby("trace_id", as_index=False)[["kernels", "dur_us"]].sum()
    if len(early):
        early = early.rename(columns={"dur_us": "gpu_us"}).assign(
            window_id=-2, step=np.nan, region=BEFORE_FIRST_STEP, wall_us=0.0, idle_us=0.0, cpu_us=0.0)
        table = pd.concat([early[table.columns], table], ignore_index=True)
    table["kernels"] = table["kernels"].fillna(0).astype("int64")
    table["gpu_us"] = table["gpu_us"].fillna(0.0)
    no_gpu = [t for t in _ids(traces) if t not in gpu_by_trace]
    table.loc[table["trace_id"].isin(no_gpu), "gpu_us"] = np.nan
    facts = {
        "bases": k.groupby("basis")[["kernels", "dur_us"]].sum(),
        "no_gpu": no_gpu,
        "no_steps": sorted(set(rows["windows"].loc[rows["windows"]["window_id"] == -1, "trace_id"])),
        "fwd_spans": int(((rows["regions"]["kind"] == "span") & (rows["regions"]["region"] == "forward")).sum()),
    }
    return table, facts


def _notes(traces: pd.DataFrame, facts: dict) -> list[str]:
    notes = []
    label = dict(zip(traces["trace_id"], traces["path"], strict=True))
    if facts["no_steps"]:
        notes.append(f"no ProfilerStep in {len(facts['no_steps'])} trace(s): each is one window (step empty)")
    if facts["fwd_spans"]:
        notes.append("no forward range named in some steps: forward runs from the step start (or the previous "
                     "backward pass) to the first backward op (torch-tb-profiler conventions)")
    bases = facts["bases"]
    for basis, text in (("gpu_annotation", "placed by the gpu_user_annotation enclosing them"),
                        ("kernel_time", "placed by the region active at their start"),
                        ("no_launch", "counted as 'other'"),
                        ("outside_steps", "outside every ProfilerStep, not in the table"),
                        (BEFORE_FIRST_STEP, "before the first ProfilerStep (or before the trace began: no "
                                            "launch recorded); their own before_first_step row, not in step 1")):
        if basis in bases.index and bases.loc[basis, "kernels"]:
            n, us = int(bases.loc[basis, "kernels"]), float(bases.loc[basis, "dur_us"])
            what = "were launched" if basis in ("outside_steps", BEFORE_FIRST_STEP) else \
                "have no launch (no correlation match):"
            notes.append(f"{n} kernel(s) ({us:,.1f} us) {what} {text}")
    for t in facts["no_gpu"]:
        dev = traces.loc[traces["trace_id"] == t, "device_name"].iloc[0]
        what = (f"GPU {dev} listed but no GPU activity recorded" if isinstance(dev, str) and dev
                else "CPU-only trace")
        notes.append(f"{label[t]}: {what}; wall and CPU time per region only")
    return notes


def _pct(agg: pd.DataFrame, col: str, group: list[str]) -> pd.Series:
    """100 * col / (sum of col within the group); NULL where the group sums to 0 or NULL."""
    denom = agg.groupby(group, dropna=False)[col].transform("sum") if group else \
        pd.Series(agg[col].sum(), index=agg.index)
    return 100.0 * agg[col] / denom.where(denom > 0)


def _aggregate(table: pd.DataFrame, traces: pd.DataFrame, opts: BreakdownOptions) -> pd.DataFrame:
    t = table.merge(traces[["trace_id", "rank"]], on="trace_id")
    t["window"] = t["trace_id"].astype(str) + ":" + t["window_id"].astype(str)
    keys = (["rank"] if opts.by_rank else []) + (["trace_id", "window_id", "step"] if opts.by_step else [])
    sums = {c: (c, lambda s: s.sum(min_count=1)) for c in ("wall_us", "gpu_us", "idle_us", "cpu_us")}
    agg = t.groupby(keys + ["region"], dropna=False, sort=False).agg(
        **sums, kernels=("kernels", "sum"), steps=("window", "nunique")).reset_index()
    if opts.by_step and not opts.by_rank:  # the same step number on several ranks adds up
        agg = agg.groupby(["step", "region"], dropna=False, sort=False).agg(
            **sums, kernels=("kernels", "sum"), steps=("steps", "sum")).reset_index()
    if not opts.by_step:
        agg["step"] = None
    group = (["rank"] if opts.by_rank else []) + (["step"] if opts.by_step else [])
    agg["wall_pct"] = _pct(agg, "wall_us", group)
    agg["gpu_pct"] = _pct(agg, "gpu_us", group)
    agg["region_order"] = agg["region"].map({r: i for i, r in enumerate(REGIONS)}).fillna(-1)
    agg = agg.sort_values(group + ["region_order"], na_position="first", kind="stable")
    cols = (["rank"] if opts.by_rank else []) + BREAKDOWN_COLUMNS + ([] if opts.by_step else ["steps"])
    out = agg[cols].reset_index(drop=True)
    out["kernels"] = out["kernels"].astype("int64")
    out["step"] = out["step"].astype("Int64")  # a step number, NULL for whole-trace and before_first_step rows
    return out


def breakdown(db: TraceDB, options: BreakdownOptions | None = None) -> BreakdownResult:
    """Wall, GPU-kernel, GPU-idle and CPU time per region (see the module docstring).

    ``db``: a :class:`~trace_report.api.TraceDB` or a duckdb connection. Percentages:
    ``wall_pct`` of the group's wall time, ``gpu_pct`` of the group's kernel time (a group = one
    step with ``by_step``, one rank with ``by_rank``); each adds up to 100 over the six regions.
    Summed over steps (the default) the ``steps`` column counts the windows. Raises
    :class:`InputError` for an empty database or an unknown rank.
    """
    opts = options or BreakdownOptions()
    con = db.con
    traces = selected_traces(con, opts.rank)
    if opts.trace_ids is not None:
        traces = traces[traces["trace_id"].isin(opts.trace_ids)].reset_index(drop=True)
        if traces.empty:
            raise InputError("none of the selected traces is in the database")
    table, facts = region_table(con, traces)
    return breakdown_from(table, facts, traces, opts)


def breakdown_from(table: pd.DataFrame, facts: dict, traces: pd.DataFrame,
                   opts: BreakdownOptions) -> BreakdownResult:
    """The breakdown of :func:`region_table`'s per-window rows and facts (of one part of the traces,
    or of several parts joined with :func:`merge_region_tables`)."""
    return BreakdownResult(_aggregate(table, traces, opts), _notes(traces, facts))


def merge_region_tables(parts: list[tuple[pd.DataFrame, dict]]) -> tuple[pd.DataFrame, dict]:
    """:func:`region_table` results of disjoint sets of traces as one: rows in ``trace_id`` order (as
    one call over all the traces gives them), facts summed."""
    table = pd.concat([t for t, _ in parts], ignore_index=True)
    table = table.sort_values("trace_id", kind="stable").reset_index(drop=True)
    facts = [f for _, f in parts]
    bases = pd.concat([f["bases"] for f in facts])
    merged = {
        "bases": bases.groupby(level=0).sum() if len(bases) else facts[0]["bases"],
        "no_gpu": sorted(t for f in facts for t in f["no_gpu"]),
        "no_steps": sorted(t for f in facts for t in f["no_steps"]),
        "fwd_spans": sum(f["fwd_spans"] for f in facts),
    }
    return table, merged


# ---------------------------------------------------------------------------------------------
# Whole-trace GPU timeline (HTA's temporal breakdown, computed here)


def gpu_timeline(db: TraceDB, rank: int | None = None) -> pd.DataFrame:
    """Per trace: GPU span, busy and idle µs, HTA-style.

    Columns: ``trace_id``, ``rank``, ``span_us`` (first GPU op start to last GPU op end, kernels +
    memcpy + memset), ``busy_us`` (union of their intervals), ``idle_us`` (= span - busy, what
    HTA's ``get_temporal_breakdown`` reports as ``idle_time(us)``), ``kernel_us`` (sum of kernel
    durations), ``gpu_ops``, ``utilization_pct`` (100 * busy / span). Traces without GPU activity
    have NULL times.
    """
    con = db.con
    traces = selected_traces(con, rank)
    ops = con.execute(
        "SELECT trace_id, cat, ts_us, ts_us + dur_us AS end_us, dur_us FROM gpu_ops "
        "WHERE list_contains($ids, trace_id)", {"ids": _ids(traces)}).df()
    rows = []
    for tr in traces.itertuples(index=False):
        g = ops[ops["trace_id"] == tr.trace_id]
        row = {"trace_id": tr.trace_id, "rank": tr.rank, "span_us": None, "busy_us": None, "idle_us": None,
               "kernel_us": None, "gpu_ops": len(g), "utilization_pct": None}
        if len(g):
            busy = BusyTime(g["ts_us"].to_numpy(), g["end_us"].to_numpy())
            span = float(g["end_us"].max() - g["ts_us"].min())
            row.update(span_us=span, busy_us=busy.total, idle_us=span - busy.total,
                       kernel_us=float(g.loc[g["cat"] == "kernel", "dur_us"].sum()),
                       utilization_pct=100.0 * busy.total / span if span > 0 else None)
        rows.append(row)
    return pd.DataFrame(rows)
