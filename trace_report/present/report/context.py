"""What the report's section builders read: the options of the page (:class:`ReportOptions`), one
:class:`ReportContext` per set of traces in view, and the helpers several sections share (the
traces of each capture run, one frame per run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd

from trace_report.analyses.advise import AdviceResult
from trace_report.analyses.flags import FlagsOptions, flags_summary
from trace_report.errors import TraceReportError
from trace_report.store.tracedb import TraceDB


@dataclass(frozen=True)
class ReportOptions:
    """``title`` of the page; ``limit``: rows of the top-kernels chart and table; ``step``: the
    ProfilerStep of the timeline (default: the median one); ``rank``: analyses of that rank only."""

    title: str | None = None
    limit: int = 20
    step: int | None = None
    rank: int | None = None
    merge_runs: bool = False
    sources: tuple[str, ...] = ()
    """The paths the report was made from (set by :func:`build_report`): the timeline's slice command."""


@dataclass
class ReportContext:
    """The input of every section's ``build(ctx) -> Section | None``: the handle (all traces, or
    one run's inside :meth:`TraceDB.scope`), the page's options, whether the experiments' own
    section belongs here, advise's result (computed once per set of traces: the headline and the
    Advice section show it; None where no section needs it) and the kernel-class summary per run
    (``classes()``: computed once when first asked, charted then tabled; None: each asks)."""

    db: TraceDB
    opts: ReportOptions
    experiments: bool = False
    advice: AdviceResult | TraceReportError | None = None
    classes: Callable[[], tuple[pd.DataFrame, list[str]]] | None = None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.db.con


def scalar(con: duckdb.DuckDBPyConnection, query: str) -> Any:
    """The first value of the first row of ``query`` (None without rows)."""
    rows = con.execute(query).fetchall()
    return rows[0][0] if rows else None


def trace_runs(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, ...]]:
    """``{run_key: trace ids}`` when the traces belong to capture runs (table ``run_traces``),
    else ``{}``."""
    try:  # of the traces in view: one run's alone inside TraceDB.scope
        rows = con.execute("SELECT run_key, list(trace_id ORDER BY trace_id) FROM run_traces "
                           "WHERE trace_id IN (SELECT trace_id FROM traces) GROUP BY 1 ORDER BY 1").fetchall()
    except duckdb.CatalogException:
        return {}
    return {str(k): tuple(int(t) for t in ids) for k, ids in rows}


def per_run(runs: dict[str, tuple[int, ...]], build: Callable[[tuple[int, ...] | None], pd.DataFrame]) -> pd.DataFrame:
    """``build`` for every run, with a ``run`` column first (or once, for every trace, when there
    are fewer than two runs)."""
    if len(runs) < 2:
        return build(None)
    parts = [build(ids).assign(run=key) for key, ids in runs.items()]
    parts = [p for p in parts if len(p)]
    if not parts:
        return build(None).iloc[:0]
    frame = pd.concat(parts, ignore_index=True)
    return frame[["run", *[c for c in frame.columns if c != "run"]]]


def flags_by_run(db: TraceDB, opts: ReportOptions,
                  runs: dict[str, tuple[int, ...]]) -> tuple[pd.DataFrame, list[str]]:
    """``flags_summary(db)`` (one per run, with a ``run`` column, when there are several runs: each
    run's share of its own GPU time) and the notes."""
    notes: list[str] = []

    def build(ids: tuple[int, ...] | None) -> pd.DataFrame:
        summary, got = flags_summary(db, FlagsOptions(rank=opts.rank, trace_ids=ids))
        notes.extend(got)
        return summary

    return per_run(runs, build), list(dict.fromkeys(notes))
