"""``python -m trace_report.capture.gpucheck`` (``./run gpu-check``): every capture experiment,
briefly, on a CUDA machine, then the analysis of the baseline trace, and (when installed)
Nsight Systems and Nsight Compute runs. Each step is a separate process; its traces land in
``<out-dir>/gpu-check-<date>/<step>/`` and its output in ``logs/<step>.log``; ``summary.md`` and
``summary.json`` say which steps passed. No network and nothing beyond this project and torch.

``--dry-run`` prints the plan (the exact commands) and runs nothing; without CUDA, anything but
``--dry-run`` is refused with one ``Error:`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from trace_report.errors import InputError, TraceReportError

CAPTURE = [sys.executable, "-m", "trace_report.capture"]
ANALYSE = [sys.executable, "-m", "trace_report.cli"]


@dataclass(frozen=True)
class Step:
    """One command of the check; ``needs`` names a binary that must be on PATH."""

    name: str
    argv: list[str]
    needs: str | None = None

    def shell(self) -> str:
        return shlex.join(self.argv)


@dataclass
class Outcome:
    """What one step did: ``passed``, ``failed``, ``timeout``, ``skipped`` or ``interrupted``."""

    name: str
    status: str
    rc: int | None
    wall_s: float
    command: str
    log: str | None
    reason: str = ""


def world_sizes(gpus: int) -> str:
    """1, 2, 4, 8 up to the GPU count (at least 1): the ``--nproc-list`` of the ddp step."""
    return ",".join(str(n) for n in (1, 2, 4, 8) if n <= max(gpus, 1))


def plan(folder: Path, *, steps: int, gpus: int) -> list[Step]:
    """Every step of the check, with traces under ``folder``."""
    common = ["--device", "cuda", "--steps", str(steps), "--no-progress", "--out-dir", str(folder)]

    def capture(name: str, *args: str, needs: str | None = None) -> Step:
        return Step(name, [*CAPTURE, *args, *common, "--run-id", name], needs)

    baseline = str(folder / "baseline")
    # The steps whose traces the tests pin come first (a short lease still yields them);
    # torch.compile, the slowest, comes last.
    return [
        capture("baseline", "baseline"),
        Step("analyse-top-kernels", [*ANALYSE, "top-kernels", baseline, "--limit", "15"]),
        Step("analyse-breakdown", [*ANALYSE, "breakdown", baseline]),
        Step("analyse-flags", [*ANALYSE, "flags", baseline]),
        capture("channels-last", "baseline", "--channels-last"),
        capture("ddp", "ddp", "--nproc-list", world_sizes(gpus)),
        # the forward pass of one step (a whole step under ncu takes several times longer): its
        # FLOP per image is what `capture params` counts
        capture("ncu", "baseline", "--ncu", "--ncu-region", "forward", "--wait", "0",
                "--warmup", "1", "--active", "1", "--batch-size", "16", needs="ncu"),
        capture("nsys", "baseline", "--nsys", needs="nsys"),
        capture("baseline-imagenet", "baseline", "--model", "resnet18-imagenet",
                "--image-size", "224", "--batch-size", "32"),
        capture("data-on-device", "baseline", "--data-on-device", "--batch-size", "256"),
        capture("params", "params", "--image-size", "224", "--num-classes", "1000"),
        capture("optimized", "optimized", "--repeats", "3"),
        capture("workers", "workers", "--workers-list", "0,2,4"),
        capture("devices", "devices"),
        capture("optimizers", "optimizers"),
        capture("no-bn", "no-bn"),
        capture("amp", "amp", "--batch-sizes", "64,256"),
        capture("amp-bf16", "amp", "--amp-dtype", "bf16", "--batch-sizes", "64,256"),
        capture("torchscript", "torchscript", "--latency-runs", "100", "--latency-warmup", "20"),
        capture("compile", "compile", "--timed-runs", "2", "--warmup-epochs", "1"),
        capture("compile-reduce-overhead", "compile", "--compile-mode", "reduce-overhead",
                "--timed-runs", "2", "--warmup-epochs", "2"),
    ]


def run_step(step: Step, logs: Path, timeout_s: float) -> Outcome:
    """Run one step, its stdout and stderr into ``logs/<name>.log``."""
    if step.needs and shutil.which(step.needs) is None:
        return Outcome(step.name, "skipped", None, 0.0, step.shell(), None,
                       f"{step.needs} not on PATH")
    log = logs / f"{step.name}.log"
    start = time.perf_counter()
    with open(log, "w") as fh:
        fh.write(f"$ {step.shell()}\n")
        fh.flush()
        # Its own process group: a timeout ends the step's children too (ncu and the
        # capture under it, torchrun and, through its SIGTERM, the DDP workers).
        proc = subprocess.Popen(step.argv, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return Outcome(step.name, "timeout", None, time.perf_counter() - start,
                           step.shell(), str(log), f"over {timeout_s:.0f} s")
        except BaseException:  # Ctrl-C: leave nothing running on the GPU
            kill_group(proc)
            raise
    status = "passed" if code == 0 else "failed"
    reason = "" if status == "passed" else last_error(log)
    return Outcome(step.name, status, code, time.perf_counter() - start,
                   step.shell(), str(log), reason)


GRACE_S = 10.0
"""Seconds a stopped step gets between SIGTERM and SIGKILL."""


def kill_group(proc: subprocess.Popen) -> None:
    """Stop ``proc``'s process group (it leads one): SIGTERM first, which torchrun passes on to
    its DDP workers (they run in sessions of their own, outside the group), SIGKILL to what is
    left after :data:`GRACE_S`; reap ``proc``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def last_error(log: Path) -> str:
    """The last ``Error:`` (or, failing that, the last non-empty) line of a log."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line]
    return (errors or lines or ["no output"])[-1][:300]


def environment() -> dict[str, object]:
    """torch, CUDA and GPU facts for the summary."""
    import torch

    return {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "nsys": shutil.which("nsys"),
        "ncu": shutil.which("ncu"),
        "python": sys.executable,
    }


def write_summary(folder: Path, outcomes: list[Outcome], env: dict[str, object]) -> Path:
    """``summary.json`` and ``summary.md``; returns the Markdown path."""
    (folder / "summary.json").write_text(json.dumps(
        {"environment": env, "steps": [asdict(o) for o in outcomes]}, indent=2) + "\n")
    lines = [f"# gpu-check {folder.name}", "",
             *(f"- {key}: {value}" for key, value in env.items()), "",
             "| step | status | wall_s | note |", "|---|---|---|---|"]
    for o in outcomes:
        note = o.reason.replace("|", "\\|")
        lines.append(f"| {o.name} | {o.status} | {o.wall_s:.1f} | {note} |")
    path = folder / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def check(out_dir: Path, *, steps: int, dry_run: bool, timeout_s: float,
          only: list[str] | None = None) -> int:
    """Print the plan (``dry_run``) or run it; 0 when every step passed or was skipped."""
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not dry_run:
        raise InputError("gpu-check needs a CUDA device and none is available on this "
                         "machine (use --dry-run to print the plan)")
    folder = Path(out_dir) / f"gpu-check-{dt.datetime.now():%Y%m%d-%H%M%S}"
    todo = plan(folder, steps=steps, gpus=torch.cuda.device_count() if cuda else 0)
    if only:
        unknown = sorted(set(only) - {s.name for s in todo})
        if unknown:
            raise InputError(f"--only: no step named {', '.join(unknown)}")
        todo = [s for s in todo if s.name in only]
    if dry_run:
        for step in todo:
            needs = f"  # needs {step.needs} on PATH" if step.needs else ""
            print(f"{step.shell()}{needs}")
        return 0
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    env = environment()
    summary = write_summary(folder, outcomes, env)  # rewritten after each step: a run cut
    for step in todo:                               # off says how far it got
        print(f"[gpu-check] {step.name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            outcome = run_step(step, logs, timeout_s)
        except KeyboardInterrupt:  # run_step has stopped the step's processes
            outcomes.append(Outcome(step.name, "interrupted", None, time.perf_counter() - start,
                                    step.shell(), str(logs / f"{step.name}.log"), "interrupted"))
            write_summary(folder, outcomes, env)
            raise
        print(f"[gpu-check] {step.name}: {outcome.status} ({outcome.wall_s:.1f} s) "
              f"{outcome.reason}", file=sys.stderr, flush=True)
        outcomes.append(outcome)
        summary = write_summary(folder, outcomes, env)
    print(summary.read_text())
    return 0 if all(o.status in ("passed", "skipped") for o in outcomes) else 1


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``Error: ...`` and exit 1 for bad input or no CUDA."""
    parser = argparse.ArgumentParser(
        prog="python -m trace_report.capture.gpucheck", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument("--out-dir", type=Path, default=Path("traces"))
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (>= 5)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per step")
    parser.add_argument("--only", default=None, help="comma-separated step names")
    args = parser.parse_args(argv)
    # SIGTERM/SIGHUP (a scheduler, a closed terminal) stop the running step as Ctrl-C does
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if args.steps < 5:
            raise InputError(f"--steps must be at least 5 (the profiler schedule), got {args.steps}")
        only = [s for s in args.only.split(",") if s] if args.only else None
        return check(args.out_dir, steps=args.steps, dry_run=args.dry_run,
                     timeout_s=args.timeout, only=only)
    except TraceReportError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Interrupted: the running step was stopped; summary.md lists the steps so far",
              file=sys.stderr)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(main())
