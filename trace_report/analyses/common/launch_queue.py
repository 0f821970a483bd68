"""CUDA launch queue length per trace and stream, as HTA's queue-length analysis: the rows
``trace-report queue`` shows (its declaration and what the columns mean:
:mod:`trace_report.analyses.queue`) and ``advise``'s launch-bound finding reads. The query is
``queue.sql`` beside this module, read without ``store.views`` (which loads DuckDB): the queue
command's declaration imports :data:`CUDA_MAX_LAUNCH_QUEUE_PER_STREAM` from here and stays light."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from trace_report.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from trace_report.store.tracedb import TraceDB

QUEUE_COLUMNS = ["rank", "stream", "mean_queue_length", "max_queue_length", "blocked_us"]
CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024
"""The launches a stream's queue holds (HTA's ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``)."""


def queue_rows(db: TraceDB, rank: int | None = None, max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
               steps_only: bool = True, hta_rounding: bool = False) -> pd.DataFrame:
    """Per trace of ``rank`` (None = all) and stream: :data:`QUEUE_COLUMNS` (``mean_queue_length``,
    ``max_queue_length`` in launches, ``blocked_us`` in µs: the time at ``max_queue_length`` or
    more) and ``trace_id``. ``steps_only`` / ``hta_rounding``: as
    :func:`~trace_report.analyses.common.comm_overlap.overlap_rows`. Raises
    :class:`~trace_report.errors.UsageError` for an unknown ``rank`` or a ``max_queue_length``
    below 1."""
    db.check_rank(rank)
    if max_queue_length < 1:
        raise UsageError(f"max queue length must be at least 1 (got {max_queue_length})")
    params = {"rank": rank, "steps_only": steps_only, "hta_rounding": hta_rounding,
              "max_queue_length": max_queue_length}
    sql = resources.files(__package__).joinpath("queue.sql").read_text(encoding="utf-8")
    frame = db.con.execute(sql, params).df()
    return frame[[*QUEUE_COLUMNS, "trace_id"]].astype({"rank": "int64", "stream": "int64"})
