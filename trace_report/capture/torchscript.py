"""``capture torchscript``: script the model, save and load it, check the loaded model's outputs
equal the eager model's, print its graph, and time single-image inference (eager against
TorchScript) on the CPU and, when present, the GPU."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from trace_report.capture.config import CaptureConfig
from trace_report.capture.data import image_size_for
from trace_report.capture.models import build_model
from trace_report.capture.profiling import make_profiler, region
from trace_report.capture.results import ExperimentResult, metric_chart
from trace_report.capture.runtime import seed_everything, synchronize, thread_count
from trace_report.errors import TraceReportError


def script_and_reload(model: nn.Module, path: Path) -> torch.jit.ScriptModule:
    """``torch.jit.script`` the model, save it to ``path`` and load it back (on the CPU)."""
    scripted = torch.jit.script(model)
    scripted.save(str(path))
    return torch.jit.load(str(path), map_location="cpu")


@torch.no_grad()
def compare_outputs(eager: nn.Module, loaded: nn.Module, images: torch.Tensor) -> dict[str, Any]:
    """Whether the two models agree on ``images``: exact equality and the max abs difference."""
    a, b = eager(images), loaded(images)
    return {
        "outputs_equal": bool(torch.equal(a, b)),
        "outputs_close": bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6)),
        "max_abs_diff": float((a - b).abs().max()),
    }


@torch.no_grad()
def latency_ms(
    model: nn.Module, image: torch.Tensor, *, runs: int, warmup: int
) -> dict[str, float]:
    """Single-input latency (ms): ``warmup`` untimed calls, then ``runs`` timed calls, each
    synchronised on the device."""
    device = image.device
    for _ in range(warmup):
        model(image)
    synchronize(device)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        model(image)
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "mean_ms": statistics.fmean(times),
        "p90_ms": times[min(len(times) - 1, int(0.9 * len(times)))],
        "min_ms": times[0],
    }


@torch.no_grad()
def profile_inference(cfg: CaptureConfig, model: nn.Module, image: torch.Tensor, out: Path):
    """A profiler trace of single-image inference (the ``forward`` region), one call per step."""
    out.mkdir(parents=True, exist_ok=True)
    nvtx = image.device.type == "cuda"
    with make_profiler(cfg, out, image.device) as prof:
        for _ in range(cfg.schedule_steps):
            with region("forward", nvtx=nvtx):
                model(image)
            synchronize(image.device)
            prof.step()


def torchscript(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """Script, save, load, check, print the graph, and time eager against TorchScript."""
    seed_everything(cfg.seed)
    size = image_size_for(cfg)
    with thread_count(cfg.threads):
        eager = build_model(cfg.model, cfg.num_classes).eval()
        loaded = script_and_reload(eager, run_dir / f"{cfg.model}.torchscript.pt")
        check = compare_outputs(eager, loaded, torch.randn(4, 3, size, size))
        if not check["outputs_close"]:
            raise TraceReportError(
                f"TorchScript outputs differ from eager (max abs diff {check['max_abs_diff']:.3g})"
            )
        graph = str(loaded.graph)
        (run_dir / "graph.txt").write_text(graph)
        rows = []
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            image = torch.randn(1, 3, size, size, device=device)
            for mode, model in (("eager", eager), ("torchscript", loaded)):
                model.to(device)
                timing = latency_ms(model, image, runs=cfg.latency_runs, warmup=cfg.latency_warmup)
                if cfg.profile:
                    profile_inference(cfg, model, image, run_dir / f"{device}-{mode}")
                rows.append({"variant": f"{device}-{mode}", "device": device, "mode": mode,
                             "runs": cfg.latency_runs, "warmup": cfg.latency_warmup,
                             **timing, **check})
            eager.to("cpu")
            loaded.to("cpu")
    table = pd.DataFrame(rows)
    chart = metric_chart(table, "variant", "median_ms", "single-image latency (median, ms)")
    notes = [
        f"saved {cfg.model}.torchscript.pt; reloaded outputs equal: {check['outputs_equal']} "
        f"(max abs diff {check['max_abs_diff']:.3g})",
        "graph written to graph.txt",
    ]
    return ExperimentResult("torchscript", run_dir, table, chart, notes=notes, details=graph)
