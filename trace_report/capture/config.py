"""Capture options: every default lives here, in :class:`CaptureConfig`.

The CLI (``command.py``), the experiments and the tests build a ``CaptureConfig``, call
:func:`validate` once, and derive variants with :func:`dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_report.errors import InputError

EXPERIMENTS: tuple[str, ...] = (
    "baseline",
    "params",
    "optimized",
    "workers",
    "devices",
    "optimizers",
    "no-bn",
    "amp",
    "compile",
    "torchscript",
    "ddp",
)
MODELS: tuple[str, ...] = (
    "resnet18", "resnet18-nobn", "resnet18-imagenet", "resnet18-imagenet-nobn",
    "resnet50", "resnet50-nobn", "alexnet",
)
OPTIMIZERS: tuple[str, ...] = ("sgd", "sgd-nesterov", "adagrad", "adadelta", "adam")
BASE_LR = 0.1  # the CIFAR ResNet recipe: SGD at lr 0.1 for batches of 128
BASE_BATCH = 128
OPTIMIZERS_LR = 0.1  # the `optimizers` experiment compares every optimizer at this lr
DATASETS: tuple[str, ...] = ("synthetic", "cifar10", "cifar100", "imagefolder")
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
COMPILE_MODES: tuple[str, ...] = ("default", "reduce-overhead", "max-autotune")
CUDA_GRAPH_MODES: tuple[str, ...] = ("reduce-overhead", "max-autotune")
"""``torch.compile`` modes that replay CUDA graphs (CUDA graph trees). Their backward writes
the gradients into memory that the next step's replay reuses, so a step must drop the gradients
(``zero_grad(set_to_none=True)``) rather than zero them in place: :func:`validate` turns
``set_to_none`` on under them (with ``set_to_none=False`` torch 2.11 stops in the second step:
"accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run")."""
AMP_DTYPES: tuple[str, ...] = ("fp16", "bf16")
SYNTHETIC_DATASETS: tuple[str, ...] = ("synthetic", "cifar100")  # cifar100 without --data-dir
REGIONS: tuple[str, ...] = ("forward", "loss", "backward", "optimizer_step")
"""The named regions of a training step (record_function and, on CUDA, NVTX ranges)."""


@dataclass(frozen=True)
class CaptureConfig:
    """One capture run (or one experiment) with every option and its default.

    Times are in seconds, sizes in pixels or samples. ``steps=0`` means "no cap": a full epoch.
    """

    experiment: str = "baseline"
    # model and data
    model: str = "resnet18"
    num_classes: int | None = None  # None: the dataset's (10; 100 for cifar100; folder count)
    dataset: str = "synthetic"
    data_dir: Path | None = None
    download: bool = False
    image_size: int | None = None  # None: the dataset's own size (32 CIFAR/synthetic, 224 folders)
    synthetic_train: int = 2048  # samples in the synthetic training set
    synthetic_test: int = 512  # samples in the synthetic test set
    # training loop
    epochs: int = 1
    steps: int = 8  # cap on training (and test) batches per epoch; 0 = the whole epoch
    batch_size: int = 32
    workers: int = 0
    lr: float | None = None  # None: BASE_LR * batch_size / BASE_BATCH (linear scaling rule)
    momentum: float = 0.9
    weight_decay: float = 5e-4
    optimizer: str = "sgd"
    device: str = "auto"
    threads: int | None = None  # torch intra-op threads; None keeps torch's default
    seed: int = 0
    amp: bool = False
    amp_dtype: str | None = None  # None: fp16 on CUDA, bf16 on CPU
    channels_last: bool = False
    compile: bool = False
    compile_mode: str = "default"  # torch.compile(mode=...)
    data_on_device: bool = False  # synthetic set resident on the device: no host-to-device copies
    # input-pipeline and runtime knobs that the `optimized` experiment switches on
    pin_memory: bool = False
    non_blocking: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None  # batches prefetched per worker; None: DataLoader default
    cudnn_benchmark: bool = False
    set_to_none: bool = False  # optimizer.zero_grad(set_to_none=...)
    # anti-patterns PyTorch's pattern matcher names, switched on to capture a positive trace
    conv_bias: bool = False  # every Conv2d with a bias (a BatchNorm2d follows most of them)
    optimizer_foreach: bool | None = None  # the optimizer's foreach=; None: torch's default
    # torch.profiler
    profile: bool = True
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = True  # the Python tracer: nn.Module events (modules); with_modules alone records none
    # Nsight
    nsys: bool = False
    ncu: bool = False
    ncu_region: str | None = None  # --ncu: only kernels inside this region's NVTX range
    print_command: bool = False
    cuda_profiler_range: bool = False  # internal: call cudaProfilerStart/Stop (set under nsys/ncu)
    # experiment-specific
    workers_list: tuple[int, ...] = (0, 4, 8, 12, 16, 20, 24)
    batch_sizes: tuple[int, ...] = (16, 32, 64, 128, 256, 512)
    timed_runs: int = 3  # `compile`: timed epochs after the compiling one(s)
    warmup_epochs: int = 1  # `compile`: untimed (compiling) epochs first
    latency_runs: int = 200  # `torchscript`: timed single-image inferences
    latency_warmup: int = 50  # `torchscript`: untimed inferences first
    nproc: int | None = None  # `ddp`: processes; None: GPU count on CUDA, 2 on CPU
    nproc_list: tuple[int, ...] | None = None  # `ddp`: world sizes to compare (scaling)
    repeats: int = 1  # every sweep: runs per variant (median, min, max reported)
    # output
    out_dir: Path = Path("traces")
    run_id: str | None = None
    progress: bool = True

    @property
    def learning_rate(self) -> float:
        """``lr``, or the recipe's 0.1 scaled linearly to ``batch_size`` (0.025 for 32)."""
        return self.lr if self.lr is not None else BASE_LR * self.batch_size / BASE_BATCH

    @property
    def schedule_steps(self) -> int:
        """Training steps the profiler schedule needs to finish all its cycles."""
        return (self.wait + self.warmup + self.active) * max(self.repeat, 1)

    def to_json(self) -> dict[str, Any]:
        """The options as JSON-ready values (paths as strings, tuples as lists)."""
        out: dict[str, Any] = {}
        for key, value in dataclasses.asdict(self).items():
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[key] = value
        return out


DEFAULTS = CaptureConfig()


def _choice(value: str, options: tuple[str, ...], flag: str) -> None:
    if value not in options:
        raise InputError(f"{flag} {value!r} is not one of: {', '.join(options)}")


def _at_least(value: int | float | None, low: int | float, flag: str) -> None:
    if value is not None and value < low:
        raise InputError(f"{flag} must be at least {low}, got {value}")


def parse_int_list(text: str, flag: str, *, low: int = 0) -> tuple[int, ...]:
    """Parse ``"0,4,8"`` into ``(0, 4, 8)``; InputError names ``flag`` on bad input."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"{flag} expects comma-separated integers, got {text!r}") from None
    if not values:
        raise InputError(f"{flag} expects at least one integer, got {text!r}")
    for value in values:
        _at_least(value, low, flag)
    return values


def validate(cfg: CaptureConfig) -> CaptureConfig:
    """Check every option; raise :class:`InputError` with a one-line message naming the flag.

    Returns ``cfg`` with what an option implies: ``set_to_none`` under a CUDA-graph compile
    mode (:data:`CUDA_GRAPH_MODES`)."""
    _choice(cfg.experiment, EXPERIMENTS, "experiment")
    _choice(cfg.model, MODELS, "--model")
    _choice(cfg.dataset, DATASETS, "--dataset")
    _choice(cfg.optimizer, OPTIMIZERS, "--optimizer")
    _choice(cfg.device, DEVICES, "--device")
    _choice(cfg.compile_mode, COMPILE_MODES, "--compile-mode")
    if cfg.amp_dtype is not None:
        _choice(cfg.amp_dtype, AMP_DTYPES, "--amp-dtype")
    for flag, value, low in (
        ("--epochs", cfg.epochs, 1),
        ("--steps", cfg.steps, 0),
        ("--batch-size", cfg.batch_size, 1),
        ("--workers", cfg.workers, 0),
        ("--threads", cfg.threads, 1),
        ("--image-size", cfg.image_size, 8),
        ("--momentum", cfg.momentum, 0.0),
        ("--weight-decay", cfg.weight_decay, 0.0),
        ("--wait", cfg.wait, 0),
        ("--warmup", cfg.warmup, 0),
        ("--active", cfg.active, 1),
        ("--repeat", cfg.repeat, 0),
        ("--timed-runs", cfg.timed_runs, 1),
        ("--latency-runs", cfg.latency_runs, 1),
        ("--latency-warmup", cfg.latency_warmup, 0),
        ("--nproc", cfg.nproc, 1),
        ("--num-classes", cfg.num_classes, 1),
        ("--repeats", cfg.repeats, 1),
        ("--warmup-epochs", cfg.warmup_epochs, 1),
        ("--synthetic-train", cfg.synthetic_train, 1),
        ("--synthetic-test", cfg.synthetic_test, 1),
    ):
        _at_least(value, low, flag)
    if cfg.lr is not None and cfg.lr <= 0:
        raise InputError(f"--lr must be greater than 0, got {cfg.lr}")
    if cfg.ncu_region is not None:
        _choice(cfg.ncu_region, REGIONS, "--ncu-region")
        if not cfg.ncu:
            raise InputError("--ncu-region selects the kernels --ncu profiles: add --ncu")
    if cfg.nsys and cfg.ncu:
        raise InputError("--nsys and --ncu cannot be combined: run them one at a time")
    if cfg.dataset not in SYNTHETIC_DATASETS and cfg.data_dir is None:
        raise InputError(f"--dataset {cfg.dataset} needs --data-dir")
    if cfg.nproc is not None and cfg.nproc_list is not None:
        raise InputError("--nproc and --nproc-list cannot be combined: use --nproc-list")
    if cfg.data_on_device:
        if cfg.dataset not in SYNTHETIC_DATASETS or cfg.data_dir is not None:
            raise InputError("--data-on-device keeps a synthetic set on the device: use "
                             "--dataset synthetic or cifar100 without --data-dir")
        if cfg.workers:
            raise InputError("--data-on-device has no DataLoader workers: drop --workers")
    if cfg.run_id is not None:
        validate_run_id(cfg.run_id)
    if (cfg.compile or cfg.experiment == "compile") and cfg.compile_mode in CUDA_GRAPH_MODES:
        # both variants of `compile` too: eager and compiled zero their gradients alike
        cfg = dataclasses.replace(cfg, set_to_none=True)
    return cfg


def validate_run_id(run_id: str) -> None:
    """A run id is one path component: letters, digits, ``-``, ``_`` and ``.``."""
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    if not run_id or run_id in {".", ".."} or not set(run_id) <= allowed:
        raise InputError(
            f"--run-id {run_id!r} must be one name made of letters, digits, '-', '_' and '.'"
        )
