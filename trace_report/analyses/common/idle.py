"""GPU idle time per rank and stream, broken down by cause, as HTA's idle-time breakdown.

On each stream, the GPU operations (kernels, memcpy, memset) in start order leave gaps: ``idle_us``
= an operation's start - the previous operation's end on that stream (µs; the first operation of
a stream has no gap). Each gap is ``host_wait`` when the runtime call that launched the operation
(same ``correlation``) started after the previous operation ended (the CPU did not enqueue work in
time), else ``kernel_wait`` when it is shorter than 30 µs (HTA's default
``consecutive_kernel_delay``: the delay of launching back-to-back kernels), else ``other``.
An operation without a launch call is never ``host_wait``. The rows per gap are the view
``gpu_idle_gaps`` (macro ``gpu_idle_gaps_of(steps_only, hta_rounding)``), the sums
``gpu_idle_breakdown`` (macro ``gpu_idle_breakdown_of(gaps)``), in ``store/sql/views_idle.sql``.

Source: HTA ``hta/analyzers/breakdown_analysis.py`` (BreakdownAnalysis.get_idle_time_breakdown
and _analyze_idle_time_for_stream, through TraceAnalysis.get_idle_time_breakdown). With
``steps_only`` and ``hta_rounding`` the numbers are HTA's (tests/analyses/common/test_idle.py), but for
gaps before an operation that has a correlation and no launch call: HTA compares them with the
start of the trace's first event (its join falls back to row 0), this module never calls them
``host_wait``.
"""

from __future__ import annotations

import pandas as pd

from trace_report.store.tracedb import TraceDB

IDLE_COLUMNS = ["rank", "stream", "idle_category", "idle_us", "idle_ratio", "trace_id"]
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
CONSECUTIVE_KERNEL_DELAY_US = 30
"""HTA's default ``consecutive_kernel_delay`` (hta/trace_analysis.py), the threshold in the SQL."""

QUERY = """
WITH gaps AS (SELECT * FROM gpu_idle_gaps_of($steps_only, $hta_rounding))
SELECT rank, stream, idle_category, idle_us, idle_ratio, trace_id
FROM gpu_idle_breakdown_of('gaps')
WHERE $rank IS NULL OR rank = $rank
ORDER BY rank, trace_id, stream, idle_category
"""


def idle_breakdown(db: TraceDB, rank: int | None = None, *, steps_only: bool = False,
                   hta_rounding: bool = False) -> pd.DataFrame:
    """Idle time per trace, stream and category: one row per (``rank``, ``stream``,
    ``idle_category``) that has gaps, with ``idle_us`` (µs, the sum of the gaps; a negative gap,
    two operations overlapping, counts as HTA counts it), ``idle_ratio`` (its share of the
    stream's idle time, NULL when that is 0) and ``trace_id`` (several traces may share a rank).
    Categories: :data:`IDLE_CATEGORIES`. No rows (same columns) without GPU operations.

    ``rank``: only that rank (raises :class:`~trace_report.errors.UsageError` when no trace has
    it); ``steps_only``: HTA's selection (operations launched before the last of two or more
    ProfilerSteps, view ``steps_only_gpu_ops``; every operation of a trace with fewer steps);
    ``hta_rounding``: HTA's rounding of fractional timestamps to whole µs (start up, end down).
    """
    db.check_rank(rank)
    params = {"rank": rank, "steps_only": steps_only, "hta_rounding": hta_rounding}
    frame = db.con.execute(QUERY, params).df()
    return frame[IDLE_COLUMNS].astype({"rank": "int64", "stream": "int64", "trace_id": "int64"})
