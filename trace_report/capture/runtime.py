"""Device, threads, seeds, honest timing, and the run manifest (``run.json``).

``run.json`` records the configuration and the environment a result depends on (versions,
device, TF32 settings, host, git commit). It never records environment variables.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import random
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trace_report.errors import InputError

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``auto`` (CUDA when available) as a ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available on this machine")
    if name not in {"cpu", "cuda"}:
        raise InputError(f"--device {name!r} is not one of: auto, cpu, cuda")
    return torch.device(name)


def quiet_kineto_on_cpu() -> None:
    """On a machine without CUDA, stop Kineto logging a spurious ``gpuGetDeviceCount failed``
    line (stderr noise, not an error). Leaves an explicit ``KINETO_LOG_LEVEL`` alone."""
    if not torch.cuda.is_available():
        os.environ.setdefault("KINETO_LOG_LEVEL", "5")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@contextlib.contextmanager
def thread_count(threads: int | None) -> Iterator[int]:
    """Run with ``threads`` intra-op threads (None: unchanged); restore the old count after."""
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(old)


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class DeviceTimer:
    """Elapsed seconds of a device region: CUDA events on GPU, ``perf_counter`` on CPU.

    ``stop()`` synchronises, so the returned time includes all work queued in the region.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._cuda = device.type == "cuda"
        if self._cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
        self._t0 = 0.0

    def start(self) -> None:
        if self._cuda:
            self._start.record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Seconds since :meth:`start`, after the device has finished the region."""
        if self._cuda:
            self._end.record()
            self._end.synchronize()
            return self._start.elapsed_time(self._end) / 1e3
        return time.perf_counter() - self._t0


def device_name(device: torch.device) -> str:
    """Marketing name of the GPU, or the CPU model name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def tf32_settings() -> dict[str, Any]:
    """TF32 switches as torch reports them (old boolean API and the newer precision API)."""
    out: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        out["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        backends = {"cuda_matmul": torch.backends.cuda.matmul, "cudnn": torch.backends.cudnn}
        for key, obj in backends.items():
            value = getattr(obj, "fp32_precision", None)
            if isinstance(value, str):
                out[f"{key}_fp32_precision"] = value
    return out


def git_commit(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The project's git commit and whether the tree has changes (None outside a repository)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def environment(device: torch.device) -> dict[str, Any]:
    """Versions, device and host facts for ``run.json`` (never environment variables)."""
    cuda = device.type == "cuda"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    capability = ".".join(map(str, torch.cuda.get_device_capability(device))) if cuda else None
    return {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": cudnn,
        "python_version": platform.python_version(),
        "device": device.type,
        "device_name": device_name(device),
        "compute_capability": capability,
        "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "tf32": tf32_settings(),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "git": git_commit(),
    }


def utc_now() -> str:
    """Current UTC time, ISO 8601 with seconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON (NaN written as null); return ``path``."""
    path.write_text(json.dumps(_nan_to_none(payload), indent=2, default=str) + "\n")
    return path


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_none(v) for v in value]
    return value


def new_run_id(experiment: str) -> str:
    """``<experiment>-YYYYmmdd-HHMMSS`` in local time."""
    return f"{experiment}-{dt.datetime.now():%Y%m%d-%H%M%S}"


def prepare_run_dir(out_dir: Path, run_id: str) -> Path:
    """Create ``out_dir/run_id``; InputError when it exists and is not empty."""
    run_dir = Path(out_dir) / run_id
    if run_dir.exists() and any(run_dir.iterdir()):
        raise InputError(
            f"{run_dir} already exists and is not empty: choose another --run-id or --out-dir"
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create {run_dir}: {err.strerror}") from None
    return run_dir
