"""The result every analysis returns: a frame and notes for the user."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Result:
    """``frame``: the rows (columns named with their units); ``notes``: what the user should
    know to read them (printed as ``note:`` lines by the CLI)."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def drop_single_trace_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its ``trace_id`` column when each rank has one trace (the usual case);
    kept when several traces share a rank (several runs), so their rows stay apart."""
    if "trace_id" not in frame or frame.empty:
        return frame.drop(columns=["trace_id"], errors="ignore")
    per_rank = frame.groupby("rank", dropna=False)["trace_id"].nunique()
    return frame.drop(columns=["trace_id"]) if (per_rank <= 1).all() else frame
