"""Which traces and GPU operations an analysis reads: the traces of a rank
(:func:`selected_traces`, :func:`trace_ids`) and the note on HTA's step selection
(:func:`steps_note`, view ``steps_only_gpu_ops`` of ``store/sql/views.sql``)."""

from __future__ import annotations

import duckdb
import pandas as pd

from trace_report.errors import InputError, UsageError
from trace_report.store.tracedb import TraceDB


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


def trace_ids(traces: pd.DataFrame) -> list[int]:
    """The ``trace_id`` column of :func:`selected_traces`' frame as Python ints (query parameters)."""
    return [int(t) for t in traces["trace_id"]]


def steps_note(db: TraceDB, steps_only: bool) -> list[str]:
    """What the step selection left out, in words (empty when nothing was)."""
    if not steps_only:
        return []
    n = db.scalar("SELECT count(*) FROM gpu_ops") or 0
    kept = db.scalar("SELECT count(*) FROM steps_only_gpu_ops") or 0
    if n == kept:
        return []
    return [f"HTA's selection: {kept} of {n} GPU operations, those launched within the trace and before the "
            "last ProfilerStep when there are two or more (--all-steps keeps every one)"]
