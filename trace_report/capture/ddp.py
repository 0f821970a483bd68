"""``capture ddp``: DistributedDataParallel training launched with ``torchrun`` (gloo on CPU,
NCCL on GPU) for each world size of ``--nproc-list`` (or the one ``--nproc``). Every rank runs
the shared loop and writes its own trace, ``run-rank<N>.json``, ``metrics-rank<N>.csv`` and
``steps-rank<N>.csv`` into ``world-<N>/``; results.csv has one row per world size (aggregate
samples/s and scaling efficiency = throughput(N) / (N x throughput(1))), ranks.csv one per rank.

Run as a module (``python -m trace_report.capture.ddp CONFIG.json``) it is the per-rank worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import msgspec
import pandas as pd
import torch

from trace_report.capture.config import CaptureConfig
from trace_report.capture.experiments import repeat_dirs, repeats_note
from trace_report.capture.loop import DistInfo, train
from trace_report.capture.results import ExperimentResult, combine_repeats, metric_chart, summarize
from trace_report.capture.runtime import PROJECT_ROOT, quiet_kineto_on_cpu, resolve_device, write_json
from trace_report.errors import InputError, TraceReportError
from trace_report.manifest import RunManifest, read_manifest, write_manifest
from trace_report.sysutil import available_cpus

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


def launch_plan(
    cfg: CaptureConfig, run_dir: Path, nproc: int | None = None
) -> tuple[list[str], dict[str, str], str, int]:
    """The torchrun command, its environment, the backend and the process count."""
    cuda = resolve_device(cfg.device).type == "cuda"
    backend = "nccl" if cuda else "gloo"
    nproc = nproc or cfg.nproc or (torch.cuda.device_count() if cuda else 2)
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


def world_sizes(cfg: CaptureConfig) -> tuple[int, ...]:
    """``--nproc-list``, or the one ``--nproc`` (default: every GPU on CUDA, 2 on CPU);
    InputError when CUDA has fewer GPUs than a world size asks for."""
    cuda = resolve_device(cfg.device).type == "cuda"
    sizes = cfg.nproc_list or (cfg.nproc or (torch.cuda.device_count() if cuda else 2),)
    if cuda and max(sizes) > torch.cuda.device_count():
        raise InputError(
            f"ddp: world size {max(sizes)} needs {max(sizes)} GPUs; this machine has "
            f"{torch.cuda.device_count()} (one NCCL rank per GPU)"
        )
    return tuple(sizes)


def _last_error_line(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line:
            return line
    return lines[-1] if lines else "no output"


def launch(cfg: CaptureConfig, folder: Path, nproc: int) -> list[dict]:
    """Run one torchrun job of ``nproc`` ranks in ``folder``; the per-rank summary rows."""
    folder.mkdir(parents=True, exist_ok=True)
    command, env, backend, nproc = launch_plan(cfg, folder, nproc)
    write_json(folder / CONFIG_FILE, replace(cfg, progress=False).to_json())
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    (folder / LOG_FILE).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise TraceReportError(
            f"ddp: torchrun ({nproc} processes) exited with code {done.returncode}: "
            f"{_last_error_line(done.stderr)} (full log: {folder / LOG_FILE})"
        )
    rows = [json.loads((folder / f"summary-rank{rank}.json").read_text())
            for rank in range(nproc)]
    write_world_manifest(folder, nproc)
    threads = int(env["OMP_NUM_THREADS"])
    return [{**row, "threads_per_rank": threads} for row in rows]


def write_world_manifest(folder: Path, nproc: int) -> None:
    """``run.json`` of a world-size folder (rank 0's manifest, labelled ``world-<N>``), so that
    ``trace-report`` run analyses find the folder and its per-rank CSV files."""
    source = read_manifest(folder / ("run.json" if nproc == 1 else "run-rank0.json")) or RunManifest()
    manifest = msgspec.structs.replace(
        source, variant=f"world-{nproc}",
        rank_manifests=[f"run-rank{r}.json" for r in range(nproc)] if nproc > 1 else [])
    write_manifest(folder / "run.json", manifest)


def aggregate(ranks: list[dict], world_size: int) -> dict:
    """One world size: samples of every rank per timed epoch over the slowest rank's epoch."""
    epoch_s = max(r["mean_total_s"] for r in ranks)
    samples = sum(r["samples_per_s"] * r["mean_total_s"] for r in ranks)  # per timed epoch
    first = ranks[0]
    return {
        "variant": f"world-{world_size}",
        "world_size": world_size,
        "backend": first["backend"],
        "device": first["device"],
        "model": first["model"],
        "batch_size": first["batch_size"],
        "steps_per_epoch": first["steps_per_epoch"],
        "threads_per_rank": first["threads_per_rank"],
        "mean_total_s": epoch_s,
        "mean_data_s": max(r["mean_data_s"] for r in ranks),
        "mean_compute_s": max(r["mean_compute_s"] for r in ranks),
        "aggregate_samples_per_s": samples / epoch_s,
        "per_rank_samples_per_s": samples / epoch_s / world_size,
        "final_loss": first["final_loss"],
        "test_accuracy": first["test_accuracy"],
    }


def add_scaling_efficiency(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``scaling_efficiency`` = throughput(N) / (N x throughput(1)); when 1 is not in the list,
    relative to the smallest world size n0: (throughput(N) / N) / (throughput(n0) / n0)."""
    base = table.loc[table["world_size"].idxmin()]
    per_rank_base = base["aggregate_samples_per_s"] / base["world_size"]
    out = table.copy()
    out["scaling_efficiency"] = out["aggregate_samples_per_s"] / (out["world_size"] * per_rank_base)
    n0 = int(base["world_size"])
    how = ("scaling_efficiency = throughput(N) / (N x throughput(1))" if n0 == 1 else
           f"scaling_efficiency relative to world size {n0}: (throughput(N)/N) / "
           f"(throughput({n0})/{n0}); add 1 to --nproc-list for the usual definition")
    return out, how


def ddp(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """Launch a DDP job per world size (``--repeats`` each); one aggregated row per size."""
    rows, rank_rows = [], []
    for nproc in world_sizes(cfg):
        repeated = []
        for index, where in enumerate(repeat_dirs(run_dir / f"world-{nproc}", cfg.repeats), 1):
            ranks = launch(cfg, where, nproc)
            rank_rows += [{**r, "world_size": nproc, "repeat": index} for r in ranks]
            repeated.append(aggregate(ranks, nproc))
        rows.append(combine_repeats(
            repeated, timed=("mean_total_s", "mean_data_s", "mean_compute_s",
                             "aggregate_samples_per_s", "per_rank_samples_per_s"),
            spread=("aggregate_samples_per_s",)))
    table, how = add_scaling_efficiency(pd.DataFrame(rows))
    pd.DataFrame(rank_rows).to_csv(run_dir / "ranks.csv", index=False)
    chart = metric_chart(table, "world_size", "aggregate_samples_per_s",
                         "DDP: aggregate samples/s per world size")
    cpus = available_cpus()
    notes = [f"backend {table['backend'].iloc[0]}; world sizes "
             f"{', '.join(map(str, table['world_size']))}; one trace per rank in world-<N>/",
             how, "aggregate_samples_per_s: samples of all ranks per epoch / the slowest rank's "
             "epoch time; per-rank rows in ranks.csv", *repeats_note(cfg)]
    if table["device"].iloc[0] == "cpu" and table["world_size"].max() > cpus:
        notes.append(f"only {cpus} CPUs: world sizes above {cpus} share cores, so their "
                     "efficiency measures oversubscription, not scaling")
    return ExperimentResult("ddp", run_dir, table, chart, notes=notes)


def worker(config_path: Path, backend: str) -> None:
    """Per-rank entry point under torchrun: init the process group, train, write a summary."""
    import torch.distributed as dist


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
