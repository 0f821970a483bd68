"""The windows "per step" figures are measured over (view ``iterations``,
``store/sql/views_iterations.sql``): a trace's ProfilerSteps, else the iterations inferred from
what repeats (``Optimizer.step#<class>.step``, ``enumerate(DataLoader)#<class>.__next__``, a
forward range or a module's call; basis ``inferred: <name>``), else the whole trace (``trace``).
"""

from __future__ import annotations

import duckdb
import pandas as pd

INFERRED = "inferred: "
"""How view ``iterations`` starts the basis of an inferred iteration: ``inferred: <name>``."""

ITERATION_COLUMNS = ["trace_id", "basis", "step", "window_id", "pid", "tid", "ts_us", "end_us", "dur_us"]


def iterations(con: duckdb.DuckDBPyConnection, ids: list[int]) -> pd.DataFrame:
    """Rows of view ``iterations`` (:data:`ITERATION_COLUMNS`; µs, trace clock) of the traces
    ``ids``, in time order."""
    return con.execute(f"SELECT {', '.join(ITERATION_COLUMNS)} FROM iterations WHERE list_contains($ids, trace_id) "
                       "ORDER BY trace_id, ts_us, window_id", {"ids": ids}).df()


def inferred_note(con: duckdb.DuckDBPyConnection, ids: list[int]) -> str | None:
    """``no ProfilerStep in 1 trace(s): its steps are the 39 iterations inferred from the repeated
    Optimizer.step#SGD.step (view iterations)``; None when no trace of ``ids`` has inferred ones."""
    rows = con.execute("SELECT substr(basis, $n) AS name, count(DISTINCT trace_id), count(*) FROM iterations "
                       "WHERE starts_with(basis, $p) AND list_contains($ids, trace_id) GROUP BY 1 ORDER BY 1",
                       {"ids": ids, "p": INFERRED, "n": len(INFERRED) + 1}).fetchall()
    if not rows:
        return None
    traces = sum(int(t) for _, t, _ in rows)
    what = "; ".join(f"{int(n)} from the repeated {name}" for name, _, n in rows)
    return f"no ProfilerStep in {traces} trace(s): their steps are the iterations inferred ({what}; view iterations)"
