"""A tiny builder of Kineto-style traces for the edge cases of ``advise`` (test_advise_rules.py).

The layout follows what the PyTorch Profiler writes (hta_a100_ddp_nccl): a top-level object with
``traceEvents``, ``deviceProperties`` and optionally ``distributedInfo``; complete events
(``"ph": "X"``, ``ts``/``dur`` in µs) with the CPU side on one process/thread and every GPU
operation on ``pid`` = device, ``tid`` = stream, tied to the runtime call that launched it by
``args.correlation``. Besides the events, the builder keeps typed lists (steps, runtime calls,
GPU operations, DataLoader ranges) so that a test can compute what it expects with plain Python
(the interval helpers below), never through the package's SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CPU_PID = 3141
CPU_TID = 3141
BASE_US = 1_000_000.0
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, " \
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"

# (name, computeMajor, computeMinor, totalGlobalMem)
H100 = ("NVIDIA H100 80GB HBM3", 9, 0, 85899345920)
A100 = ("NVIDIA A100-SXM4-80GB", 8, 0, 85198045184)
V100 = ("Tesla V100-SXM2-16GB", 7, 0, 16945512448)

API_OF_CAT = {"kernel": "cudaLaunchKernel", "gpu_memcpy": "cudaMemcpyAsync", "gpu_memset": "cudaMemsetAsync"}


@dataclass
class Span:
    """One complete event as the builder wrote it (times in µs)."""

    name: str
    cat: str
    ts: float
    dur: float
    correlation: int | None = None
    stream: int | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass
class TraceBuilder:
    """Collects events; ``write(path)`` saves the trace as JSON."""

    device: tuple[str, int, int, int] = H100
    rank: int | None = None
    world_size: int = 1
    events: list[dict[str, Any]] = field(default_factory=list)
    steps: list[Span] = field(default_factory=list)
    runtime: list[Span] = field(default_factory=list)
    gpu: list[Span] = field(default_factory=list)
    loading: list[Span] = field(default_factory=list)
    cpu_ops: list[Span] = field(default_factory=list)
    _correlation: int = 100

    # --- CPU side ------------------------------------------------------------------------------

    def _cpu(self, name: str, cat: str, ts: float, dur: float, args: dict[str, Any]) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": CPU_TID,
                            "ts": BASE_US + ts, "dur": dur, "args": args})

    def step(self, n: int, ts: float, dur: float) -> Span:
        """A ``ProfilerStep#n`` range (user_annotation)."""
        self._cpu(f"ProfilerStep#{n}", "user_annotation", ts, dur, {"External id": 1 + len(self.events)})
        s = Span(f"ProfilerStep#{n}", "user_annotation", ts, dur)
        self.steps.append(s)
        return s

    def cpu_op(self, name: str, ts: float, dur: float) -> Span:
        self._cpu(name, "cpu_op", ts, dur, {"External id": 1 + len(self.events)})
        s = Span(name, "cpu_op", ts, dur)
        self.cpu_ops.append(s)
        return s

    def dataloader(self, ts: float, dur: float) -> Span:
        """An ``enumerate(DataLoader)#...__next__`` range (user_annotation)."""
        self._cpu(DATALOADER, "user_annotation", ts, dur, {"External id": 1 + len(self.events)})
        s = Span(DATALOADER, "user_annotation", ts, dur)
        self.loading.append(s)
        return s

    def runtime_call(self, name: str, ts: float, dur: float, correlation: int | None = None) -> Span:
        """A cuda_runtime call (a launch when it has a correlation, else e.g. a synchronisation)."""
        if correlation is None:
            correlation = self._next_correlation()
        self._cpu(name, "cuda_runtime", ts, dur, {"External id": correlation, "cbid": 211,
                                                  "correlation": correlation})
        s = Span(name, "cuda_runtime", ts, dur, correlation)
        self.runtime.append(s)
        return s

    def sync(self, ts: float, dur: float, name: str = "cudaStreamSynchronize") -> Span:
        return self.runtime_call(name, ts, dur)

    # --- GPU side ------------------------------------------------------------------------------

    def _next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def gpu_op(self, name: str, ts: float, dur: float, correlation: int, cat: str = "kernel",
               stream: int = 7) -> Span:
        args: dict[str, Any] = {"External id": correlation, "device": 0, "context": 1, "stream": stream,
                                "correlation": correlation}
        if cat == "kernel":
            args |= {"registers per thread": 32, "shared memory": 0, "blocks per SM": 1.0,
                     "warps per SM": 4.0, "grid": [108, 1, 1], "block": [128, 1, 1],
                     "est. achieved occupancy %": 6}
        else:
            args |= {"bytes": 1 << 20, "memory bandwidth (GB/s)": 10.0}
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream,
                            "ts": BASE_US + ts, "dur": dur, "args": args})
        s = Span(name, cat, ts, dur, correlation, stream)
        self.gpu.append(s)
        return s

    def launch(self, ts: float, cpu_dur: float, gpu_ts: float, gpu_dur: float, name: str = KERNEL,
               cat: str = "kernel", stream: int = 7, api: str | None = None) -> tuple[Span, Span]:
        """A launch call at ``ts`` (``cpu_dur`` long) and the GPU operation it launched, running
        ``gpu_ts`` to ``gpu_ts + gpu_dur``, with a fresh correlation id."""
        call = self.runtime_call(api or API_OF_CAT[cat], ts, cpu_dur)
        return call, self.gpu_op(name, gpu_ts, gpu_dur, call.correlation or 0, cat, stream)

    # --- output --------------------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        name, major, minor, mem = self.device
        doc: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": name, "computeMajor": major, "computeMinor": minor,
                                  "totalGlobalMem": mem, "numSms": 132, "warpSize": 32}],
            "traceEvents": [
                {"name": "process_name", "ph": "M", "ts": BASE_US, "pid": CPU_PID, "tid": 0,
                 "args": {"name": "python3"}},
                {"name": "process_name", "ph": "M", "ts": BASE_US, "pid": 0, "tid": 0, "args": {"name": "python3"}},
                *sorted(self.events, key=lambda e: (e["ts"], -e["dur"])),
            ],
            "traceName": "constructed.json",
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        }
        if self.rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": self.rank, "world_size": self.world_size}
        return doc

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.document()))
        return path


# --- plain-Python interval arithmetic for the expected values ---------------------------------

def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merged [start, end) intervals (touching intervals merge)."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def clip(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Time of ``spans`` inside [lo, hi)."""
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)


def intervals(spans: list[Span]) -> list[tuple[float, float]]:
    return [(s.ts, s.end) for s in spans if s.dur > 0]


def gaps(busy: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The idle periods between consecutive busy intervals (each from going idle to resuming)."""
    return [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)]
