"""The one training loop every experiment uses.

Per step it measures the time blocked on the DataLoader (``data_s``), the device time of the
copy + forward + loss + backward + optimizer step (``compute_s``, synchronised; CUDA events on
GPU), and the step's wall time (``total_s``). Time spent inside ``profiler.step()`` (trace
collection and export) is kept apart in ``profiler_s``, so epoch totals stay comparable with
profiling on. Each run writes ``run.json``, ``metrics.csv`` (per epoch) and ``steps.csv``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import torch
from torch import nn

from trace_report.capture.config import CaptureConfig
from trace_report.capture.data import Loaders, build_loaders, image_size_for, resolve_classes
from trace_report.capture.models import build_model, build_optimizer, forward_flop, with_conv_bias
from trace_report.capture.profiling import (
    CudaProfilerWindow,
    is_recording,
    make_profiler,
    peak_allocated_bytes,
    region,
    trace_files,
)
from trace_report.capture.runtime import (
    DeviceTimer,
    environment,
    resolve_device,
    seed_everything,
    synchronize,
    thread_count,
    utc_now,
)
from trace_report.errors import InputError
from trace_report.manifest import RUN_SCHEMA, Distributed, Environment, RunManifest, Summary, write_manifest


@dataclass(frozen=True)
class StepRecord:
    """One training step; times in seconds, ``loss`` the batch mean, ``accuracy`` in [0, 1]."""

    epoch: int
    step: int
    samples: int
    data_s: float
    compute_s: float
    total_s: float
    profiler_s: float
    loss: float
    accuracy: float
    profiled: bool


@dataclass(frozen=True)
class EpochRecord:
    """One epoch: summed step times (s), mean training loss/accuracy, test-set results."""

    epoch: int
    steps: int
    samples: int
    data_s: float
    compute_s: float
    total_s: float
    profiler_s: float
    samples_per_s: float
    loss: float
    accuracy: float
    test_loss: float
    test_accuracy: float
    test_samples: int
    test_s: float


@dataclass
class RunResult:
    """What :func:`train` measured and wrote."""

    run_dir: Path
    config: CaptureConfig
    device: str
    epochs: list[EpochRecord]
    steps: list[StepRecord]
    traces: list[Path] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    peak_memory_source: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    model: nn.Module | None = field(default=None, repr=False)  # the trained (plain) module


@dataclass(frozen=True)
class DistInfo:
    """Position of this process in a DDP job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def suffix(self) -> str:
        """File-name suffix for per-rank files (empty for a single process)."""
        return f"-rank{self.rank}" if self.world_size > 1 else ""


class Trainer:
    """Model, optimizer and precision settings; :meth:`step` runs one training step."""

    def __init__(self, cfg: CaptureConfig, device: torch.device, dist: DistInfo) -> None:
        cfg = resolve_classes(cfg)
        self.cfg = cfg
        self.device = device
        self.nvtx = device.type == "cuda"
        self.memory_format = torch.channels_last if cfg.channels_last else torch.preserve_format
        model = build_model(cfg.model, cfg.num_classes)
        if cfg.conv_bias:
            with_conv_bias(model)
        model = model.to(device, memory_format=self.memory_format)
        self.optimizer = build_optimizer(
            cfg.optimizer, model.parameters(),
            lr=cfg.learning_rate, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
            foreach=cfg.optimizer_foreach,
        )
        # Evaluation uses the plain module: no DDP collectives, no recompiles for eval mode.
        self.eval_model = model
        if dist.world_size > 1:
            ids = [dist.local_rank] if device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        mode = None if cfg.compile_mode == "default" else cfg.compile_mode
        self.model = torch.compile(model, mode=mode) if cfg.compile else model
        self.criterion = nn.CrossEntropyLoss()
        self.amp_dtype = amp_dtype(cfg, device)
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=cfg.amp and self.amp_dtype == torch.float16
        )

    def autocast(self):
        """Autocast context in ``--amp-dtype`` (fp16 on CUDA, bf16 on CPU by default);
        disabled without ``--amp``."""
        return torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.cfg.amp)

    def to_device(self, images: torch.Tensor, labels: torch.Tensor):
        blocking = self.cfg.non_blocking
        images = images.to(self.device, non_blocking=blocking, memory_format=self.memory_format)
        return images, labels.to(self.device, non_blocking=blocking)

    def step(self, images: torch.Tensor, labels: torch.Tensor):
        """One step under the four named regions; returns (loss, correct count) tensors."""
        images, labels = self.to_device(images, labels)
        with region("forward", nvtx=self.nvtx), self.autocast():
            out = self.model(images)
        with region("loss", nvtx=self.nvtx), self.autocast():
            loss = self.criterion(out, labels)
        with region("backward", nvtx=self.nvtx):
            self.scaler.scale(loss).backward()
        with region("optimizer_step", nvtx=self.nvtx):
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=self.cfg.set_to_none)
        return loss.detach(), (out.argmax(1) == labels).sum()

    @torch.no_grad()
    def evaluate(self, loader, max_batches: int) -> tuple[float, float, int]:
        """Mean loss, accuracy and sample count over at most ``max_batches`` test batches."""
        self.eval_model.eval()
        loss_sum, correct, seen = 0.0, 0, 0
        for index, (images, labels) in enumerate(loader):
            if max_batches and index >= max_batches:
                break
            images, labels = self.to_device(images, labels)
            with self.autocast():
                out = self.eval_model(images)
                loss_sum += float(self.criterion(out, labels)) * labels.size(0)
            correct += int((out.argmax(1) == labels).sum())
            seen += labels.size(0)
        self.eval_model.train()
        return (loss_sum / seen if seen else math.nan), (correct / seen if seen else math.nan), seen


AMP_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def amp_dtype_name(cfg: CaptureConfig, device: torch.device) -> str:
    """``--amp-dtype``, or its default: fp16 on CUDA, bf16 on CPU."""
    return cfg.amp_dtype or ("fp16" if device.type == "cuda" else "bf16")


def amp_dtype(cfg: CaptureConfig, device: torch.device) -> torch.dtype:
    """The autocast dtype; InputError for fp16 autocast on the CPU (bf16 is the CPU's)."""
    name = amp_dtype_name(cfg, device)
    if cfg.amp and name == "fp16" and device.type != "cuda":
        raise InputError("--amp-dtype fp16 needs CUDA; on the CPU autocast runs in bf16: "
                         "use --amp-dtype bf16")
    return AMP_DTYPES[name]


def flop_facts(cfg: CaptureConfig) -> dict[str, Any]:
    """Forward FLOP of one training batch and per image (FlopCounterMode, meta device)."""
    size = image_size_for(cfg)
    per_batch = forward_flop(cfg.model, num_classes=cfg.num_classes or 10, image_size=size,
                             batch_size=cfg.batch_size)
    return {
        "forward_flop_per_batch": per_batch,
        "forward_flop_per_image": per_batch // cfg.batch_size,
        "batch_size": cfg.batch_size,
        "image_size": size,
        "counted_by": "torch.utils.flop_counter.FlopCounterMode (forward pass only; "
        "backward is about 2x more)",
    }


@contextlib.contextmanager
def cudnn_benchmark(enabled: bool) -> Iterator[None]:
    """Set ``torch.backends.cudnn.benchmark`` for the run and restore it afterwards."""
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = old


@contextlib.contextmanager
def progress_bar(enabled: bool, total: int, label: str) -> Iterator[Any]:
    """A rich progress bar on stderr (only on a terminal); yields an ``advance()`` callable."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda: None
        return
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def steps_per_epoch(cfg: CaptureConfig, loaders: Loaders) -> int:
    """Training batches per epoch: the loader's length, capped by ``--steps``."""
    n = len(loaders.train)
    return min(n, cfg.steps) if cfg.steps else n


def check_schedule(cfg: CaptureConfig, total_steps: int) -> None:
    """InputError when the profiler schedule needs more steps than the run has."""
    if not (cfg.profile or cfg.cuda_profiler_range):
        return
    need = cfg.schedule_steps
    if total_steps < need:
        raise InputError(
            f"the run has {total_steps} training steps but the profiler schedule needs {need} "
            f"(wait {cfg.wait} + warmup {cfg.warmup} + active {cfg.active}"
            f"{f', x repeat {cfg.repeat}' if cfg.repeat > 1 else ''}): raise --steps/--epochs "
            "or lower --wait/--warmup/--active"
        )


def run_epoch(
    trainer: Trainer, loaders: Loaders, epoch: int, n_steps: int, first: int,
    prof: Any, window: CudaProfilerWindow, advance: Callable[[], None],
) -> list[StepRecord]:
    """Train ``n_steps`` batches of one epoch; ``first`` is the global number of its first step
    (the profiler schedule and the CUDA profiler window count steps across epochs)."""
    if loaders.train_sampler is not None:
        loaders.train_sampler.set_epoch(epoch)
    timer = DeviceTimer(trainer.device)
    records: list[StepRecord] = []
    t0 = time.perf_counter()
    batches = iter(loaders.train)
    for index in range(n_steps):
        images, labels = next(batches)
        t1 = time.perf_counter()
        window.before_step(first + index)
        profiled = is_recording(prof)
        timer.start()
        loss, correct = trainer.step(images, labels)
        compute_s = timer.stop()
        window.after_step(first + index)
        t2 = time.perf_counter()
        prof.step()
        t3 = time.perf_counter()
        n = labels.size(0)
        records.append(StepRecord(
            epoch, first + index, n, t1 - t0, compute_s, t2 - t0, t3 - t2,
            float(loss), int(correct) / n, profiled,
        ))
        advance()
        t0 = t3
    return records


def _epoch_record(
    epoch: int, steps: list[StepRecord], test: tuple[float, float, int], test_s: float
) -> EpochRecord:
    samples = sum(s.samples for s in steps)
    total = sum(s.total_s for s in steps)
    return EpochRecord(
        epoch=epoch,
        steps=len(steps),
        samples=samples,
        data_s=sum(s.data_s for s in steps),
        compute_s=sum(s.compute_s for s in steps),
        total_s=total,
        profiler_s=sum(s.profiler_s for s in steps),
        samples_per_s=samples / total if total > 0 else math.nan,
        loss=sum(s.loss * s.samples for s in steps) / samples,
        accuracy=sum(s.accuracy * s.samples for s in steps) / samples,
        test_loss=test[0],
        test_accuracy=test[1],
        test_samples=test[2],
        test_s=test_s,
    )


def write_records(path: Path, records: list[Any]) -> Path:
    """Write dataclass records as CSV (header from the dataclass fields)."""
    names = [f.name for f in dataclasses.fields(records[0])] if records else []
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        for record in records:
            writer.writerow(dataclasses.astuple(record))
    return path


def _peak_memory(device: torch.device, traces: list[Path]) -> tuple[int | None, str | None]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "torch.cuda.max_memory_allocated"
    peaks = [p for p in (peak_allocated_bytes(t) for t in traces) if p is not None]
    if peaks:
        return max(peaks), "profiler [memory] Total Allocated (since profiling began)"
    return None, None


def trace_worker_name(dist: DistInfo) -> str:
    """``<host>_<pid>`` as ``tensorboard_trace_handler`` names it; ``<host>_rank<N>`` under DDP."""
    host = socket.gethostname()
    return f"{host}_rank{dist.rank}" if dist.world_size > 1 else f"{host}_{os.getpid()}"


def _loop_device(cfg: CaptureConfig, dist: DistInfo) -> torch.device:
    device = resolve_device(cfg.device)
    if device.type == "cuda" and dist.world_size > 1:
        device = torch.device("cuda", dist.local_rank)
        torch.cuda.set_device(device)
    return device


def train(
    cfg: CaptureConfig, run_dir: Path, *, dist: DistInfo | None = None, variant: str | None = None
) -> RunResult:
    """Train ``cfg.model`` under the profiler and write the run's files into ``run_dir``."""
    dist = dist or DistInfo()
    cfg = resolve_classes(cfg)
    device = _loop_device(cfg, dist)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = utc_now()
    with thread_count(cfg.threads), cudnn_benchmark(cfg.cudnn_benchmark):
        seed_everything(cfg.seed)
        trainer = Trainer(cfg, device, dist)
        loaders = build_loaders(cfg, device, rank=dist.rank, world_size=dist.world_size)
        n_steps = steps_per_epoch(cfg, loaders)
        check_schedule(cfg, n_steps * cfg.epochs)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        worker = trace_worker_name(dist)
        prof = make_profiler(cfg, run_dir, device, worker_name=worker)
        window = CudaProfilerWindow(cfg, enabled=cfg.cuda_profiler_range and device.type == "cuda")
        steps: list[StepRecord] = []
        epochs: list[EpochRecord] = []
        label = f"{variant or cfg.experiment} ({cfg.model}, {device.type})"
        with progress_bar(cfg.progress, n_steps * cfg.epochs, label) as advance, prof:
            for epoch in range(1, cfg.epochs + 1):
                done = run_epoch(trainer, loaders, epoch, n_steps, len(steps), prof, window,
                                  advance)
                steps += done
                t_test = time.perf_counter()
                test = trainer.evaluate(loaders.test, cfg.steps)
                synchronize(device)
                epochs.append(_epoch_record(epoch, done, test, time.perf_counter() - t_test))
        window.stop()
        env = environment(device)
    traces = [p for p in trace_files(run_dir) if p.name.startswith(f"{worker}.")]
    peak, source = _peak_memory(device, traces)
    result = RunResult(run_dir, cfg, device.type, epochs, steps, traces, peak, source,
                       model=trainer.eval_model)
    manifest = _manifest(result, env, dist, variant, started)
    write_manifest(result.run_dir / f"run{dist.suffix}.json", manifest)
    result.manifest = manifest.to_dict()
    _write_run_files(result, dist)
    return result


def _manifest(
    result: RunResult, env: dict[str, Any], dist: DistInfo, variant: str | None, started: str
) -> RunManifest:
    cfg = result.config
    last = result.epochs[-1]
    return RunManifest(
        schema=RUN_SCHEMA, run_id=cfg.run_id, experiment=cfg.experiment, variant=variant,
        started_utc=started, finished_utc=utc_now(), seed=cfg.seed, learning_rate=cfg.learning_rate,
        config=cfg.to_json(), flop=flop_facts(cfg), environment=msgspec.convert(env, Environment),
        distributed=Distributed(**dataclasses.asdict(dist)), traces=[p.name for p in result.traces],
        files={"metrics": f"metrics{dist.suffix}.csv", "steps": f"steps{dist.suffix}.csv"},
        summary=Summary(epochs=len(result.epochs), steps=len(result.steps), final_loss=last.loss,
                        final_accuracy=last.accuracy, test_accuracy=last.test_accuracy,
                        peak_memory_bytes=result.peak_memory_bytes,
                        peak_memory_source=result.peak_memory_source),
    )


def _write_run_files(result: RunResult, dist: DistInfo) -> None:
    write_records(result.run_dir / f"metrics{dist.suffix}.csv", result.epochs)
    write_records(result.run_dir / f"steps{dist.suffix}.csv", result.steps)
