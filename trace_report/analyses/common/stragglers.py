"""Stragglers: step time per rank, the spread between ranks, the slowest rank of each step.

For each ProfilerStep number present on several ranks of one run: ``step_us`` is the step's
duration on each rank (the ``ProfilerStep#N`` annotation, CPU side: what the training loop
waited for), ``behind_us`` / ``behind_pct`` how much longer than the fastest rank of that step
took (percent of the fastest), ``slowest`` marks the slowest rank. The per-step spread (max - min,
and relative to the fastest) is in the notes. Query: ``analyses/common/stragglers.sql``, over
view ``step_stragglers`` (``store/sql/views_stragglers.sql``, which advise reads too).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

STRAGGLER_COLUMNS = ["step", "rank", "step_us", "behind_us", "behind_pct", "slowest"]


@dataclass(frozen=True)
class StragglerOptions:
    """``rank``: only that rank's rows (compared with every rank)."""

    rank: int | None = None


def spread_notes(frame: pd.DataFrame) -> list[str]:
    """One line per step on several ranks: spread (max - min) in µs and percent of the fastest,
    and the slowest rank. ``frame``: the raw rows of ``stragglers.sql``."""
    out = []
    for step, g in frame[frame["ranks"] > 1].groupby("step", sort=True):
        slow = g.loc[g["slowest"], "rank"].tolist()
        first = g.iloc[0]
        out.append(f"step {step}: {int(first['ranks'])} ranks, spread {first['spread_us']:,.1f} us "
                   f"({first['spread_pct']:.1f}% of the fastest), slowest rank {', '.join(map(str, slow))}")
    return out


def stragglers(db: TraceDB, options: StragglerOptions | None = None) -> Result:
    """Rows ``step``, ``rank``, ``step_us``, ``behind_us`` (µs), ``behind_pct``, ``slowest``
    (bool); ``trace_id`` too when several traces share a rank. Notes: the spread per step.
    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``."""
    opts = options or StragglerOptions()
    db.check_rank(opts.rank)
    raw = db.con.execute(sql_text("stragglers.sql", __package__), {"rank": opts.rank}).df()
    notes = spread_notes(raw)
    if raw.empty:
        notes.append("no ProfilerSteps: step times need torch.profiler's schedule (ProfilerStep#N)")
    elif not (raw["ranks"] > 1).any():
        notes.append("each step is on one rank only: nothing to compare")
    frame = raw[[*STRAGGLER_COLUMNS, "trace_id"]].astype({"step": "int64", "rank": "int64", "slowest": "bool"})
    return Result(drop_single_trace_ids(frame).reset_index(drop=True), notes)
