"""Collectives per kind and message size: count, time, wait, algorithm and bus bandwidth.

One row per (``collective``, ``dtype``, ``bytes``, ``group_size``, ``bw_basis``), per rank with
``by_rank``: ``count`` (kernels, over ranks), ``time_us`` and ``mean_us`` (kernel time, µs),
``wait_us`` (µs from a rank's collective kernel start to its last peer's kernel start: where the
ranks of one job are all present, else NULL), ``transfer_us`` (kernel time after the last peer
arrived: ``time_us - wait_us``; NCCL's kernel moves no data before every peer's kernel runs),
``algbw_gbps`` = bytes / transfer time and ``busbw_gbps`` = algbw times nccl-tests' factor for
``group_size`` n: 2(n-1)/n (allreduce), (n-1)/n (allgather, reducescatter, alltoall), 1
(broadcast, reduce, send/recv). GB/s are 1e9 bytes per second. ``bw_basis`` says which time the
bandwidths are over: ``'transfer'``; ``'kernel (wait unknown)'`` (no peers' traces: the whole
kernel, wait included, so a lower bound); ``'kernel (peer started after end)'`` (the last peer's
kernel started after this one ended: the traces' clocks disagree; the whole kernel).

``bytes`` is the message size nccl-tests calls the size (elements of the larger of input and
output times the element size): from the kernel's args ("Collective name", "In msg nelems",
"dtype", "Group size", PyTorch >= 2.1), else the ``nccl:<collective>`` annotation or
``record_param_comms`` operator around the launch, else the kernel name (view
``collective_calls``, ``store/sql/views_comm_collectives.sql``; query ``collectives.sql``).

Sources: NVIDIA nccl-tests ``doc/PERFORMANCE.md`` (algbw, busbw and their factors;
``src/alltoall.cu``: (n-1)/n); PyTorch's ``record_param_comms`` args
(torch/csrc/distributed/c10d/ParamCommsUtils.hpp).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from trace_report.analyses.common.result import Result
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

COLLECTIVE_COLUMNS = ["collective", "dtype", "bytes", "group_size", "count", "time_us", "mean_us", "wait_us",
                      "transfer_us", "algbw_gbps", "busbw_gbps", "bw_basis"]
TRANSFER = "transfer"
WAIT_UNKNOWN = "kernel (wait unknown)"
PEER_AFTER_END = "kernel (peer started after end)"


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
