"""Benchmark: what the shared training loop and the profiler cost.

1. Loop overhead, profiling off: the shared loop's epoch (regions, timers, per-step records)
   against a plain minimal loop (``zero_grad; forward; loss; backward; step``) over the same
   model, optimizer, data and batch size. Epochs alternate between the two, after one untimed
   warm-up epoch each; the overhead is the median of the per-pair ratios of wall time and of
   process CPU time (the CPU-time ratio stays readable on a machine shared with other jobs).
   Target: at most 3% slower.
2. The loop's fixed cost per step in microseconds: the same comparison with a tiny linear
   model on 8x8 images, where the step itself is short.
3. Profiling on: one epoch of unprofiled steps, then 1 warm-up and K recorded steps
   (``schedule(wait=N, warmup=1, active=K)``); the time of the warm-up and recorded steps
   (trace export included) over the median unprofiled step, per recorded step, and the trace
   size per recorded step (gzip and uncompressed).

``python -m benchmarks.capture_overhead_loop [--steps 10] [--repeats 10] [--json out.json]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trace_report.capture.config import CaptureConfig, validate
from trace_report.capture.data import Loaders, build_loaders, resolve_classes
from trace_report.capture.loop import DistInfo, Trainer, run_epoch
from trace_report.capture.models import build_optimizer
from trace_report.capture.profiling import (
    CudaProfilerWindow,
    NoProfiler,
    make_profiler,
    trace_files,
)
from trace_report.capture.runtime import (
    quiet_kineto_on_cpu,
    resolve_device,
    seed_everything,
    synchronize,
    thread_count,
)

Timing = tuple[float, float]  # (wall seconds, process CPU seconds) per step


def _timed(run: Callable[[], None], trainer: Trainer, steps: int) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    synchronize(trainer.device)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def plain_epoch(trainer: Trainer, loaders: Loaders, steps: int) -> Timing:
    """Per-step time of the minimal loop (the same model and optimizer as the shared one)."""
    model, optimizer, criterion = trainer.model, trainer.optimizer, trainer.criterion

    def run() -> None:
        for index, (images, labels) in enumerate(loaders.train):
            if index == steps:
                break
            images, labels = images.to(trainer.device), labels.to(trainer.device)
            optimizer.zero_grad(set_to_none=trainer.cfg.set_to_none)  # same work as shared
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()

    return _timed(run, trainer, steps)


def shared_epoch(trainer: Trainer, loaders: Loaders, steps: int) -> Timing:
    """Per-step time of the shared loop's epoch, profiling off."""
    window = CudaProfilerWindow(trainer.cfg, enabled=False)
    return _timed(
        lambda: run_epoch(trainer, loaders, 1, steps, 0, NoProfiler(), window, lambda: None),
        trainer, steps,
    )


def compare_loops(trainer: Trainer, loaders: Loaders, steps: int, repeats: int) -> dict:
    """``repeats`` alternating pairs of plain and shared epochs after one warm-up each."""
    plain_epoch(trainer, loaders, steps)
    shared_epoch(trainer, loaders, steps)
    plain: list[Timing] = []
    shared: list[Timing] = []
    for index in range(repeats):
        pair = [(plain, plain_epoch), (shared, shared_epoch)]
        for sink, epoch in pair if index % 2 == 0 else pair[::-1]:
            sink.append(epoch(trainer, loaders, steps))
    return {"plain": plain, "shared": shared}


def _median_ratio(shared: list[Timing], plain: list[Timing], field: int) -> float:
    return statistics.median(s[field] / p[field] for s, p in zip(shared, plain, strict=True))


def loop_overhead(cfg: CaptureConfig, repeats: int) -> dict[str, Any]:
    """The shared loop against the plain one on ``cfg``'s model, data and batch."""
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    trainer = Trainer(cfg, device, DistInfo())
    runs = compare_loops(trainer, build_loaders(cfg, device), cfg.steps, repeats)
    plain, shared = runs["plain"], runs["shared"]
    return {
        "plain_step_ms": statistics.median(t[0] for t in plain) * 1e3,
        "shared_step_ms": statistics.median(t[0] for t in shared) * 1e3,
        "loop_overhead_pct": (_median_ratio(shared, plain, 0) - 1) * 100,
        "loop_overhead_cpu_time_pct": (_median_ratio(shared, plain, 1) - 1) * 100,
        "plain_step_ms_all": [round(t[0] * 1e3, 2) for t in plain],
        "shared_step_ms_all": [round(t[0] * 1e3, 2) for t in shared],
    }


def loop_fixed_cost(cfg: CaptureConfig, repeats: int) -> dict[str, Any]:
    """Microseconds the shared loop adds per step, measured on a tiny linear model."""
    tiny_cfg = resolve_classes(
        replace(cfg, image_size=8, steps=200, synthetic_train=cfg.batch_size * 200))
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    trainer = Trainer(tiny_cfg, device, DistInfo())
    tiny = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, tiny_cfg.num_classes)).to(device)
    trainer.model = trainer.eval_model = tiny
    trainer.optimizer = build_optimizer(
        cfg.optimizer, tiny.parameters(),
        lr=cfg.learning_rate, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
    )
    runs = compare_loops(trainer, build_loaders(tiny_cfg, device), tiny_cfg.steps, repeats)
    diffs = [s[0] - p[0] for s, p in zip(runs["shared"], runs["plain"], strict=True)]
    return {
        "tiny_plain_step_us": statistics.median(t[0] for t in runs["plain"]) * 1e6,
        "loop_fixed_cost_us_per_step": statistics.median(diffs) * 1e6,
    }


def profiling_cost(cfg: CaptureConfig, active: int) -> dict[str, Any]:
    """Extra seconds per recorded step and trace bytes per recorded step, from one epoch of
    ``steps`` unprofiled steps (the first skipped) then 1 warm-up and ``active`` recorded ones."""
    device = resolve_device(cfg.device)
    wait = max(cfg.steps, 3)
    prof_cfg = replace(cfg, profile=True, wait=wait, warmup=1, active=active, repeat=1)
    seed_everything(cfg.seed)
    trainer = Trainer(prof_cfg, device, DistInfo())
    loaders = build_loaders(replace(prof_cfg, steps=wait + 1 + active), device)
    with tempfile.TemporaryDirectory() as tmp:
        window = CudaProfilerWindow(prof_cfg, enabled=False)
        with make_profiler(prof_cfg, Path(tmp), device) as prof:
            records = run_epoch(trainer, loaders, 1, wait + 1 + active, 0, prof, window,
                                lambda: None)
        (trace,) = trace_files(Path(tmp))
        gz_bytes = trace.stat().st_size
        with gzip.open(trace, "rb") as fh:
            raw = fh.read()
        events = len(json.loads(raw)["traceEvents"])
    baseline = statistics.median(r.total_s for r in records[1:wait])
    window_s = sum(r.total_s + r.profiler_s for r in records[wait:])
    extra = (window_s - (1 + active) * baseline) / active
    return {
        "profiled_steps": active,
        "unprofiled_step_ms": baseline * 1e3,
        "profiling_cost_ms_per_step": extra * 1e3,
        "profiling_cost_pct": extra / baseline * 100,
        "trace_export_ms": max(r.profiler_s for r in records) * 1e3,
        "trace_gz_bytes_per_step": gz_bytes / active,
        "trace_json_bytes_per_step": len(raw) / active,
        "trace_events_per_step": events / active,
    }


def measure(cfg: CaptureConfig, *, repeats: int, active: int) -> dict[str, Any]:
    """Every measurement, with the configuration and versions they ran under."""
    quiet_kineto_on_cpu()
    validate(cfg)
    with thread_count(cfg.threads):
        loop = loop_overhead(cfg, repeats)
        fixed = loop_fixed_cost(cfg, repeats)
        cost = profiling_cost(cfg, active)
        threads = torch.get_num_threads()
    fixed["loop_fixed_cost_pct_of_step"] = (
        fixed["loop_fixed_cost_us_per_step"] / (loop["plain_step_ms"] * 1e3) * 100
    )
    return {
        "model": cfg.model, "device": resolve_device(cfg.device).type, "threads": threads,
        "batch_size": cfg.batch_size, "image_size": cfg.image_size or 32,
        "steps_per_epoch": cfg.steps, "repeats": repeats, "torch_version": torch.__version__,
        **loop, **fixed, **cost,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the measurements as JSON (and write ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capture_overhead_loop",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed epoch")
    parser.add_argument("--repeats", type=int, default=10, help="timed epochs per loop")
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
