"""torch.profiler set-up: schedule, gzip traces named by ``tensorboard_trace_handler``, the four
named regions (``record_function`` and, on CUDA, NVTX ranges) and the cudaProfilerStart/Stop
window used under Nsight Systems / Nsight Compute."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)

from trace_report.capture.config import CaptureConfig

REGIONS: tuple[str, ...] = ("forward", "loss", "backward", "optimizer_step")
TRACE_GLOB = "*.pt.trace.json.gz"
RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


@contextlib.contextmanager
def region(name: str, *, nvtx: bool = False) -> Iterator[None]:
    """A named region: a ``record_function`` range, plus an NVTX range when ``nvtx``."""
    with record_function(name):
        if nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if nvtx:
                torch.cuda.nvtx.range_pop()


class NoProfiler:
    """Stands in for ``torch.profiler.profile`` when profiling is off."""

    current_action = ProfilerAction.NONE

    def __enter__(self) -> NoProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def step(self) -> None:
        return None


def profiler_schedule(cfg: CaptureConfig):
    """The ``torch.profiler.schedule`` for ``--wait/--warmup/--active/--repeat``."""
    return schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=cfg.repeat)


def make_profiler(
    cfg: CaptureConfig, trace_dir: Path, device: torch.device, *, worker_name: str | None = None
) -> profile | NoProfiler:
    """A profiler writing ``<worker>.<time_ns>.pt.trace.json.gz`` files into ``trace_dir``.

    Under Nsight (``cfg.cuda_profiler_range``) only CPU activity is traced: CUPTI serves one
    client, and there nsys/ncu own it; the regions still appear as NVTX ranges.
    """
    if not cfg.profile:
        return NoProfiler()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda" and not cfg.cuda_profiler_range:
        activities.append(ProfilerActivity.CUDA)
    return profile(
        activities=activities,
        schedule=profiler_schedule(cfg),
        on_trace_ready=tensorboard_trace_handler(
            str(trace_dir), worker_name=worker_name, use_gzip=True
        ),
        record_shapes=cfg.record_shapes,
        profile_memory=cfg.profile_memory,
        with_stack=cfg.with_stack,  # python_function events, nn.Module ones among them (active steps only)
    )


def is_recording(prof: Any) -> bool:
    """Whether the profiler records the current step."""
    return prof.current_action in RECORDING


class CudaProfilerWindow:
    """Calls cudaProfilerStart before the first active step of each profiler cycle and
    cudaProfilerStop after its last one, so ``nsys --capture-range=cudaProfilerApi`` and
    ``ncu --profile-from-start off`` see exactly the steps torch.profiler records."""

    def __init__(self, cfg: CaptureConfig, enabled: bool) -> None:
        self.enabled = enabled
        self._schedule = profiler_schedule(cfg)
        self._running = False

    def before_step(self, step: int) -> None:
        """Call with the global step number (from 0) before the step runs."""
        if self.enabled and not self._running and self._schedule(step) in RECORDING:
            torch.cuda.profiler.start()
            self._running = True

    def after_step(self, step: int) -> None:
        """Call with the same step number after the step (and its synchronisation)."""
        if self._running and self._schedule(step) == ProfilerAction.RECORD_AND_SAVE:
            self.stop()

    def stop(self) -> None:
        """Stop an open window (also called when training ends inside one)."""
        if self._running:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            self._running = False


def trace_files(directory: Path) -> list[Path]:
    """Trace files directly in ``directory``, sorted by name."""
    return sorted(Path(directory).glob(TRACE_GLOB))


def peak_allocated_bytes(trace: Path) -> int | None:
    """Largest ``Total Allocated`` of the ``[memory]`` events in a trace written with
    ``profile_memory`` (bytes allocated since profiling began), or None without such events."""
    import gzip
    import json

    with gzip.open(trace, "rt") as fh:
        events = json.load(fh).get("traceEvents", [])
    totals = [
        e["args"]["Total Allocated"]
        for e in events
        if e.get("name") == "[memory]" and "Total Allocated" in e.get("args", {})
    ]
    return max(totals) if totals else None
