"""The report's section of the deeper analyses: the critical path of one step, kernel
launch statistics, repeated kernel sequences and the nn.Module tree, each a short table from the
command of the same name (same function, same numbers), each left out where it does not apply.

The critical path is computed for one step only (the timeline's: ``--step``, else the median
ProfilerStep of the first trace), so the page stays as quick to build as the other sections on
large traces; ``trace-report critical-path`` gives every step.
"""

from __future__ import annotations

import pandas as pd

from trace_report.analyses.critical_path import CriticalPathOptions, critical_path
from trace_report.declare import Command, commands, option_names
from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import TOP_ROWS, Section, attempt, table_html
from trace_report.store.tracedb import TraceDB

ROWS = 10
"""Rows of each table (the commands give all of them); the first :data:`TOP_ROWS` show, the rest
are folded into a ``<details>``."""


def median_step(db: TraceDB, rank: int | None) -> int | None:
    """The median ProfilerStep number of the first trace (of ``rank``), None without steps."""
    rows = db.con.execute(
        "SELECT s.step FROM steps s JOIN traces t USING (trace_id) WHERE ($rank IS NULL OR t.rank = $rank) "
        "AND s.step IS NOT NULL "
        "AND s.trace_id = (SELECT min(trace_id) FROM traces WHERE $rank IS NULL OR rank = $rank) ORDER BY s.step",
        {"rank": rank}).fetchall()
    return int(rows[len(rows) // 2][0]) if rows else None


def _critical_path(sec: Section, db: TraceDB, rank: int | None, step: int | None) -> None:
    chosen = step if step is not None else median_step(db, rank)
    result = critical_path(db, CriticalPathOptions(rank=rank, step=chosen, top=5))
    if result.frame.empty:
        return
    title = f"<h3>Critical path (step {chosen if chosen is not None else 'all'})</h3>"
    sec.tail += title + table_html(result.frame, top=TOP_ROWS)
    if not result.operators.empty:
        sec.tail += "<h4>Operators on the path</h4>" + table_html(result.operators.head(ROWS), top=TOP_ROWS)
    sec.notes += [f"critical path: {n}" for n in result.notes]


def _table(sec: Section, title: str, frame: pd.DataFrame | None, notes: list[str], what: str) -> None:
    if frame is not None and not frame.empty:
        sec.tail += f"<h3>{title}</h3>" + table_html(frame.head(ROWS), top=TOP_ROWS)
        sec.notes += [f"{what}: {n}" for n in notes]


def deeper_section(db: TraceDB, rank: int | None, step: int | None) -> Section | None:
    """The section, or None when no part applies; None for traces without GPU operations (the
    CPU-only captures: their operators are in the Operators section)."""
    if not db.scalar("SELECT count(*) FROM gpu_ops g JOIN traces t USING (trace_id) "
                     "WHERE $rank IS NULL OR t.rank = $rank", {"rank": rank}):
        return None
    sec = Section("Critical path, launches, sequences, modules")
    one_rank = rank if rank is not None else min(db.ranks(), default=None)
    attempt(sec, "critical path", lambda: _critical_path(sec, db, one_rank, step))
    for cmd in commands().values():
        if cmd.report is not None:
            got = attempt(sec, cmd.name, lambda c=cmd: declared_table(db, c, rank))
            if got is not None:
                shown = got.notes if cmd.report.notes else []
                _table(sec, cmd.report.title, got.frame.head(cmd.report.rows), shown, cmd.name)
    return sec if sec.tail else None


def declared_table(db: TraceDB, cmd: Command, rank: int | None) -> object:
    """The result of a declared command for the report: the options of its
    :class:`~trace_report.declare.ReportTable`, ``rank`` the report's."""
    assert cmd.report is not None
    values = dict(cmd.report.options)
    if "rank" in option_names(cmd.options):
        values["rank"] = rank
    return cmd.function()(db, cmd.make_options(values))


def build(ctx: ReportContext) -> Section | None:
    """:func:`deeper_section` of the report's rank(s), the critical path of the timeline's step."""
    return deeper_section(ctx.db, ctx.opts.rank, ctx.opts.step)
