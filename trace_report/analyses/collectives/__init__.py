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
from typing import Annotated

from trace_report.declare import BY_RANK, RANK, Command, computed

COLLECTIVE_COLUMNS = ["collective", "dtype", "bytes", "group_size", "count", "time_us", "mean_us", "wait_us",
                      "transfer_us", "algbw_gbps", "busbw_gbps", "bw_basis"]
TRANSFER = "transfer"
WAIT_UNKNOWN = "kernel (wait unknown)"
PEER_AFTER_END = "kernel (peer started after end)"


@dataclass(frozen=True)
class CollectivesOptions:
    """``rank``: only that rank; ``by_rank``: one group of rows per rank (else summed over ranks)."""

    rank: Annotated[int | None, RANK] = None
    by_rank: Annotated[bool, BY_RANK] = False


COMMAND = Command(
    name="collectives",
    options=CollectivesOptions,
    compute="compute:collectives",
    title="Collectives",
    help="Collectives per kind and message size: count, kernel time, wait_us (the time a rank's kernel waited "
         "for its last peer's; all ranks given), transfer_us (the kernel time after it), and algbw and busbw in "
         "GB/s over the transfer time with nccl-tests' factors; bw_basis says 'kernel (wait unknown)' where, "
         "without the peers' traces, they are over the whole kernel.",
    examples=("trace-report collectives traces/ddp-run/ --by-rank",),
)

__getattr__ = computed(__name__, ("collectives",))
