"""Collectives per kind and message size: count, time, algorithm and bus bandwidth, skew.

One row per (``collective``, ``dtype``, ``bytes``, ``group_size``), per rank with ``by_rank``:
``count`` (kernels, over ranks), ``time_us`` and ``mean_us`` (kernel time, µs), ``wait_us`` (µs a
rank's collective kernel started before its last peer's: skew, where the ranks of one job are
all present, else NULL), ``algbw_gbps`` = bytes / kernel time and ``busbw_gbps`` = algbw times
nccl-tests' factor for ``group_size`` n: 2(n-1)/n (allreduce), (n-1)/n (allgather,
reducescatter, alltoall), 1 (broadcast, reduce, send/recv). GB/s are 1e9 bytes per second.

``bytes`` is the message size nccl-tests calls the size (elements of the larger of input and
output times the element size): from the kernel's args ("Collective name", "In msg nelems",
"dtype", "Group size", PyTorch >= 2.1), else the ``nccl:<collective>`` annotation or
``record_param_comms`` operator around the launch, else the kernel name (view
``collective_calls``, ``store/sql/views_comm_collectives.sql``; query ``collectives.sql``).

Sources: NVIDIA nccl-tests ``doc/PERFORMANCE.md`` (algbw, busbw and their factors); PyTorch's
``record_param_comms`` args (torch/csrc/distributed/c10d/ParamCommsUtils.hpp).
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_report.analyses.result import Result
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

COLLECTIVE_COLUMNS = ["collective", "dtype", "bytes", "group_size", "count", "time_us", "mean_us", "wait_us",
                      "algbw_gbps", "busbw_gbps"]


@dataclass(frozen=True)
class CollectivesOptions:
    """``rank``: only that rank; ``by_rank``: one group of rows per rank (else summed over ranks)."""

    rank: int | None = None
    by_rank: bool = False


def collectives(db: TraceDB, options: CollectivesOptions | None = None) -> Result:
    """Rows as described in the module docstring, longest ``time_us`` first; ``rank`` first with
    ``by_rank``. Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank``."""
    opts = options or CollectivesOptions()
    db.check_rank(opts.rank)
    frame = db.con.execute(sql_text("collectives.sql"), {"rank": opts.rank, "by_rank": opts.by_rank}).df()
    cols = (["rank"] if opts.by_rank else []) + COLLECTIVE_COLUMNS
    frame = frame[cols].astype({"count": "int64"})
    if opts.by_rank:
        frame = frame.astype({"rank": "int64"})
    notes = []
    if frame.empty:
        notes.append("no communication (NCCL/RCCL) kernels")
    else:
        if frame["wait_us"].isna().all():
            notes.append("wait_us needs every rank of the job (same sequence of collectives on each): "
                         "not available here")
        else:
            notes.append("wait_us: time a rank's collective kernel started before its last peer's "
                         "(kernel time includes it, so algbw/busbw are lower bounds)")
        if frame["bytes"].isna().any():
            notes.append("some collectives carry no message size (no 'In msg nelems' args or nccl: annotation)")
    return Result(frame.reset_index(drop=True), notes)
