"""Training experiments built on the shared loop: baseline, optimized, workers, devices,
optimizers, no-bn, amp and compile. Each returns an :class:`ExperimentResult`; every variant
writes its own traces, ``run.json``, ``metrics.csv`` and ``steps.csv`` in a sub-folder."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from trace_report.capture.config import CUDA_GRAPH_MODES, OPTIMIZERS, OPTIMIZERS_LR, CaptureConfig
from trace_report.capture.loop import RunResult, amp_dtype_name, train
from trace_report.capture.results import (
    ExperimentResult,
    add_speedup,
    combine_repeats,
    metric_chart,
    summarize,
    time_chart,
)
from trace_report.capture.runtime import resolve_device
from trace_report.errors import InputError
from trace_report.sysutil import available_cpus

Variant = tuple[str, CaptureConfig, dict[str, Any]]  # (folder name, config, extra row labels)


def repeat_dirs(folder: Path, repeats: int) -> list[Path]:
    """Where the runs of one variant go: ``folder`` itself, or ``folder/repeat-<i>``."""
    return [folder] if repeats == 1 else [folder / f"repeat-{i}" for i in range(1, repeats + 1)]


def sweep(run_dir: Path, variants: list[Variant]) -> tuple[pd.DataFrame, list]:
    """Train every variant ``--repeats`` times in ``run_dir/<folder>[/repeat-<i>]``; one row
    per variant: timing columns are the median over the repeats (with min and max)."""
    rows, runs = [], []
    for folder, cfg, labels in variants:
        repeated = []
        for where in repeat_dirs(run_dir / folder, cfg.repeats):
            run = train(cfg, where, variant=folder)
            runs.append(run)
            repeated.append(summarize(run, variant=folder, **labels))
        rows.append(combine_repeats(repeated))
    return pd.DataFrame(rows), runs


def repeats_note(cfg: CaptureConfig) -> list[str]:
    """The note that says how rows were combined, when there were repeats."""
    if cfg.repeats == 1:
        return []
    return [f"{cfg.repeats} runs per variant: timing columns are medians (min/max beside); "
            "'best' and speed-ups use the median"]


def baseline(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """One run of the shared loop, written straight into ``run_dir``."""
    run = train(cfg, run_dir, variant="baseline")
    table = pd.DataFrame([summarize(run, variant="baseline")])
    per_epoch = pd.DataFrame(
        {"epoch": [e.epoch for e in run.epochs],
         "mean_data_s": [e.data_s for e in run.epochs],
         "mean_compute_s": [e.compute_s for e in run.epochs]}
    )
    chart = time_chart(per_epoch, "epoch", f"baseline: time per epoch ({cfg.model}, {run.device})")
    return ExperimentResult("baseline", run_dir, table, chart, runs=[run])


def optimized_config(cfg: CaptureConfig) -> tuple[CaptureConfig, list[str]]:
    """``cfg`` with the input-pipeline and runtime optimisations on; notes on what applies."""
    cuda = resolve_device(cfg.device).type == "cuda"
    workers = cfg.workers or min(4, available_cpus())
    notes = [
        f"DataLoader: {workers} workers, persistent, prefetch_factor 4",
        "channels_last memory format",
        "zero_grad(set_to_none=True)",
    ]
    if cuda:
        notes += ["pinned memory + non_blocking copies", "cudnn.benchmark", "AMP (fp16)"]
    else:
        notes.append("skipped on CPU: pinned memory, non_blocking copies, cudnn.benchmark, AMP")
    fast = replace(
        cfg, workers=workers, persistent_workers=True, prefetch_factor=4, pin_memory=cuda,
        non_blocking=cuda, channels_last=True, cudnn_benchmark=cuda, set_to_none=True,
        amp=cfg.amp or cuda,
    )
    return fast, notes


def optimized(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """The baseline configuration against the optimised one."""
    fast, notes = optimized_config(cfg)
    table, runs = sweep(run_dir, [("baseline", cfg, {}), ("optimized", fast, {})])
    table = add_speedup(table, "mean_total_s", base="baseline")
    chart = time_chart(table, "variant", "optimized against baseline: time per epoch")
    speedup = table.set_index("variant").loc["optimized", "speedup"]
    notes.insert(0, f"optimized epoch time: {speedup:.2f}x baseline speed")
    notes += repeats_note(cfg)
    return ExperimentResult("optimized", run_dir, table, chart, notes=notes, runs=runs)


def workers(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """DataLoader worker counts (``--workers-list``): mean data/compute/total time per epoch."""
    variants = [(f"workers-{n}", replace(cfg, workers=n), {}) for n in cfg.workers_list]
    table, runs = sweep(run_dir, variants)
    best = table.loc[table["mean_total_s"].idxmin()]  # the median over repeats
    notes = [f"best: {int(best['workers'])} workers ({best['mean_total_s']:.3f} s per epoch"
             f"{', median' if cfg.repeats > 1 else ''})", *repeats_note(cfg)]
    chart = time_chart(table, "workers", "DataLoader workers: time per epoch")
    return ExperimentResult("workers", run_dir, table, chart, notes=notes, runs=runs)


def devices(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """CPU with 1 thread, CPU with every thread, and the GPU when there is one."""
    cpus = available_cpus()
    variants: list[Variant] = [
        ("cpu-1-thread", replace(cfg, device="cpu", threads=1), {}),
        (f"cpu-{cpus}-threads", replace(cfg, device="cpu", threads=cpus), {}),
    ]
    notes = []
    if torch.cuda.is_available():
        variants.append(("cuda", replace(cfg, device="cuda"), {}))
    else:
        notes.append("no CUDA device: GPU row skipped")
    table, runs = sweep(run_dir, variants)
    table = add_speedup(table, "mean_total_s", base="cpu-1-thread")
    notes += ["speedup: epoch time of cpu-1-thread / epoch time of the row", *repeats_note(cfg)]
    chart = time_chart(table, "variant", "devices: time per epoch")
    return ExperimentResult("devices", run_dir, table, chart, notes=notes, runs=runs)


def optimizers(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """SGD, SGD with Nesterov momentum, Adagrad, Adadelta and Adam at the same settings."""
    lr = cfg.lr if cfg.lr is not None else OPTIMIZERS_LR
    variants = [(name, replace(cfg, optimizer=name, lr=lr), {}) for name in OPTIMIZERS]
    table, runs = sweep(run_dir, variants)
    chart = time_chart(table, "optimizer", "optimizers: time per epoch") | metric_chart(
        table, "optimizer", "final_loss", "optimizers: final training loss"
    )
    notes = [f"lr {lr}, momentum {cfg.momentum}, weight decay {cfg.weight_decay}",
             *repeats_note(cfg)]
    return ExperimentResult("optimizers", run_dir, table, chart, notes=notes, runs=runs)


def no_bn(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """The model with its BatchNorm layers against the same model with them replaced by Identity."""
    base = cfg.model.removesuffix("-nobn")
    if base == "alexnet":
        raise InputError("no-bn needs a model with BatchNorm: --model resnet18 or resnet50")
    variants = [
        ("with-bn", replace(cfg, model=base), {"batchnorm": True}),
        ("without-bn", replace(cfg, model=f"{base}-nobn"), {"batchnorm": False}),
    ]
    table, runs = sweep(run_dir, variants)
    chart = time_chart(table, "variant", "BatchNorm: time per epoch") | metric_chart(
        table, "variant", "final_loss", "BatchNorm: final training loss"
    )
    return ExperimentResult("no-bn", run_dir, table, chart, notes=repeats_note(cfg), runs=runs)


def amp(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """fp32 against automatic mixed precision (``--amp-dtype``: fp16 on CUDA, bf16 on CPU by
    default) over batch sizes: throughput (median unprofiled step) and peak memory."""
    device = resolve_device(cfg.device)
    cuda = device.type == "cuda"
    # on CPU the peak comes from the profiler's memory events
    base = replace(cfg, profile_memory=cfg.profile_memory or (cfg.profile and not cuda))
    amp_name = f"amp-{amp_dtype_name(cfg, device)}"
    variants = [
        (f"{name}-bs{bs}", replace(base, batch_size=bs, amp=on), {"precision": name})
        for bs in cfg.batch_sizes
        for name, on in (("fp32", False), (amp_name, True))
    ]
    table, runs = sweep(run_dir, variants)
    chart = metric_chart(
        table, "batch_size", "median_samples_per_s", "AMP: throughput (samples/s)",
        color="precision",
    ) | metric_chart(table, "batch_size", "peak_memory_mb", "AMP: peak memory (MB)",
                     color="precision")
    notes = [] if cuda or cfg.profile else ["peak memory on CPU needs profiling: drop --no-profile"]
    if not cuda:
        notes.append("CPU peak memory: bytes allocated during the profiled steps")
    notes += repeats_note(cfg)
    return ExperimentResult("amp", run_dir, table, chart, notes=notes, runs=runs)


COMPILE_TIMED = ("median_run_s", "first_run_s", "compile_s_estimate",
                 "median_run_samples_per_s", "mean_total_s", "samples_per_s")


def _compile_row(run: RunResult, mode: str, warmup: int) -> dict[str, Any]:
    timed = [e.total_s for e in run.epochs[warmup:]]
    median = statistics.median(timed)
    warm = [e.total_s for e in run.epochs[:warmup]]
    row = summarize(run, variant=mode)
    row.update(
        warmup_epochs=warmup,
        timed_runs=len(timed),
        median_run_s=median,
        first_run_s=warm[0],
        compile_s_estimate=max(sum(warm) - warmup * median, 0.0),
        median_run_samples_per_s=run.epochs[warmup].samples / median,
    )
    return row


def compile_(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """Eager against ``torch.compile`` (``--compile-mode``): ``--warmup-epochs`` (compiling)
    epochs are excluded, then the median of ``--timed-runs`` epochs; ``--repeats`` runs each."""
    epochs = cfg.warmup_epochs + cfg.timed_runs
    rows, runs = [], []
    for mode, on in (("eager", False), ("compiled", True)):
        repeated = []
        for where in repeat_dirs(run_dir / mode, cfg.repeats):
            run = train(replace(cfg, epochs=epochs, compile=on), where, variant=mode)
            runs.append(run)
            repeated.append(_compile_row(run, mode, cfg.warmup_epochs))
        rows.append(combine_repeats(repeated, timed=COMPILE_TIMED,
                                    spread=("median_run_s", "median_run_samples_per_s")))
    table = add_speedup(pd.DataFrame(rows), "median_run_s", base="eager")
    table["compile_mode"] = ["-", cfg.compile_mode]
    chart = metric_chart(table, "variant", "median_run_s", "torch.compile: median epoch (s)")
    notes = [
        f"median of {cfg.timed_runs} timed epochs of {runs[0].epochs[0].steps} steps; the first "
        f"{cfg.warmup_epochs} (compiling) epoch(s) excluded; mode {cfg.compile_mode}",
        f"compiled speedup: {table['speedup'].iloc[1]:.2f}x",
        *([f"zero_grad(set_to_none=True) in both runs: mode {cfg.compile_mode} replays CUDA "
           "graphs, which own the gradients"] if cfg.compile_mode in CUDA_GRAPH_MODES else []),
        *repeats_note(cfg),
    ]
    return ExperimentResult("compile", run_dir, table, chart, notes=notes, runs=runs)
