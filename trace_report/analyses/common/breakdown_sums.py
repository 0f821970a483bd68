"""Breakdown rows from the per-window rows of :func:`~trace_report.analyses.common.breakdown_regions.region_table`:
sums per step, rank and region, the percentages, and the notes for the user (see
:mod:`~trace_report.analyses.common.breakdown_regions` for what the columns mean and how time is
attributed). :class:`BreakdownSelection` is what the sums are of: the command's options
(``trace-report breakdown``) and the other commands that read the breakdown (advise, compare) give one."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from trace_report.analyses.common.regions import REGIONS

BEFORE_FIRST_STEP = "before_first_step"
"""The row of kernels launched before the first ProfilerStep (or whose launch predates the trace):
no wall time of their own, never counted in the first step (view ``kernel_steps``)."""
BREAKDOWN_COLUMNS = ["step", "region", "wall_us", "wall_pct", "gpu_us", "gpu_pct", "kernels",
                     "idle_us", "cpu_us"]
STEP_SPAN_COLUMNS = ["step_cpu_us", "step_gpu_us", "step_us"]
"""The group's steps as the GPU sees them (view ``step_time``, summed like ``wall_us``): their
ProfilerStep CPU spans, the GPU's step periods (the work launched in each step, by correlation
id) and step time, the longer of the two per step; the same on every row of a group, NULL for a
trace without ProfilerStep."""


@dataclass(frozen=True)
class BreakdownSelection:
    """The traces and groups of a breakdown: ``by_step``: one group of rows per step (else summed
    over steps); ``rank``: only that rank; ``by_rank``: one group per rank (else summed over ranks);
    ``trace_ids``: only these traces (one run of several)."""

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


def breakdown_notes(traces: pd.DataFrame, facts: dict) -> list[str]:
    notes = []
    label = dict(zip(traces["trace_id"], traces["path"], strict=True))
    if facts["no_steps"]:
        notes.append(f"no ProfilerStep in {len(facts['no_steps'])} trace(s): each is one window (step empty)")
    clipped, nested = facts["overlaps"]
    if clipped or nested:
        notes.append(f"ProfilerSteps overlap: {clipped} step(s) start before an earlier one ends and are counted "
                     f"from its end, {nested} lie inside earlier ones and count no wall time (their kernels are "
                     "theirs); each instant is counted once, as in GPU utilisation")
    if facts["fwd_spans"]:
        notes.append("no forward range named in some steps: forward runs from the step start (or the previous "
                     "backward pass) to the first backward op (torch-tb-profiler conventions)")
    bases = facts["bases"]
    for basis, text in (("gpu_annotation", "placed by the gpu_user_annotation enclosing them"),
                        ("kernel_time", "placed by the region active at their start"),
                        ("no_launch", "counted as 'other'"),
                        ("outside_steps", "outside every step (ProfilerStep or inferred iteration), not in the "
                                          "table"),
                        (BEFORE_FIRST_STEP, "before the first step (or before the trace began: no "
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


_TIMES = ["wall_us", "gpu_us", "idle_us", "cpu_us"]


def _sums(t: pd.DataFrame, keys: list[str], steps_from: str, steps_how: str) -> pd.DataFrame:
    """Per group of ``keys`` (NULL keys kept, groups in first-seen order): the times summed (NULL
    when every row is NULL), ``kernels`` summed, and ``steps`` (``steps_from`` counted or summed)."""
    g = t.groupby(keys, dropna=False, sort=False)
    agg = g[_TIMES].sum(min_count=1)
    agg["kernels"] = g["kernels"].sum()
    agg["steps"] = g[steps_from].agg(steps_how)
    return agg.reset_index()


def _step_spans(spans: pd.DataFrame | None, traces: pd.DataFrame, group: list[str]) -> pd.DataFrame:
    """:data:`STEP_SPAN_COLUMNS` per group of the breakdown (``group``: its keys)."""
    cols = ["trace_id", "window_id", "step", "cpu_us", "gpu_us", "step_us"]
    s = (spans[cols] if spans is not None else pd.DataFrame(columns=cols)).merge(
        traces[["trace_id", "rank"]], on="trace_id")
    s = s.rename(columns={"cpu_us": "step_cpu_us", "gpu_us": "step_gpu_us"})
    s[STEP_SPAN_COLUMNS] = s[STEP_SPAN_COLUMNS].astype(float)
    if not group:
        return pd.DataFrame({c: [s[c].sum(min_count=1)] for c in STEP_SPAN_COLUMNS})
    s["step"] = s["step"].astype(float)
    return s.groupby(group, dropna=False, sort=False)[STEP_SPAN_COLUMNS].sum(min_count=1).reset_index()


def _aggregate(table: pd.DataFrame, traces: pd.DataFrame, opts: BreakdownSelection,
               spans: pd.DataFrame | None = None) -> pd.DataFrame:
    t = table.merge(traces[["trace_id", "rank"]], on="trace_id")
    t["window"] = t["trace_id"].astype(str) + ":" + t["window_id"].astype(str)
    keys = (["rank"] if opts.by_rank else []) + (["trace_id", "window_id", "step"] if opts.by_step else [])
    agg = _sums(t, keys + ["region"], "window", "nunique")
    if opts.by_step and not opts.by_rank:  # the same step number on several ranks adds up
        agg = _sums(agg, ["step", "region"], "steps", "sum")
    if not opts.by_step:
        agg["step"] = None
    group = (["rank"] if opts.by_rank else []) + (["step"] if opts.by_step else [])
    agg["wall_pct"] = _pct(agg, "wall_us", group)
    agg["gpu_pct"] = _pct(agg, "gpu_us", group)
    step_spans = _step_spans(spans, traces, group)
    if group:
        agg = agg.astype({"step": float}).merge(step_spans, on=group, how="left")
    else:
        agg = agg.assign(**{c: step_spans[c].iloc[0] for c in STEP_SPAN_COLUMNS})
    agg["region_order"] = agg["region"].map({r: i for i, r in enumerate(REGIONS)}).fillna(-1)
    agg = agg.sort_values(group + ["region_order"], na_position="first", kind="stable")
    cols = (["rank"] if opts.by_rank else []) + BREAKDOWN_COLUMNS + ([] if opts.by_step else ["steps"]) \
        + STEP_SPAN_COLUMNS
    out = agg[cols].reset_index(drop=True)
    out["kernels"] = out["kernels"].astype("int64")
    out["step"] = out["step"].astype("Int64")  # a step number, NULL for whole-trace and before_first_step rows
    return out


def breakdown_from(table: pd.DataFrame, facts: dict, traces: pd.DataFrame,
                   opts: BreakdownSelection, spans: pd.DataFrame | None = None) -> BreakdownResult:
    """The breakdown of :func:`region_table`'s per-window rows and facts (of one part of the traces,
    or of several parts joined with :func:`merge_region_tables`); ``spans``: the traces' rows of
    view ``step_time`` (:data:`STEP_SPAN_COLUMNS`; None: NULL there)."""
    return BreakdownResult(_aggregate(table, traces, opts, spans), breakdown_notes(traces, facts))


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
        "overlaps": [sum(f["overlaps"][0] for f in facts), sum(f["overlaps"][1] for f in facts)],
    }
    return table, merged
