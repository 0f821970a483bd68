"""``--nsys`` / ``--ncu``: re-run the same capture under Nsight Systems or Nsight Compute.

The child is ``python -m trace_report.capture ... --cuda-profiler-range``: it calls
cudaProfilerStart/Stop around the profiler's active steps, so
``nsys --capture-range=cudaProfilerApi`` and ``ncu --profile-from-start off`` record exactly
those steps. Reports land in the run folder beside the torch.profiler files.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from trace_report.capture.config import DEFAULTS, CaptureConfig
from trace_report.errors import InputError, TraceReportError

NSYS_TRACE = "cuda,nvtx,cudnn,cublas"
NCU_SECTIONS = ("SpeedOfLight", "SpeedOfLight_RooflineChart", "InstructionStats")
"""Sections collected: speed of light and its roofline chart, and the instruction statistics
(warp-level SASS counts per opcode and modifier, e.g. ``HMMA.1688.F32.TF32``: the tensor-core
work of the roofline, which no FP32/FP16 thread counter sees)."""
# Counts behind the roofline (FLOP = 2*FMA + ADD + MUL per precision; bytes from DRAM).
NCU_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    *(
        f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum"
        for p in ("d", "f", "h")
        for op in ("fma", "add", "mul")
    ),
    "sm__inst_executed_pipe_tensor.sum",
)
_NOT_FORWARDED = {"experiment", "nsys", "ncu", "ncu_region", "print_command",
                  "cuda_profiler_range"}


@dataclass(frozen=True)
class Step:
    """One command of the plan; ``stdout`` is a file its output is redirected to;
    ``fallback`` is run instead when the command fails (an older ncu without an option)."""

    argv: list[str]
    stdout: Path | None = None
    fallback: list[str] | None = None
    creates: Path | None = None  # the report the step must leave behind
    missing: str = ""  # why it may not have (said when it did not)

    def shell(self) -> str:
        """The command line as a shell would take it."""
        line = shlex.join(self.argv)
        return f"{line} > {shlex.quote(str(self.stdout))}" if self.stdout else line


def cli_args(cfg: CaptureConfig) -> list[str]:
    """Command-line options that reproduce ``cfg`` (options left at their default omitted)."""
    args: list[str] = []
    for f in fields(CaptureConfig):
        value = getattr(cfg, f.name)
        if f.name in _NOT_FORWARDED or value == getattr(DEFAULTS, f.name) or value is None:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else f"--no-{flag[2:]}")
        elif isinstance(value, tuple):
            args += [flag, ",".join(map(str, value))]
        else:
            args += [flag, str(value)]
    return args


def child_command(cfg: CaptureConfig) -> list[str]:
    """The capture itself, run under the Nsight tool."""
    return [
        sys.executable, "-m", "trace_report.capture", cfg.experiment, *cli_args(cfg),
        "--cuda-profiler-range",
    ]


def plan(cfg: CaptureConfig, run_dir: Path) -> list[Step]:
    """The commands ``--nsys`` or ``--ncu`` runs (the run id must be fixed already)."""
    report = run_dir / (cfg.run_id or "report")
    child = child_command(cfg)
    if cfg.nsys:
        return [Step([
            "nsys", "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
            f"--trace={NSYS_TRACE}", "--output", str(report), "--force-overwrite=true", *child,
        ])]
    sections = [arg for name in NCU_SECTIONS for arg in ("--section", name)]
    # "forward/": kernels launched inside the push/pop range "forward" (ncu's NVTX filtering;
    # the capture's regions push one range each, not nested)
    nvtx = ["--nvtx", "--nvtx-include", f"{cfg.ncu_region}/"] if cfg.ncu_region else []
    rep = report.with_name(report.name + ".ncu-rep")
    export = ["ncu", "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"]
    why = (f"nothing was launched inside the NVTX range of region {cfg.ncu_region!r}"
           if cfg.ncu_region else "no CUDA kernel ran in the profiled steps")
    return [
        Step([
            "ncu", "--profile-from-start", "off", "--target-processes", "all", *nvtx, *sections,
            "--metrics", ",".join(NCU_METRICS), "--export", str(report), "--force-overwrite",
            *child,
        ], creates=rep, missing=why),
        Step(
            # with the per-opcode counts (HMMA/HGMMA...): the tensor-core work of the roofline;
            # an ncu without --print-metric-instances exports their sums only
            [*export, "--print-metric-instances", "details"],
            stdout=report.with_name(report.name + ".ncu.csv"), fallback=export,
        ),
    ]


def check_tools(cfg: CaptureConfig) -> None:
    """InputError when the Nsight binary or a CUDA device is missing."""
    tool = "nsys" if cfg.nsys else "ncu"
    if shutil.which(tool) is None:
        product = "Nsight Systems" if cfg.nsys else "Nsight Compute"
        raise InputError(f"--{tool}: {tool} not found on PATH (install {product} or drop --{tool})")
    if not torch.cuda.is_available():
        raise InputError(f"--{tool} needs a CUDA device; none is available on this machine")
    if cfg.device == "cpu":
        raise InputError(f"--{tool} profiles CUDA work: use --device cuda or auto, not cpu")


def _run(argv: list[str], stdout: Path | None) -> int:
    if stdout is None:
        return subprocess.run(argv).returncode
    with open(stdout, "w") as out:
        return subprocess.run(argv, stdout=out).returncode


def run(steps: list[Step], run_dir: Path) -> list[Path]:
    """Run the plan; the reports it wrote (``.nsys-rep``, ``.ncu-rep``, ``.ncu.csv``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for step in steps:
        code = _run(step.argv, step.stdout)
        if code != 0 and step.fallback is not None:
            code = _run(step.fallback, step.stdout)
        if code != 0:
            raise TraceReportError(f"{step.argv[0]} exited with code {code}")
        if step.creates is not None and not step.creates.is_file():
            raise TraceReportError(f"{step.argv[0]} wrote no {step.creates.name}: it profiled no kernel "
                                   f"({step.missing})")
    patterns = ("*.nsys-rep", "*.ncu-rep", "*.ncu.csv")
    return sorted(p for pattern in patterns for p in run_dir.glob(pattern))
