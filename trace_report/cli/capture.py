"""``trace-report capture``: the typer command. Parses options into a :class:`CaptureConfig`,
calls :func:`run_capture`, and prints the results. Errors are ``InputError`` /
``TraceReportError``; the CLI turns them into one ``Error:`` line and exit code 1."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from trace_report.capture.config import DEFAULTS, EXPERIMENTS, CaptureConfig, parse_int_list
from trace_report.cli.registry import app
from trace_report.errors import InputError
from trace_report.present.format import Format, OutputOptions

_LOOP = "Training loop"
_PROF = "Profiling"
_NSIGHT = "Nsight"
_EXP = "Experiment options"
_OUT = "Output"
_KNOBS = "Input pipeline and runtime knobs"

# Columns shown on the terminal per experiment (results.csv has them all).
_SHOWN = {
    "params": ["model", "trainable_params", "params_with_grad", "conv_layers",
               "last_linear_in_features", "image_size", "forward_flop_per_image", "optimizer_state_tensors_sgd",
               "optimizer_state_tensors_sgd-nesterov", "optimizer_state_tensors_adagrad",
               "optimizer_state_tensors_adadelta", "optimizer_state_tensors_adam"],
    "torchscript": ["variant", "test_accuracy", "median_ms", "mean_ms", "p90_ms", "min_ms",
                    "speedup", "outputs_equal", "accuracy_equal"],
    "compile": ["variant", "compile_mode", "median_run_s", "first_run_s", "compile_s_estimate",
                "median_run_samples_per_s", "speedup"],
    "ddp": ["world_size", "backend", "threads_per_rank", "aggregate_samples_per_s",
            "per_rank_samples_per_s", "scaling_efficiency", "final_loss", "test_accuracy"],
    "amp": ["variant", "batch_size", "precision", "median_samples_per_s", "peak_memory_mb",
            "final_loss"],
}
_DEFAULT_SHOWN = ["variant", "rank", "device", "threads", "workers", "optimizer", "mean_data_s",
                  "mean_compute_s", "mean_total_s", "samples_per_s", "final_loss",
                  "final_accuracy", "test_accuracy", "speedup"]


@app.command("capture")
def capture(
    experiment: Annotated[str, typer.Argument(
        help=f"What to run: {', '.join(EXPERIMENTS)}.", show_default=True,
    )] = DEFAULTS.experiment,
    *,
    model: Annotated[str, typer.Option(
        help="resnet18 (CIFAR stem), resnet18-nobn, resnet18-imagenet (torchvision), "
        "resnet18-imagenet-nobn, resnet50, resnet50-nobn or alexnet.",
        rich_help_panel=_LOOP)] = DEFAULTS.model,
    dataset: Annotated[str, typer.Option(
        help="synthetic (built in, no download), cifar10 / cifar100 (python-pickle layout; "
        "cifar100 without --data-dir: 100 synthetic classes) or imagefolder (train/ and val/ "
        "class folders).", rich_help_panel=_LOOP,
    )] = DEFAULTS.dataset,
    data_dir: Annotated[Path | None, typer.Option(
        help="Folder of the cifar10, cifar100 or imagefolder dataset.", rich_help_panel=_LOOP,
    )] = None,
    download: Annotated[bool, typer.Option(
        help="Download CIFAR-10/100 into --data-dir if it is missing.", rich_help_panel=_LOOP,
    )] = DEFAULTS.download,
    image_size: Annotated[int | None, typer.Option(
        help="Input side in pixels [default: 32; 224 for imagefolder; at least 64 for alexnet].",
        rich_help_panel=_LOOP)] = None,
    synthetic_train: Annotated[int, typer.Option(
        help="Synthetic training-set size (grows to fill --steps batches).",
        rich_help_panel=_LOOP)] = DEFAULTS.synthetic_train,
    synthetic_test: Annotated[int, typer.Option(
        help="Synthetic test-set size.", rich_help_panel=_LOOP)] = DEFAULTS.synthetic_test,
    num_classes: Annotated[int | None, typer.Option(
        help="Classes of the model's last layer [default: the dataset's: 10, 100 for cifar100, "
        "the class folders of an imagefolder tree].", rich_help_panel=_LOOP)] = DEFAULTS.num_classes,
    epochs: Annotated[int, typer.Option(help="Training epochs.", rich_help_panel=_LOOP)]
    = DEFAULTS.epochs,
    steps: Annotated[int, typer.Option(
        help="Training iterations (batches) per epoch, and the cap on test batches; 0 = the whole "
             "epoch. Each iteration the profiler records is one ProfilerStep in the trace.",
        rich_help_panel=_LOOP)] = DEFAULTS.steps,
    batch_size: Annotated[int, typer.Option(help="Samples per batch.", rich_help_panel=_LOOP)]
    = DEFAULTS.batch_size,
    workers: Annotated[int, typer.Option(
        help="DataLoader worker processes.", rich_help_panel=_LOOP)] = DEFAULTS.workers,
    lr: Annotated[float | None, typer.Option(
        help="Learning rate [default: 0.1 x batch-size / 128; 0.1 for the optimizers experiment].",
        rich_help_panel=_LOOP)] = None,
    momentum: Annotated[float, typer.Option(
        help="Momentum (sgd, sgd-nesterov).", rich_help_panel=_LOOP)] = DEFAULTS.momentum,
    weight_decay: Annotated[float, typer.Option(help="Weight decay.", rich_help_panel=_LOOP)]
    = DEFAULTS.weight_decay,
    optimizer: Annotated[str, typer.Option(
        help="sgd, sgd-nesterov, adagrad, adadelta or adam.", rich_help_panel=_LOOP,
    )] = DEFAULTS.optimizer,
    device: Annotated[str, typer.Option(
        help="cpu, cuda or auto (CUDA when available).", rich_help_panel=_LOOP,
    )] = DEFAULTS.device,
    threads: Annotated[int | None, typer.Option(
        help="torch intra-op CPU threads [default: torch's choice].", rich_help_panel=_LOOP,
    )] = None,
    seed: Annotated[int, typer.Option(help="Random seed.", rich_help_panel=_LOOP)]
    = DEFAULTS.seed,
    amp: Annotated[bool, typer.Option(
        help="Automatic mixed precision (fp16 + GradScaler on CUDA, bf16 on CPU).",
        rich_help_panel=_LOOP)] = DEFAULTS.amp,
    amp_dtype: Annotated[str | None, typer.Option(
        help="Autocast dtype: fp16 (CUDA, with GradScaler) or bf16 [default: fp16 on CUDA, bf16 "
        "on CPU].", rich_help_panel=_LOOP)] = DEFAULTS.amp_dtype,
    channels_last: Annotated[bool, typer.Option(
        help="channels_last memory format.", rich_help_panel=_LOOP)] = DEFAULTS.channels_last,
    compile: Annotated[bool, typer.Option(
        help="torch.compile the model.", rich_help_panel=_LOOP)] = DEFAULTS.compile,
    compile_mode: Annotated[str, typer.Option(
        help="torch.compile mode: default, reduce-overhead (CUDA graphs) or max-autotune "
        "(CUDA graphs too; both imply --set-to-none).",
        rich_help_panel=_LOOP)] = DEFAULTS.compile_mode,
    data_on_device: Annotated[bool, typer.Option(
        help="Keep the synthetic set on the device: no DataLoader, no host-to-device copies.",
        rich_help_panel=_KNOBS)] = DEFAULTS.data_on_device,
    pin_memory: Annotated[bool, typer.Option(
        help="Pinned host memory (CUDA only).", rich_help_panel=_KNOBS)] = DEFAULTS.pin_memory,
    non_blocking: Annotated[bool, typer.Option(
        help="non_blocking host-to-device copies.", rich_help_panel=_KNOBS,
    )] = DEFAULTS.non_blocking,
    persistent_workers: Annotated[bool, typer.Option(
        help="Keep DataLoader workers between epochs.", rich_help_panel=_KNOBS,
    )] = DEFAULTS.persistent_workers,
    prefetch_factor: Annotated[int | None, typer.Option(
        help="Batches prefetched per worker.", rich_help_panel=_KNOBS)] = None,
    cudnn_benchmark: Annotated[bool, typer.Option(
        help="torch.backends.cudnn.benchmark.", rich_help_panel=_KNOBS,
    )] = DEFAULTS.cudnn_benchmark,
    set_to_none: Annotated[bool, typer.Option(
        help="optimizer.zero_grad(set_to_none=True).", rich_help_panel=_KNOBS,
    )] = DEFAULTS.set_to_none,
    conv_bias: Annotated[bool, typer.Option(
        help="Give every Conv2d a bias, before its BatchNorm2d (the Conv2dBiasFollowedByBatchNorm2d "
        "anti-pattern).", rich_help_panel=_KNOBS)] = DEFAULTS.conv_bias,
    optimizer_foreach: Annotated[bool | None, typer.Option(
        help="The optimizer's foreach=: --no-optimizer-foreach runs its single-tensor loop "
        "[default: torch's choice].", rich_help_panel=_KNOBS)] = DEFAULTS.optimizer_foreach,
    profile: Annotated[bool, typer.Option(
        help="Run under torch.profiler.", rich_help_panel=_PROF)] = DEFAULTS.profile,
    wait: Annotated[int, typer.Option(help="Profiler schedule: steps skipped.",
                                      rich_help_panel=_PROF)] = DEFAULTS.wait,
    warmup: Annotated[int, typer.Option(help="Profiler schedule: warm-up steps.",
                                        rich_help_panel=_PROF)] = DEFAULTS.warmup,
    active: Annotated[int, typer.Option(help="Profiler schedule: recorded steps.",
                                        rich_help_panel=_PROF)] = DEFAULTS.active,
    repeat: Annotated[int, typer.Option(
        help="Profiler schedule: cycles (0 = until the run ends).", rich_help_panel=_PROF,
    )] = DEFAULTS.repeat,
    record_shapes: Annotated[bool, typer.Option(
        help="Record operator input shapes.", rich_help_panel=_PROF)] = DEFAULTS.record_shapes,
    profile_memory: Annotated[bool, typer.Option(
        help="Record memory events.", rich_help_panel=_PROF)] = DEFAULTS.profile_memory,
    with_stack: Annotated[bool, typer.Option(
        help="Record Python calls and nn.Module events (what trace-report modules reads; the "
             "profiler's active steps only).", rich_help_panel=_PROF)] = DEFAULTS.with_stack,
    nsys: Annotated[bool, typer.Option(
        help="Run under Nsight Systems (capture range = the profiler's active steps).",
        rich_help_panel=_NSIGHT)] = DEFAULTS.nsys,
    ncu: Annotated[bool, typer.Option(
        help="Run under Nsight Compute with the roofline metrics; writes .ncu-rep and CSV.",
        rich_help_panel=_NSIGHT)] = DEFAULTS.ncu,
    ncu_region: Annotated[str | None, typer.Option(
        help="--ncu: profile only the kernels of this region (forward, loss, backward, "
        "optimizer_step; its NVTX range), e.g. the forward pass's FLOP per image.",
        rich_help_panel=_NSIGHT)] = None,
    print_command: Annotated[bool, typer.Option(
        help="Print the --nsys/--ncu command line instead of running it.",
        rich_help_panel=_NSIGHT)] = DEFAULTS.print_command,
    cuda_profiler_range: Annotated[bool, typer.Option(hidden=True)]
    = DEFAULTS.cuda_profiler_range,
    workers_list: Annotated[str, typer.Option(
        help="workers: DataLoader worker counts to compare.", rich_help_panel=_EXP,
    )] = ",".join(map(str, DEFAULTS.workers_list)),
    batch_sizes: Annotated[str, typer.Option(
        help="amp: batch sizes to sweep.", rich_help_panel=_EXP,
    )] = ",".join(map(str, DEFAULTS.batch_sizes)),
    timed_runs: Annotated[int, typer.Option(
        help="compile: timed epochs after the warm-up ones (median reported).",
        rich_help_panel=_EXP)] = DEFAULTS.timed_runs,
    warmup_epochs: Annotated[int, typer.Option(
        help="compile: untimed (compiling) epochs first.", rich_help_panel=_EXP,
    )] = DEFAULTS.warmup_epochs,
    latency_runs: Annotated[int, typer.Option(
        help="torchscript: timed single-image runs.", rich_help_panel=_EXP,
    )] = DEFAULTS.latency_runs,
    latency_warmup: Annotated[int, typer.Option(
        help="torchscript: untimed runs first.", rich_help_panel=_EXP,
    )] = DEFAULTS.latency_warmup,
    nproc: Annotated[int | None, typer.Option(
        help="ddp: processes [default: GPU count on CUDA, 2 on CPU].", rich_help_panel=_EXP,
    )] = None,
    nproc_list: Annotated[str | None, typer.Option(
        help="ddp: world sizes to compare, e.g. 1,2,4,8 (aggregate samples/s and scaling "
        "efficiency).", rich_help_panel=_EXP)] = None,
    repeats: Annotated[int, typer.Option(
        help="Runs per variant of a sweep: median, min and max per row; 'best' on the median.",
        rich_help_panel=_EXP)] = DEFAULTS.repeats,
    out_dir: Annotated[Path, typer.Option(
        help="Folder that receives <run-id>/.", rich_help_panel=_OUT)] = DEFAULTS.out_dir,
    run_id: Annotated[str | None, typer.Option(
        help="Name of the run folder [default: <experiment>-<date>-<time>].",
        rich_help_panel=_OUT)] = None,
    progress: Annotated[bool, typer.Option(
        help="Progress bar on stderr (terminals only).", rich_help_panel=_OUT,
    )] = DEFAULTS.progress,
    fmt: Annotated[Format | None, typer.Option(
        "--format", "-f", help="Results format on stdout (default: table).", rich_help_panel=_OUT,
    )] = None,
) -> None:
    """Train ResNet (or another model) under torch.profiler and write traces/<run-id>/.

    With no EXPERIMENT: a short CPU-friendly baseline (ResNet-18, synthetic CIFAR, 8 steps).

    \b
    Examples:
      trace-report capture
      trace-report capture amp --device cuda --steps 20
    """
    options = dict(locals())  # first statement: exactly the parameters, named as the config fields
    del options["workers_list"], options["batch_sizes"], options["fmt"], options["nproc_list"]
    if importlib.util.find_spec("torch") is None:  # the analysis-only install has no torch
        raise InputError("capture needs PyTorch: pip install 'trace-report[capture]' (./run demo installs it)")
    from trace_report.capture.runner import run_capture

    cfg = CaptureConfig(
        **options,
        workers_list=parse_int_list(workers_list, "--workers-list"),
        batch_sizes=parse_int_list(batch_sizes, "--batch-sizes", low=1),
        nproc_list=parse_int_list(nproc_list, "--nproc-list", low=1) if nproc_list else None,
    )
    show(run_capture(cfg), fmt)


def show(outcome, fmt: Format | None = None) -> None:
    """Print an experiment's rows to stdout (shared table/csv/json/markdown output) and its
    notes, files and the analysis command to stderr; or the Nsight commands."""
    from trace_report.capture.runner import NsightOutcome
    from trace_report.present.tables import emit

    if isinstance(outcome, NsightOutcome):
        for line in outcome.commands:
            typer.echo(line)
        for report in outcome.reports:
            _note(f"wrote {report}")
        return
    result = outcome
    table_mode = fmt in (None, Format.table)
    if result.details and table_mode:
        typer.echo(result.details)
    shown = [c for c in _SHOWN.get(result.name, _DEFAULT_SHOWN) if c in result.table.columns]
    if "repeats" in result.table.columns and result.table["repeats"].max() > 1:
        spread = [c for c in result.table.columns if c.endswith(("_min", "_max"))]
        shown += ["repeats", *spread]
    frame = result.table[shown] if table_mode else result.table
    emit(frame, OutputOptions(fmt), title=f"capture {result.name}")
    for note in result.notes:
        _note(f"note: {note}")
    _note(f"results: {', '.join(str(p) for p in result.files)}")
    target = _trace_folder(result)
    if target is not None:
        _note(f"analyse it with: trace-report top-kernels {target}")


def _note(message: str) -> None:
    typer.echo(message, err=True)


def _trace_folder(result) -> Path | None:
    """The run folder when traces sit in it directly, else the first variant with traces."""
    from trace_report.capture.profiling import trace_files

    folders = [result.run_dir, *(r.run_dir for r in result.runs)]
    folders += sorted(p for p in result.run_dir.iterdir() if p.is_dir())
    return next((folder for folder in folders if trace_files(folder)), None)
