"""The computation of ``collectives`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

import pandas as pd

from trace_report.analyses.collectives import (
    COLLECTIVE_COLUMNS,
    PEER_AFTER_END,
    TRANSFER,
    WAIT_UNKNOWN,
    CollectivesOptions,
)
from trace_report.analyses.common.result import Result
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text


def collectives(db: TraceDB, options: CollectivesOptions | None = None) -> Result:
    """Rows as described in the module docstring, longest ``time_us`` first; ``rank`` first with
    ``by_rank``. Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``."""
    opts = options or CollectivesOptions()
    db.check_rank(opts.rank)
    frame = db.con.execute(sql_text("collectives.sql", __package__), {"rank": opts.rank, "by_rank": opts.by_rank}).df()
    cols = (["rank"] if opts.by_rank else []) + COLLECTIVE_COLUMNS
    frame = frame[cols].astype({"count": "int64"})
    if opts.by_rank:
        frame = frame.astype({"rank": "int64"})
    return Result(frame.reset_index(drop=True), _notes(frame))


def _notes(frame: pd.DataFrame) -> list[str]:
    """What the rows' bandwidths are over (one note per ``bw_basis`` present) and missing sizes."""
    if frame.empty:
        return ["no communication (NCCL/RCCL) kernels"]
    kernels = frame.groupby("bw_basis")["count"].sum()
    notes = []
    if TRANSFER in kernels:
        notes.append("algbw/busbw over transfer_us, the kernel time after the last peer's kernel started "
                     "(NCCL moves no data before every peer arrives); wait_us is the time before it")
    if WAIT_UNKNOWN in kernels:
        what = "not available here" if len(kernels) == 1 else f"not available for {kernels[WAIT_UNKNOWN]} kernel(s)"
        notes.append(f"wait_us needs every rank of the job (same sequence of collectives on each): {what}; "
                     f"bw_basis '{WAIT_UNKNOWN}': algbw/busbw over the whole kernel, wait included (lower bounds)")
    if PEER_AFTER_END in kernels:
        notes.append(f"{kernels[PEER_AFTER_END]} kernel(s) ended before their last peer's kernel started (the traces' "
                     f"clocks disagree): bw_basis '{PEER_AFTER_END}', algbw/busbw over the whole kernel")
    if frame["bytes"].isna().any():
        notes.append("some collectives carry no message size (no 'In msg nelems' args or nccl: annotation)")
    return notes
