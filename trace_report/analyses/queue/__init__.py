"""CUDA launch queue length per rank and stream, as HTA's queue-length analysis.

The queue of a stream grows by one at each launch call (``cudaLaunchKernel``,
``cudaMemcpyAsync``, ``cudaMemsetAsync``, ``cuLaunchKernel``, the ``hip*`` equivalents) and
shrinks by one when the GPU operation it launched (same ``correlation``) starts. Columns:
``mean_queue_length`` and ``max_queue_length`` over the series of values at each change
(HTA's ``describe()`` of the time series, so the mean is per change, not per µs) and
``blocked_us``: µs the queue stayed at ``max_queue_length`` (CUDA's 1024 launches per stream,
HTA's ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``) or more, when the CPU blocks on a full queue.
The query is ``analyses/common/queue.sql``
(:mod:`trace_report.analyses.common.launch_queue`, which ``advise`` reads too).

Source: HTA ``hta/analyzers/trace_counters.py`` (get_queue_length_summary,
get_time_spent_blocked_on_full_queue). ``steps_only`` and ``hta_rounding`` select and round
as in :mod:`trace_report.analyses.overlap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.analyses.common.launch_queue import (  # noqa: F401  (QUEUE_COLUMNS: the names callers import from here)
    CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
    QUEUE_COLUMNS,
)
from trace_report.declare import HTA_ROUNDING, RANK, STEPS_ONLY, Command, Opt, computed


@dataclass(frozen=True)
class QueueOptions:
    """``rank``: only that rank; ``max_queue_length``: the length counted as full;
    ``steps_only`` / ``hta_rounding``: as :class:`~trace_report.analyses.overlap.OverlapOptions`."""

    rank: Annotated[int | None, RANK] = None
    max_queue_length: Annotated[int, Opt("Launches that fill a stream's queue (CUDA: 1024).", min=1)] = \
        CUDA_MAX_LAUNCH_QUEUE_PER_STREAM
    steps_only: Annotated[bool, STEPS_ONLY] = True
    hta_rounding: Annotated[bool, HTA_ROUNDING] = False


COMMAND = Command(
    name="queue",
    options=QueueOptions,
    compute="compute:queue_length",
    title="CUDA launch queue",
    help="Launch queue length per rank and stream: mean and max outstanding launches (per change, as HTA's "
         "get_queue_length_summary) and blocked_us, the time the queue was full and the CPU blocked (HTA's "
         "get_time_spent_blocked_on_full_queue).",
    examples=("trace-report queue traces/run-42 --max-queue-length 8",),
    notebook="queue_length",
)

__getattr__ = computed(__name__, ("queue_length",))
