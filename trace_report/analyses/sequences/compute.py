"""The computation of ``sequences`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.sequences import (
    COLUMNS,
    SequenceOptions,
    check_options,
)
from trace_report.store.cache import PerTrace, traces_of_rank, with_ranks
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text


def _params(opts: SequenceOptions) -> dict[str, object]:
    return {"min_length": opts.min_length, "max_length": opts.max_length, "min_count": opts.min_count}


CALLS_RELATION = "_sequence_calls"
"""The name ``sequence_stats.sql`` reads the calls under (registered for that query only)."""

def call_query() -> str:
    """The SQL of one row per launching operator call of the traces ``$ids`` (``trace_id``,
    ``op_event_id``, ``operator``, ``op_ts_us``, ``cpu_us``, ``length``, ``gpu_us``,
    ``fusible_kernels``, ``kernels``; one row per trace with a NULL operator for the operations
    launched outside every operator); parameters ``ids``, ``operator``, ``steps_only``."""
    return sql_text("sequences.sql", __package__)


def call_rows(db: TraceDB, opts: SequenceOptions) -> pa.Table:
    """:func:`call_query`'s rows of the traces of ``opts.rank`` (all in view when None), with
    ``rank`` (from ``traces``) first. Without ``operator`` each trace's rows are kept beside the
    database (:data:`KEPT_CALLS`, by ``steps_only``): a trace's calls come from its own events
    alone, and computing them is a visible part of the report on a large trace."""
    con = db.con
    ids = traces_of_rank(con, opts.rank)
    if opts.operator is None:
        calls = KEPT_CALLS[opts.steps_only].rows(con, ids)
    else:
        calls = _calls(con, ids, opts.operator, opts.steps_only)
    return with_ranks(con, calls)


def _calls(con: duckdb.DuckDBPyConnection, ids: list[int], operator: str | None, steps_only: bool) -> pa.Table:
    return con.sql(call_query(), params={"ids": ids, "operator": operator, "steps_only": steps_only}).to_arrow_table()


KEPT_CALLS = {True: PerTrace("sequence_calls", lambda con, ids: _calls(con, ids, None, True), __name__),
              False: PerTrace("sequence_calls_all", lambda con, ids: _calls(con, ids, None, False), __name__)}
"""The calls of every operator, kept per trace beside a database, by ``steps_only``
(:class:`~trace_report.store.cache.PerTrace`)."""


def sequence_query() -> str:
    """The SQL of every sequence group with its ``kept`` flag (``sequence_stats.sql`` over the
    calls registered as :data:`CALLS_RELATION`); parameters as :func:`_params`."""
    return f"WITH calls AS (SELECT * FROM {CALLS_RELATION})\n{sql_text('sequence_stats.sql', __package__)}"


def _notes(groups: pd.DataFrame, opts: SequenceOptions) -> list[str]:
    """What the selection left out, in words, from every group (kept or not)."""
    notes: list[str] = []
    outside = groups[groups["operator"].isna()]
    ops = groups[groups["operator"].notna()]
    if opts.operator and ops.empty:
        return [f"no CPU operator whose name contains {opts.operator!r} launched a GPU operation"]
    if not outside.empty:
        what = f"whose name contains {opts.operator!r}" if opts.operator else "(cpu_op)"
        share = 100.0 * outside["total_us"].sum() / groups["total_us"].sum() if groups["total_us"].sum() else 0.0
        notes.append(f"{int(outside['length'].sum())} GPU operations ({share:.3g}% of the GPU time) "
                     f"were launched outside every operator {what}: in no sequence")
    calls = int(ops["count"].sum())
    longer = ops[ops["length"] > opts.max_length]
    if not longer.empty:
        notes.append(f"{int(longer['count'].sum())} of {calls} operator calls launched more than {opts.max_length} "
                     f"GPU operations (up to {int(longer['length'].max())}): left out, --max-length shows them")
    if calls and ops["length"].max() < opts.min_length:
        notes.append(f"every operator call launched fewer than {opts.min_length} GPU operations: no sequence "
                     "(--operator NAME groups the kernels of a larger operator)")
    if (ops["fusible"] & ops["kept"]).any():
        notes.append("fusible: every operation is an elementwise or reduction kernel (kernel classes); one "
                     "fused kernel (torch.compile) could replace each call's sequence")
    return notes


def sequences(db: TraceDB, options: SequenceOptions | None = None) -> Result:
    """Repeated kernel sequences per launching operator: columns :data:`COLUMNS` (``total_us``,
    ``mean_us``, ``cpu_us`` in µs, ``pct`` in percent, ``kernels`` a list of names), most GPU time
    first per rank; ``trace_id`` too when several traces share a rank.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``, an empty ``operator``,
    lengths below 1 or in the wrong order, or a minimum count below 1.
    """
    opts = options or SequenceOptions()
    db.check_rank(opts.rank)
    check_options(opts)
    db.con.register(CALLS_RELATION, call_rows(db, opts))
    try:
        groups = db.con.execute(sequence_query(), _params(opts)).df()
    finally:
        db.con.unregister(CALLS_RELATION)
    frame = groups[groups["kept"]][[*COLUMNS, "trace_id"]]
    frame = drop_single_trace_ids(frame.astype({"rank": "int64"})).reset_index(drop=True)
    frame["kernels"] = [list(k) for k in frame["kernels"]]
    notes = _notes(groups, opts)
    if groups.empty:
        notes.append("no GPU operations launched by a runtime call in the selection")
    elif frame.empty:
        notes.append(f"no sequence of {opts.min_length}-{opts.max_length} GPU operations launched "
                     f"{opts.min_count} or more times by one operator")
    return Result(frame, notes)


def sequence_calls(db: TraceDB, options: SequenceOptions | None = None) -> pd.DataFrame:
    """One row per launching operator call (:func:`call_query`'s columns), every length: for joining
    with other queries or counting sequences another way."""
    opts = options or SequenceOptions()
    db.check_rank(opts.rank)
    check_options(opts)
    frame = call_rows(db, opts).to_pandas()
    # Arrow gives an int64 column with NULLs (the row of operations outside every operator) as
    # float64: the event ids stay integers, as DuckDB's .df() gave them, for joining
    return frame.astype({"op_event_id": "Int64"})
