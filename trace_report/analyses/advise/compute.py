"""The computation of ``advise`` (the package docstring describes the checks)."""


from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import duckdb
import pandas as pd

from trace_report.analyses.advise import AdviseOptions, gpu_bound, window_gpu
from trace_report.analyses.advise.anchors import check_anchors, load_anchor_facts
from trace_report.analyses.advise.checks import (
    ADVICE_COLUMNS,
    PER_TIME,
    Checker,
    RankFacts,
    Thresholds,
    ms_text,
    pct_text,
)
from trace_report.analyses.advise.startup import evidence_text, startup
from trace_report.analyses.advise.windows import startup_notes, steady_part, time_word, window_notes
from trace_report.analyses.common.breakdown_regions import BreakdownSelection, step_breakdown
from trace_report.analyses.common.launch_queue import queue_rows
from trace_report.analyses.common.selection import selected_traces, trace_ids
from trace_report.analyses.common.utilization import step_overlap_note
from trace_report.store.kept_views import SHARED_VIEWS, materialized
from trace_report.store.tracedb import TraceDB

__all__ = ["ADVICE_COLUMNS", "AdviceResult", "Thresholds", "advise", "memory_peaks"]

# Operators whose kernels could use tensor cores (torch-tb-profiler TC_OP_Allowlist, abridged).
TC_ELIGIBLE_OPS = (
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
    "aten::cudnn_convolution", "aten::conv_transpose2d", "aten::addmm", "aten::addmv", "aten::matmul",
    "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
)
# Idle-time findings: their savings are parts of the GPU idle time, the rest is low utilisation's.
IDLE_FINDINGS = ("data_loading", "host_sync", "launch_bound", "cpu_bound")


@dataclass
class AdviceResult:
    """``frame``: findings (:data:`ADVICE_COLUMNS`, ``ranks`` instead of ``rank`` when aggregated),
    sorted by ``est_saving_ms_per_step``; ``notes``: what was checked or skipped; ``verdict``: one
    sentence naming the biggest finding (or why there is none)."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    verdict: str = ""


def memory_peaks(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pd.DataFrame:
    """Peak ``Total Allocated`` / ``Total Reserved`` bytes per (trace, GPU) from ``[memory]`` events,
    with the device's ``totalGlobalMem`` from the trace metadata (``deviceProperties``).

    The events are view ``memory_events``, as the ``memory`` command and the report's Memory
    section read them: ``allocated_bytes`` of the events that carry ``Total Allocated`` (NaN for a
    device without), devices with an id >= 0 (a CUDA event without ``Device Id`` is ``cuda:0``
    there, the CPU's id is -1)."""
    peaks = con.execute(
        "SELECT trace_id, device_id AS device, "
        "       CAST(max(allocated_bytes) FILTER (WHERE totals_known) AS DOUBLE) AS allocated_bytes, "
        "       CAST(max(reserved_bytes) AS DOUBLE) AS reserved_bytes "
        "FROM (SELECT *, TRY_CAST(split_part(device, ':', 2) AS BIGINT) AS device_id FROM memory_events "
        "      WHERE list_contains($ids, trace_id)) "
        "WHERE device_id >= 0 GROUP BY trace_id, device_id",
        {"ids": ids}).df()
    meta = dict(con.execute("SELECT trace_id, metadata FROM traces").fetchall())
    peaks["capacity_bytes"] = [_capacity(meta.get(t), d) for t, d in zip(peaks["trace_id"], peaks["device"],
                                                                         strict=True)]
    return peaks


def _capacity(metadata: str | None, device: int) -> float | None:
    try:
        props = json.loads(metadata or "{}").get("deviceProperties") or []
    except (TypeError, ValueError):
        return None
    for p in props:
        if p.get("id") == device and p.get("totalGlobalMem"):
            return float(p["totalGlobalMem"])
    return None


def _by_rank(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> dict[int, dict]:
    """Rows of a per-rank query as {rank: {column: value}}."""
    rel = con.execute(sql, params or {})
    cols = [d[0] for d in rel.description]
    return {int(r[0]): dict(zip(cols, r, strict=True)) for r in rel.fetchall() if r[0] is not None}


def _facts(db: TraceDB, traces: pd.DataFrame, rank: int | None, th: Thresholds | None = None) -> dict[int, RankFacts]:
    """Every rank's :class:`RankFacts`, one query per view (the anchors' rules with ``th``)."""
    con, ids = db.con, trace_ids(traces)
    facts = {int(r): RankFacts(rank=int(r)) for r in sorted(traces["rank"].dropna().unique())}
    for r, row in _by_rank(con, "SELECT * FROM gpu_idle_by_cause").items():
        if r in facts:
            f = facts[r]
            f.windows, f.wall_us, f.busy_us, f.basis = int(row["windows"]), float(row["wall_us"] or 0), \
                float(row["busy_us"] or 0), str(row["basis"])
            f.step_us = float(row["step_us"] or 0)
            f.idle = row
    recorded = _by_rank(con, "SELECT * FROM window_recorded")
    for r, f in facts.items():
        if f.wall_us > 0:
            f.recorded_us = float(recorded.get(r, {}).get("recorded_us") or 0.0)
    launches = _by_rank(con, "SELECT t.rank, sum(l.gpu_ops) AS gpu_ops, "
                        "100.0 * sum(l.shorter_than_launch) / nullif(sum(l.gpu_ops), 0) AS shorter_pct, "
                        "median(l.median_gpu_us) AS median_gpu_us, median(l.median_launch_us) AS median_launch_us, "
                        "sum(l.graph_ops) AS graph_ops "
                        "FROM launch_bound l JOIN traces t USING (trace_id) GROUP BY t.rank")
    split = _by_rank(con, "SELECT * FROM launch_cpu_split_of($d)", {"d": (th or Thresholds()).dispatch_us})
    culprits: dict[int, dict] = {}
    for row in con.execute("SELECT * FROM top_name_of('culprit_launches')").fetchall():
        culprits.setdefault(int(row[0]), {})[str(row[1])] = dict(zip(("name", "n", "us", "where"), row[2:],
                                                                     strict=True))
    loaders = _by_rank(con, "SELECT t.rank, arg_max(e.name, e.dur_us) FILTER (WHERE e.name LIKE "
                       "'enumerate(DataLoader)#%') AS loader, count(*) FILTER (WHERE e.name LIKE 'aten::%pin_memory') "
                       "AS pin_ops FROM events e JOIN traces t USING (trace_id) WHERE list_contains($ids, e.trace_id) "
                       "AND (e.name LIKE 'enumerate(DataLoader)#%' OR e.name IN ('aten::pin_memory', "
                       "'aten::_pin_memory')) GROUP BY 1", {"ids": ids})
    q = queue_rows(db, rank, steps_only=False)
    busiest = dict(con.execute(  # each rank's stream with the most GPU operations, in one scan
        "SELECT rank, arg_max(stream, n) FROM (SELECT t.rank, g.stream, count(*) AS n FROM gpu_ops g "
        "JOIN traces t USING (trace_id) WHERE g.stream IS NOT NULL GROUP BY ALL) GROUP BY rank").fetchall())
    # each read by several queries: computed once (the GPU operations of the windows: of their steady
    # part when steady_from is set)
    with materialized(con, ("host_sync_calls", "host_call_where", *window_gpu.VIEWS)):
        syncs = _by_rank(con, "SELECT * FROM host_syncs_by_rank")
        window_gpu.load(con, ids, facts)
        load_anchor_facts(con, ids, facts, th)
    bd = step_breakdown(db, BreakdownSelection(rank=rank, by_rank=True)).frame
    devices = _by_rank(con, "SELECT t.rank, max(a.cc) AS cc, bool_or(coalesce(a.vendor = 'AMD', false)) AS amd, "
                       "string_agg(DISTINCT a.evidence, '; ') FILTER (WHERE a.source = 'kernel names') AS inferred "
                       "FROM device_arch a JOIN traces t USING (trace_id) GROUP BY 1")
    eligible = _by_rank(con, "SELECT t.rank, count(*) AS n FROM cpu_ops c JOIN traces t USING (trace_id) "
                        "WHERE list_contains($ids, c.trace_id) AND list_contains($ops, c.name) GROUP BY 1",
                        {"ids": ids, "ops": list(TC_ELIGIBLE_OPS)})
    for r, cat, us in con.execute("SELECT rank, idle_category, sum(idle_us) FROM gpu_idle_breakdown "
                                  "GROUP BY ALL").fetchall():
        if r is not None and int(r) in facts:
            facts[int(r)].hta_idle[str(cat)] = float(us or 0.0)
    _startup_facts(db, ids, facts)
    for r, f in facts.items():
        f.launch, f.syncs = launches.get(r, {}), syncs.get(r, {})
        f.cpu_split, f.culprits, f.loader = split.get(r, {}), culprits.get(r, {}), loaders.get(r, {})
        f.mean_queue = _busiest_queue(q, busiest.get(r), r)
        # the breakdown's data_loading region, as a share of the breakdown's windows (the steps, or
        # the whole trace without them: "% of the trace's span")
        f.data_loading_wall_us = float(bd.loc[(bd["rank"] == r) & (bd["region"] == "data_loading"), "wall_us"].sum())
        f.data_loading_window_us = float(bd.loc[bd["rank"] == r, "wall_us"].sum())
        dev = devices.get(r, {})
        f.cc, f.amd, f.device_inferred = dev.get("cc"), bool(dev.get("amd")), dev.get("inferred")
        f.eligible_ops = int(eligible.get(r, {}).get("n") or 0)
        f.ranks = len(facts)
    return facts


def _startup_facts(db: TraceDB, ids: list[int], facts: dict[int, RankFacts]) -> None:
    """Each rank's one-time work inside its windows (view ``startup_in_windows``) and the calls
    behind it (:func:`trace_report.analyses.advise.startup.startup`)."""
    with materialized(db.con, ("startup_evidence",)):  # read by both queries: computed once
        found = startup(db, ids)
        if found.windows.empty:
            return
        rows = db.con.execute("SELECT rank, list(trace_id), sum(one_time_us) FROM startup_in_windows "
                              "WHERE list_contains($ids, trace_id) GROUP BY rank", {"ids": ids}).fetchall()
    for r, traces, us in rows:
        if r is not None and int(r) in facts:
            f = facts[int(r)]
            f.startup_us = float(us or 0.0)
            mine = found.evidence[found.evidence["trace_id"].isin(traces)]
            f.startup_evidence, f.startup_first = evidence_text(mine), evidence_text(mine, limit=1)
    ranks = dict(db.con.execute("SELECT trace_id, rank FROM traces WHERE list_contains($ids, trace_id)",
                                {"ids": ids}).fetchall())
    for w in found.windows.itertuples(index=False):  # the profiled windows, start-up outside the steps too
        f = facts.get(int(ranks[w.trace_id])) if ranks.get(w.trace_id) is not None else None
        if f is None:
            continue
        f.window_us += float(w.window_end_us - w.window_start_us)
        f.window_startup_us += float(w.one_time_us)
        if not f.startup_evidence:
            mine = found.evidence[found.evidence["trace_id"] == w.trace_id]
            f.startup_evidence, f.startup_first = evidence_text(mine), evidence_text(mine, limit=1)


def _busiest_queue(q: pd.DataFrame, busiest: int | None, rank: int) -> float | None:
    """Mean launch-queue length of the rank's stream with the most GPU operations (``busiest``;
    HTA's queue length, queue.sql); the rank's largest mean without that stream; None without
    launches."""
    mine = q[q["rank"] == rank]
    if mine.empty:
        return None
    on = mine[mine["stream"] == busiest]
    return float((on if len(on) else mine)["mean_queue_length"].max())


def _check_rank(check: Checker, f: RankFacts, peaks: pd.DataFrame, steady: RankFacts | None = None) -> None:
    """The checks of one rank; those read from the windows (GPU idle, launches, data loading and every
    GPU-time finding) on ``steady`` (its steady part) when given."""
    before = len(check.rows)
    w = steady or f
    check.pageable_memcpy(w)
    check.exposed_communication(w)
    check.data_loading(w)
    check.host_sync(w)
    check.launch_bound(w)
    check.layout(w)
    check.tensor_cores(w)
    check.startup(f)
    check_anchors(check, f)
    gpu_bound.check(check, w)
    explained = sum(check.saving_us[(f.rank, r["finding"])] for r in check.rows[before:]
                    if r["finding"] in IDLE_FINDINGS)
    check.utilization(w, explained)
    check.memory(f, peaks)


def _across_ranks(frame: pd.DataFrame, n_ranks: int) -> pd.DataFrame:
    """One row per finding: the ranks it fired on and the values and evidence of the rank where it
    would save most (the lowest value for low utilisation when no saving is known)."""
    if frame.empty or n_ranks <= 1:
        return frame
    rows = []
    for _, g in frame.groupby("finding", sort=False):
        key = g["est_saving_ms_per_step"].fillna(-1.0)
        worst = g.loc[key.idxmax()] if key.max() >= 0 else g.loc[g["value"].idxmax()]
        row = worst.to_dict()
        row["rank"] = [int(r) for r in g["rank"]]
        row["evidence"] = f"{len(g)} of {n_ranks} ranks; rank {int(worst['rank'])}: {worst['evidence']}"
        rows.append(row)
    return pd.DataFrame(rows, columns=ADVICE_COLUMNS).rename(columns={"rank": "ranks"})


def _rank_and_filter(frame: pd.DataFrame, th: Thresholds, all_findings: bool) -> tuple[pd.DataFrame, int]:
    """Sorted by saving (findings without one last); findings saving < min_saving_pct of step time
    dropped unless ``all_findings``. Returns the frame and how many were dropped."""
    if frame.empty:
        return frame, 0
    keep = frame["saving_pct_of_step"].isna() | (frame["saving_pct_of_step"] >= th.min_saving_pct)
    dropped = int((~keep).sum())
    if not all_findings:
        frame = frame[keep]
    order = frame["est_saving_ms_per_step"].fillna(-1.0)
    # a symptom after every finding with a cause: its saving is only the idle time they leave unexplained
    order = order.where((frame["finding"] != "low_gpu_utilization") | (order < 0), -0.5)
    dominant = (frame["finding"] == "startup_in_window") & (frame["value"] > th.startup_dominant_pct)
    order = order.where(~dominant, math.inf)  # what the window mostly measured comes first
    return frame.assign(_o=order).sort_values("_o", ascending=False, kind="stable").drop(columns="_o") \
        .reset_index(drop=True), dropped


def _verdict(frame: pd.DataFrame, facts: dict[int, RankFacts], th: Thresholds) -> str:
    if len(frame):
        top = frame.iloc[0]
        saving = top["est_saving_ms_per_step"]
        if isinstance(saving, float) and not math.isnan(saving):
            per = str(top.get("per") or "step")
            return (f"Biggest saving: {top['title']} ({top['finding']}), about {ms_text(saving * 1e3)} per {per} "
                    f"({pct_text(top['saving_pct_of_step'])} of {PER_TIME[per]}).")
        return f"Finding: {top['title']} ({top['finding']})."
    busy = [f.util_pct for f in facts.values() if f.wall_us > 0 and f.idle]
    if not busy:
        return "No finding: no GPU activity to judge."
    if all(f.unrecorded(th) for f in facts.values() if f.wall_us > 0 and f.idle):
        return (f"No finding: the events recorded in the windows (CPU operators, runtime calls, GPU operations) "
                f"cover under {th.min_recorded_pct:g}% of {time_word(facts.values())}: nothing the trace shows "
                "to judge.")
    if min(busy) >= 100 - th.low_utilization_pct:
        return (f"GPU-bound: the GPU is busy {min(busy):.3g}% of step time or more and no finding would save "
                f"{th.min_saving_pct:g}% of it; start from the top kernels (trace-report top-kernels, flags).")
    return f"No finding would save {th.min_saving_pct:g}% of step time or more."


def advise(db: TraceDB, *, rank: int | None = None, by_rank: bool = False, thresholds: Thresholds | None = None,
           all_findings: bool = False) -> AdviceResult:
    """Findings (columns :data:`ADVICE_COLUMNS`; ``value`` in ``unit``, compared with ``threshold``;
    ``est_saving_ms_per_step`` in ms per step, ``saving_pct_of_step`` in % of step time), sorted by
    saving. With several ranks and not ``by_rank``, one row per finding: ``ranks`` lists the ranks
    it fired on and the other columns are the rank's where it saves most. ``all_findings`` keeps
    findings under 2% of step time. No rows and a note when nothing crosses a threshold."""
    con = db.con
    th = thresholds or Thresholds()
    traces = selected_traces(con, rank)
    with materialized(con, SHARED_VIEWS):
        facts = _facts(db, traces, rank, th)
        steady = steady_part(db, facts, th, lambda: _facts(db, traces, rank, th), rank)
        peaks = memory_peaks(con, trace_ids(traces)).merge(traces[["trace_id", "rank"]], on="trace_id")
    check = Checker(th)
    check.steady = {r: s.steady for r, s in steady.items()}
    notes: list[str] = []
    for r, f in facts.items():
        _check_rank(check, f, peaks[peaks["rank"] == r], steady.get(r))
        if f.trace_gpu_us <= 0:
            notes.append(f"rank {r}: no GPU activity recorded; GPU checks skipped")
        elif f.gpu_us <= 0:
            notes.append(f"rank {r}: no GPU operation launched inside the {f.per}s; GPU-time checks skipped")
        elif f.cc is None or math.isnan(f.cc):
            notes.append(f"rank {r}: compute capability unknown (no deviceProperties); tensor-core check skipped")
        elif f.device_inferred:
            notes.append(f"rank {r}: no deviceProperties; compute capability {f.cc:.1f} inferred from the kernel "
                         f"names ({f.device_inferred}): a lower bound, the device may be newer")
    notes.extend(window_notes(facts.values()))
    notes.extend(check.notes)
    notes.extend(startup_notes(facts, steady, th))
    overlap_note = step_overlap_note(db, rank)
    if overlap_note:
        notes.append(overlap_note)
    if any(f.trace_gpu_us > 0 for f in facts.values()) and peaks.empty:
        notes.append("memory check skipped: no [memory] events (profile_memory=True) in the database")
    frame = pd.DataFrame(check.rows, columns=ADVICE_COLUMNS)
    if not by_rank:
        frame = _across_ranks(frame, len(facts))
    frame, dropped = _rank_and_filter(frame, th, all_findings)
    if dropped and not all_findings:
        notes.append(f"{dropped} finding(s) would save under {th.min_saving_pct:g}% of {time_word(facts.values())}: "
                     "shown with --all")
    if frame.empty:
        checked = "; ".join(dict.fromkeys(check.checked)) or "nothing measurable"
        notes.append(f"no findings: every check is within its threshold ({checked})")
    return AdviceResult(frame, notes, _verdict(frame, facts, th))


def advise_findings(db: TraceDB, options: AdviseOptions) -> AdviceResult:
    """:func:`advise` with ``options`` (the declaration's compute)."""
    return advise(db, rank=options.rank, by_rank=options.by_rank, all_findings=options.all_findings)
