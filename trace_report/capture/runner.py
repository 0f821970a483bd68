"""One entry point for every experiment: :func:`run_capture` validates the options, creates
``<out-dir>/<run-id>/``, hands over to Nsight when asked, runs the experiment and writes its
``results.csv``, ``results.json``, chart and (for multi-run experiments) ``run.json``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec

from trace_report.capture import experiments, nsight
from trace_report.capture.config import CaptureConfig, validate
from trace_report.capture.data import resolve_classes
from trace_report.capture.ddp import ddp
from trace_report.capture.loop import amp_dtype
from trace_report.capture.params import params
from trace_report.capture.results import ExperimentResult, write_results
from trace_report.capture.runtime import (
    environment,
    new_run_id,
    prepare_run_dir,
    quiet_kineto_on_cpu,
    resolve_device,
    utc_now,
)
from trace_report.capture.torchscript import torchscript
from trace_report.errors import InputError
from trace_report.manifest import EXPERIMENT_SCHEMA, Environment, RunManifest, VariantRef, write_manifest

Experiment = Callable[[CaptureConfig, Path], ExperimentResult]


def _registry() -> dict[str, Experiment]:

    return {
        "baseline": experiments.baseline,
        "params": params,
        "optimized": experiments.optimized,
        "workers": experiments.workers,
        "devices": experiments.devices,
        "optimizers": experiments.optimizers,
        "no-bn": experiments.no_bn,
        "amp": experiments.amp,
        "compile": experiments.compile_,
        "torchscript": torchscript,
        "ddp": ddp,
    }


@dataclass
class NsightOutcome:
    """What ``--nsys``/``--ncu`` did: the commands, and the reports when they ran."""

    run_dir: Path
    commands: list[str]
    printed_only: bool
    reports: list[Path] = field(default_factory=list)


def _manifest(cfg: CaptureConfig, result: ExperimentResult, run_dir: Path) -> RunManifest:
    device = resolve_device(cfg.device)
    return RunManifest(
        schema=EXPERIMENT_SCHEMA, run_id=cfg.run_id, experiment=cfg.experiment, finished_utc=utc_now(),
        seed=cfg.seed, config=cfg.to_json(), environment=msgspec.convert(environment(device), Environment),
        variants=[VariantRef(variant=r.manifest.get("variant"), dir=str(r.run_dir.relative_to(run_dir)))
                  for r in result.runs],
        results=[p.name for p in result.files], notes=list(result.notes),
    )


def _nsight(cfg: CaptureConfig) -> NsightOutcome:
    run_dir = Path(cfg.out_dir) / cfg.run_id
    steps = nsight.plan(cfg, run_dir)
    commands = [step.shell() for step in steps]
    if cfg.print_command:
        return NsightOutcome(run_dir, commands, printed_only=True)
    nsight.check_tools(cfg)
    prepare_run_dir(cfg.out_dir, cfg.run_id)
    return NsightOutcome(run_dir, commands, False, nsight.run(steps, run_dir))


def run_capture(cfg: CaptureConfig) -> ExperimentResult | NsightOutcome:
    """Validate ``cfg`` and run its experiment (or its Nsight plan)."""
    cfg = validate(cfg)
    if cfg.print_command and not (cfg.nsys or cfg.ncu):
        raise InputError("--print-command prints the Nsight command: add --nsys or --ncu")
    cfg = replace(cfg, run_id=cfg.run_id or new_run_id(cfg.experiment))
    if cfg.nsys or cfg.ncu:
        return _nsight(cfg)
    quiet_kineto_on_cpu()
    device = resolve_device(cfg.device)  # a missing CUDA device fails before any folder is made
    cfg = resolve_classes(cfg)  # and so do a bad dataset folder and a wrong --num-classes
    amp_dtype(replace(cfg, amp=cfg.amp or cfg.experiment == "amp"), device)
    run_dir = prepare_run_dir(cfg.out_dir, cfg.run_id)
    try:
        result = _registry()[cfg.experiment](cfg, run_dir)
    except BaseException:
        if not any(run_dir.iterdir()):  # leave no empty run folder behind a failed start
            run_dir.rmdir()
        raise
    write_results(result)
    if cfg.experiment != "baseline":  # baseline's own run.json is already in run_dir
        write_manifest(run_dir / "run.json", _manifest(cfg, result, run_dir))
    return result
