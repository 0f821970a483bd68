"""What advise's figures are per: the windows of view ``iterations`` (``store/sql/views_iterations.sql``).

A trace's ProfilerSteps, else the iterations inferred from a label that repeats
(``Optimizer.step#<class>.step``, ``enumerate(DataLoader)#<class>.__next__``, a forward range or a
module's call), else the whole trace (its GPU span): a figure is then per step, per iteration or
per trace (:attr:`~trace_report.analyses.advise.checks.RankFacts.per`), never "per step" for a
trace that has none.

When one-time work (view ``startup_in_windows``) is most of a rank's windows, the findings that
are read from the windows (GPU idle by cause, utilisation, synchronisations, launches, data
loading, and the GPU-time findings: the GPU operations launched in the windows, view
``window_gpu_ops``) are computed again on its steady part, the windows that start after that work
(:func:`steady_part`), and say so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import duckdb

from trace_report.analyses.advise.checks import PER_TIME, RankFacts, Thresholds
from trace_report.analyses.common.breakdown_regions import BreakdownSelection, step_breakdown
from trace_report.analyses.common.iterations import INFERRED
from trace_report.store.tracedb import TraceDB


def window_notes(facts: Iterable[RankFacts]) -> list[str]:
    """One note per rank without ProfilerStep (and with GPU windows): the iterations inferred and
    from what, or that its figures are per trace."""
    notes = []
    for f in facts:
        if f.wall_us <= 0 or f.per == "step":
            continue
        if f.per == "iteration":
            notes.append(f"rank {f.rank}: no ProfilerStep; {f.windows} iterations inferred from the repeated "
                         f"{f.basis.removeprefix(INFERRED)} (view iterations): figures are per iteration")
        else:
            notes.append(f"rank {f.rank}: no ProfilerStep and no repeated Optimizer.step#, enumerate(DataLoader)#, "
                         "forward range or module call: one window (the first-to-last GPU op span), figures are "
                         "per trace")
    return notes


def time_word(facts: Iterable[RankFacts]) -> str:
    """What the ranks' "% of ..." is a share of (:data:`PER_TIME`): theirs when they agree, else
    ``step time``."""
    words = {PER_TIME[f.per] for f in facts if f.wall_us > 0}
    return words.pop() if len(words) == 1 else PER_TIME["step"]


STEADY_VARIABLE = "steady_from"
"""The DuckDB variable views ``analysis_windows`` and ``launch_bound`` read (views_verdicts.sql):
a MAP from trace_id to the end of its one-time work (µs, trace clock); while it is set, only the
windows that start at or after it count: the steady part."""


@contextmanager
def steady_from(con: duckdb.DuckDBPyConnection, ends: dict[int, float]) -> Iterator[None]:
    """Within the block, views ``analysis_windows`` and ``launch_bound`` keep only the windows of
    the traces ``ends`` names that start at or after its value (the other traces keep all)."""
    con.execute(f"SET VARIABLE {STEADY_VARIABLE} = MAP($k, $v)",
                {"k": [int(k) for k in ends], "v": [float(v) for v in ends.values()]})
    try:
        yield
    finally:
        con.execute(f"RESET VARIABLE {STEADY_VARIABLE}")


def steady_part(db: TraceDB, facts: dict[int, RankFacts], th: Thresholds,
                compute: Callable[[], dict[int, RankFacts]], rank: int | None) -> dict[int, RankFacts]:
    """The facts of the ranks whose one-time work dominates (over ``th.startup_dominant_pct`` of
    step time), computed again on their steady part: the windows that start after the last one-time
    interval in them (view ``startup_in_windows``). ``RankFacts.steady`` says which (``steps 2-6``).
    A rank with no window after it (one window: the GPU span) has no steady part and is left out."""
    dominant = [r for r, f in facts.items() if f.pct_of_step(f.startup_us) > th.startup_dominant_pct]
    if not dominant:
        return {}
    con = db.con
    ends = dict(con.execute("SELECT trace_id, max(startup_end_us) FROM startup_in_windows "
                            "WHERE list_contains($ranks, rank) GROUP BY trace_id", {"ranks": dominant}).fetchall())
    with steady_from(con, ends):
        spans = {int(r): (lo, hi, steps) for r, lo, hi, steps, n in con.execute(
            "SELECT rank, min(step), max(step), list(step ORDER BY step), count(*) FROM analysis_windows "
            "WHERE list_contains($ranks, rank) AND step IS NOT NULL GROUP BY rank", {"ranks": dominant}).fetchall()
            if n}
        if not spans:
            return {}
        steady = compute()
    bd = step_breakdown(db, BreakdownSelection(rank=rank, by_rank=True, by_step=True)).frame
    out = {}
    for r, (lo, hi, steps) in spans.items():
        s = steady[r]
        s.steady = f"{s.per}s {lo}-{hi}" if hi != lo else f"{s.per} {lo}"
        mine = bd[(bd["rank"] == r) & bd["step"].isin(steps)]
        s.data_loading_wall_us = float(mine.loc[mine["region"] == "data_loading", "wall_us"].sum())
        s.data_loading_window_us = float(mine["wall_us"].sum())
        out[r] = s
    return out


def startup_notes(facts: dict[int, RankFacts], steady: dict[int, RankFacts], th: Thresholds) -> list[str]:
    """A note per rank whose one-time work dominates: which figures are on its steady part."""
    notes = []
    for r, f in facts.items():
        pct = f.pct_of_step(f.startup_us)
        if pct <= th.startup_dominant_pct:
            continue
        head = f"rank {r}: one-time start-up work is {pct:.3g}% of the analysed time: "
        if r in steady:
            notes.append(head + f"GPU idle, utilisation, synchronisation, launch, data-loading and GPU-time "
                         f"findings are computed on the steady part ({steady[r].steady}, the windows after it)")
        else:
            notes.append(head + "every other figure here includes it (computed over the whole window, not its "
                         "steady part: no window starts after it)")
    return notes
