"""``capture params``: parameter facts per model (trainable parameters, parameters holding a
gradient after one backward pass, conv layers, last linear input width, optimizer state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from trace_report.capture.config import OPTIMIZERS, CaptureConfig
from trace_report.capture.models import (
    MIN_IMAGE_SIZE,
    build_model,
    build_optimizer,
    count_convs,
    count_trainable,
    count_with_grad,
    last_linear_in_features,
    optimizer_state_tensors,
)
from trace_report.capture.results import ExperimentResult, metric_chart
from trace_report.capture.runtime import seed_everything, thread_count

PARAMS_MODELS: tuple[str, ...] = ("resnet18", "resnet18-nobn", "resnet50", "alexnet")


def model_facts(name: str, cfg: CaptureConfig) -> dict[str, Any]:
    """Facts for model ``name`` on the CPU after one forward/backward pass of 2 images, and
    the optimizer-state tensors each optimizer holds after one step."""
    seed_everything(cfg.seed)
    model = build_model(name, cfg.num_classes)
    size = max(32, MIN_IMAGE_SIZE.get(name, 0))
    images = torch.randn(2, 3, size, size)
    labels = torch.arange(2) % cfg.num_classes
    F.cross_entropy(model(images), labels).backward()
    row: dict[str, Any] = {
        "model": name,
        "trainable_params": count_trainable(model),
        "params_with_grad": count_with_grad(model),
        "param_tensors": sum(1 for _ in model.parameters()),
        "conv_layers": count_convs(model),
        "last_linear_in_features": last_linear_in_features(model),
    }
    for opt_name in OPTIMIZERS:
        optimizer = build_optimizer(
            opt_name, model.parameters(),
            lr=cfg.learning_rate, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
        )
        optimizer.step()
        row[f"optimizer_state_tensors_{opt_name}"] = optimizer_state_tensors(optimizer)
    return row


def params(cfg: CaptureConfig, run_dir: Path) -> ExperimentResult:
    """One row of parameter facts per model."""
    with thread_count(cfg.threads):
        table = pd.DataFrame([model_facts(name, cfg) for name in PARAMS_MODELS])
    chart = metric_chart(table, "model", "trainable_params", "trainable parameters per model")
    notes = ["optimizer state counted after one step with every gradient present"]
    return ExperimentResult("params", run_dir, table, chart, notes=notes)
