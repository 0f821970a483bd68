"""Benchmark: what the shared training loop and the profiler cost.

1. Loop overhead, profiling off: the shared loop's epoch (regions, timers, per-step records)
   against a plain minimal loop (``zero_grad; forward; loss; backward; step``) over the same
   model, optimizer, data and batch size. Epochs alternate between the two, after one untimed
   warm-up epoch each; the medians of the per-step times are compared. Target: at most 3% slower.
2. Profiling on: ``1 + active`` steps under ``schedule(wait=0, warmup=1, active=K)``; the extra
   time over the same number of unprofiled steps, per recorded step (trace export included),
   and the gzip trace size per recorded step (and uncompressed).

``python -m trace_report.capture.overhead [--steps 20] [--repeats 5] [--json out.json]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from trace_report.capture.config import CaptureConfig, validate
from trace_report.capture.data import build_loaders
from trace_report.capture.loop import DistInfo, Trainer, run_epoch
from trace_report.capture.profiling import CudaProfilerWindow, NoProfiler, make_profiler
from trace_report.capture.runtime import (
    quiet_kineto_on_cpu,
    resolve_device,
    seed_everything,
    synchronize,
    thread_count,
)


def plain_epoch(trainer: Trainer, loader, steps: int) -> float:
    """Seconds per step of the minimal loop (the same model and optimizer as the shared one)."""
    model, optimizer, criterion = trainer.model, trainer.optimizer, trainer.criterion
    device = trainer.device
    start = time.perf_counter()
    for index, (images, labels) in enumerate(loader):
        if index == steps:
            break
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
    synchronize(device)
    return (time.perf_counter() - start) / steps


def shared_epoch(trainer: Trainer, loaders, steps: int, cfg: CaptureConfig) -> float:
    """Seconds per step of the shared loop's epoch, profiling off."""
    window = CudaProfilerWindow(cfg, enabled=False)
    start = time.perf_counter()
    run_epoch(trainer, loaders, 1, steps, 0, NoProfiler(), window, lambda: None)
    return (time.perf_counter() - start) / steps


def loop_overhead(cfg: CaptureConfig, repeats: int) -> dict[str, Any]:
    """Median per-step time of the plain and the shared loop, alternating, warm-up excluded."""
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    trainer = Trainer(cfg, device, DistInfo())
    loaders = build_loaders(cfg, device)
    plain_epoch(trainer, loaders.train, cfg.steps)
    shared_epoch(trainer, loaders, cfg.steps, cfg)
    plain, shared = [], []
    for index in range(repeats):
        order = ((plain, lambda: plain_epoch(trainer, loaders.train, cfg.steps)),
                 (shared, lambda: shared_epoch(trainer, loaders, cfg.steps, cfg)))
        for sink, run in order if index % 2 == 0 else order[::-1]:
            sink.append(run())
    plain_s, shared_s = statistics.median(plain), statistics.median(shared)
    return {
        "plain_step_ms": plain_s * 1e3,
        "shared_step_ms": shared_s * 1e3,
        "loop_overhead_pct": (shared_s / plain_s - 1) * 100,
        "plain_step_ms_all": [round(t * 1e3, 2) for t in plain],
        "shared_step_ms_all": [round(t * 1e3, 2) for t in shared],
    }


def profiling_cost(cfg: CaptureConfig, active: int, unprofiled_step_s: float) -> dict[str, Any]:
    """Extra seconds per recorded step and trace bytes per recorded step."""
    device = resolve_device(cfg.device)
    prof_cfg = replace(cfg, profile=True, wait=0, warmup=1, active=active, repeat=1)
    seed_everything(cfg.seed)
    trainer = Trainer(prof_cfg, device, DistInfo())
    loaders = build_loaders(prof_cfg, device)
    shared_epoch(trainer, loaders, cfg.steps, cfg)  # warm-up, unprofiled
    with tempfile.TemporaryDirectory() as tmp:
        window = CudaProfilerWindow(prof_cfg, enabled=False)
        start = time.perf_counter()
        with make_profiler(prof_cfg, Path(tmp), device) as prof:
            records = run_epoch(trainer, loaders, 1, 1 + active, 0, prof, window, lambda: None)
        wall = time.perf_counter() - start
        trace = next(Path(tmp).glob("*.pt.trace.json.gz"))
        gz_bytes = trace.stat().st_size
        with gzip.open(trace, "rb") as fh:
            raw = fh.read()
        events = len(json.loads(raw)["traceEvents"])
    export_s = max(r.profiler_s for r in records)
    extra = wall - (1 + active) * unprofiled_step_s
    return {
        "profiled_steps": active,
        "profiling_cost_ms_per_step": extra / active * 1e3,
        "profiling_cost_pct": extra / active / unprofiled_step_s * 100,
        "trace_export_ms": export_s * 1e3,
        "trace_gz_bytes_per_step": gz_bytes / active,
        "trace_json_bytes_per_step": len(raw) / active,
        "trace_events_per_step": events / active,
    }


def measure(cfg: CaptureConfig, *, repeats: int, active: int) -> dict[str, Any]:
    """Both measurements, with the configuration and versions they ran under."""
    quiet_kineto_on_cpu()
    validate(cfg)
    with thread_count(cfg.threads):
        loop = loop_overhead(cfg, repeats)
        cost = profiling_cost(cfg, active, loop["shared_step_ms"] / 1e3)
        threads = torch.get_num_threads()
    return {
        "model": cfg.model, "device": resolve_device(cfg.device).type, "threads": threads,
        "batch_size": cfg.batch_size, "image_size": cfg.image_size or 32,
        "steps_per_epoch": cfg.steps, "repeats": repeats, "torch_version": torch.__version__,
        **loop, **cost,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the measurements as JSON (and write ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m trace_report.capture.overhead",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed epoch")
    parser.add_argument("--repeats", type=int, default=5, help="timed epochs per loop")
    parser.add_argument("--active", type=int, default=5, help="profiled steps")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    cfg = CaptureConfig(
        model=args.model, device=args.device, batch_size=args.batch_size,
        image_size=args.image_size, steps=args.steps, threads=args.threads, profile=False,
        progress=False,
    )
    result = measure(cfg, repeats=args.repeats, active=args.active)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
