"""``capture ddp``: DistributedDataParallel training launched with ``torchrun`` (gloo on CPU,
NCCL on GPU); every rank runs the shared loop and writes its own trace, ``run-rank<N>.json``,
``metrics-rank<N>.csv`` and ``steps-rank<N>.csv`` into the run folder.

Run as a module (``python -m trace_report.capture.ddp CONFIG.json``) it is the per-rank worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pandas as pd
import torch

from trace_report.capture.config import CaptureConfig
from trace_report.capture.experiments import available_cpus
from trace_report.capture.results import ExperimentResult, time_chart
from trace_report.capture.runtime import PROJECT_ROOT, resolve_device, write_json
from trace_report.errors import TraceReportError

CONFIG_FILE = "ddp-config.json"
LOG_FILE = "ddp.log"


def config_from_json(payload: dict) -> CaptureConfig:
    """Rebuild a :class:`CaptureConfig` from :meth:`CaptureConfig.to_json` output."""
    values = {}
    for f in fields(CaptureConfig):
        if f.name not in payload:
            continue
        value = payload[f.name]
        if f.name in {"out_dir", "data_dir"} and value is not None:
            value = Path(value)
        elif isinstance(value, list):
            value = tuple(value)
        values[f.name] = value
    return CaptureConfig(**values)


def launch_plan(cfg: CaptureConfig, run_dir: Path) -> tuple[list[str], dict[str, str], str, int]:
    """The torchrun command, its environment, the backend and the process count."""
    cuda = resolve_device(cfg.device).type == "cuda"
    backend = "nccl" if cuda else "gloo"
    nproc = cfg.nproc or (torch.cuda.device_count() if cuda else 2)
    threads = cfg.threads or max(1, available_cpus() // nproc)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={nproc}", "-m", "trace_report.capture.ddp",
        str(run_dir / CONFIG_FILE), backend,
    ]
    env = dict(os.environ)  # the children need it; it is never written to a manifest
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = str(threads)
    return command, env, backend, nproc


def _last_error_line(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line:
            return line
    return lines[-1] if lines else "no output"


def ddp(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """Launch the DDP job and collect one results row per rank."""
    command, env, backend, nproc = launch_plan(cfg, run_dir)
    write_json(run_dir / CONFIG_FILE, replace(cfg, progress=False).to_json())
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    (run_dir / LOG_FILE).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise TraceReportError(
            f"ddp: torchrun exited with code {done.returncode}: "
            f"{_last_error_line(done.stderr)} (full log: {run_dir / LOG_FILE})"
        )
    rows = []
    for rank in range(nproc):
        summary = json.loads((run_dir / f"summary-rank{rank}.json").read_text())
        rows.append(summary)
    table = pd.DataFrame(rows)
    chart = time_chart(table, "rank", f"DDP ({backend}, {nproc} processes): time per epoch")
    notes = [f"backend {backend}, {nproc} processes, one trace per rank"]
    return ExperimentResult("ddp", run_dir, table, chart, notes=notes)


def worker(config_path: Path, backend: str) -> None:
    """Per-rank entry point under torchrun: init the process group, train, write a summary."""
    import torch.distributed as dist

    from trace_report.capture.loop import DistInfo, train
    from trace_report.capture.results import summarize
    from trace_report.capture.runtime import quiet_kineto_on_cpu

    quiet_kineto_on_cpu()
    cfg = config_from_json(json.loads(Path(config_path).read_text()))
    info = DistInfo(
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        local_rank=int(os.environ["LOCAL_RANK"]),
        backend=backend,
    )
    dist.init_process_group(backend)
    try:
        run = train(cfg, config_path.parent, dist=info, variant=f"rank{info.rank}")
        row = summarize(run, variant=f"rank{info.rank}", rank=info.rank,
                        world_size=info.world_size, backend=backend)
        row["trace"] = run.manifest["traces"][0] if run.manifest["traces"] else None
        write_json(config_path.parent / f"summary-rank{info.rank}.json", row)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    worker(Path(sys.argv[1]), sys.argv[2])
