"""``capture torchscript``: train the model (``--steps``), script it, save and load it, check the
loaded model's outputs equal the eager model's, print its graph, report the test-set accuracy of
both models, and time single-image inference (eager against TorchScript, with a speed-up) on
the CPU and, when present, the GPU."""

from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from trace_report.capture.config import CaptureConfig
from trace_report.capture.data import build_loaders, image_size_for
from trace_report.capture.experiments import repeats_note
from trace_report.capture.loop import train
from trace_report.capture.profiling import make_profiler, region
from trace_report.capture.results import ExperimentResult, add_speedup, metric_chart
from trace_report.capture.runtime import seed_everything, synchronize, thread_count
from trace_report.errors import TraceReportError


def script_and_reload(model: nn.Module, path: Path) -> torch.jit.ScriptModule:
    """``torch.jit.script`` the model, save it to ``path`` and load it back (on the CPU).
    Recent torch (2.14 here) marks torch.jit deprecated with a FutureWarning on every call; this experiment
    measures TorchScript on purpose, so those two warnings are silenced here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit")
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
def dataset_accuracy(model: nn.Module, loader, device: torch.device) -> tuple[float, int]:
    """Accuracy in [0, 1] of ``model`` over every batch of ``loader``, and the sample count."""
    correct = seen = 0
    for images, labels in loader:
        out = model(images.to(device))
        correct += int((out.argmax(1) == labels.to(device)).sum())
        seen += labels.size(0)
    return (correct / seen if seen else float("nan")), seen


def interleaved_latency(
    models: dict[str, nn.Module], image: torch.Tensor, cfg: CaptureConfig
) -> dict[str, dict[str, Any]]:
    """:func:`latency_ms` of every model ``--repeats`` times, the models taking turns (order
    reversed on every other repeat), so that load from other processes falls on all of them
    alike. Per model: the median of the per-repeat figures, and the spread of the per-repeat
    medians in ``median_ms_min`` / ``median_ms_max``."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in models}
    order = list(models)
    for index in range(cfg.repeats):
        for name in order if index % 2 == 0 else order[::-1]:
            runs[name].append(latency_ms(models[name], image, runs=cfg.latency_runs,
                                         warmup=cfg.latency_warmup))
    out = {}
    for name, measured in runs.items():
        summary: dict[str, Any] = {k: statistics.median(r[k] for r in measured)
                                   for k in measured[0]}
        summary["median_ms_min"] = min(r["median_ms"] for r in measured)
        summary["median_ms_max"] = max(r["median_ms"] for r in measured)
        summary["repeats"] = cfg.repeats
        out[name] = summary
    return out


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
    """Train, script, save, load, check, print the graph; test accuracy and latency of the
    eager and the TorchScript model."""
    run = train(cfg, run_dir / "train", variant="train")
    seed_everything(cfg.seed)
    size = image_size_for(cfg)
    with thread_count(cfg.threads):
        eager = run.model.to("cpu").eval()
        loaded = script_and_reload(eager, run_dir / f"{cfg.model}.torchscript.pt")
        check = compare_outputs(eager, loaded, torch.randn(4, 3, size, size))
        if not check["outputs_close"]:
            raise TraceReportError(
                f"TorchScript outputs differ from eager (max abs diff {check['max_abs_diff']:.3g})"
            )
        graph = str(loaded.graph)
        (run_dir / "graph.txt").write_text(graph)
        test_loader = build_loaders(cfg, torch.device("cpu")).test
        rows = []
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            image = torch.randn(1, 3, size, size, device=device)
            models = {"eager": eager.to(device), "torchscript": loaded.to(device)}
            timings = interleaved_latency(models, image, cfg)
            for mode, model in models.items():
                accuracy, seen = dataset_accuracy(model, test_loader, torch.device(device))
                if cfg.profile:
                    profile_inference(cfg, model, image, run_dir / f"{device}-{mode}")
                rows.append({"variant": f"{device}-{mode}", "device": device, "mode": mode,
                             "test_accuracy": accuracy, "test_samples": seen,
                             "train_steps": len(run.steps), "runs": cfg.latency_runs,
                             "warmup": cfg.latency_warmup, **timings[mode], **check})
            eager.to("cpu")
            loaded.to("cpu")
    table = add_speedup(pd.DataFrame(rows), "median_ms", base="eager", by="device",
                        base_col="mode")
    table["accuracy_equal"] = table.groupby("device")["test_accuracy"].transform("nunique") == 1
    chart = metric_chart(table, "variant", "median_ms", "single-image latency (median, ms)")
    notes = [
        f"trained {len(run.steps)} steps first (train/); test accuracy over "
        f"{rows[0]['test_samples']} test images: eager {rows[0]['test_accuracy']:.4f}, "
        f"TorchScript {rows[1]['test_accuracy']:.4f}",
        f"saved {cfg.model}.torchscript.pt; reloaded outputs equal: {check['outputs_equal']} "
        f"(max abs diff {check['max_abs_diff']:.3g})",
        "speedup: eager median latency / the row's, per device; graph written to graph.txt",
        *repeats_note(cfg),
    ]
    if not table["accuracy_equal"].all():
        notes.insert(0, "WARNING: eager and TorchScript test accuracies differ")
    return ExperimentResult("torchscript", run_dir, table, chart, notes=notes, details=graph,
                            runs=[run])
