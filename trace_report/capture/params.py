"""``capture params``: parameter facts per model (trainable parameters, parameters holding a
gradient after one backward pass, conv layers, last linear input width, optimizer state) and
forward FLOP per image at ``--image-size`` and ``--num-classes`` (``FlopCounterMode``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from trace_report.capture.config import OPTIMIZERS, CaptureConfig
from trace_report.capture.data import image_size_for
from trace_report.capture.models import (
    MIN_IMAGE_SIZE,
    build_model,
    build_optimizer,
    count_convs,
    count_trainable,
    count_with_grad,
    forward_flop,
    last_linear_in_features,
    optimizer_state_tensors,
)
from trace_report.capture.results import ExperimentResult, metric_chart
from trace_report.capture.runtime import seed_everything, thread_count

PARAMS_MODELS: tuple[str, ...] = (
    "resnet18", "resnet18-nobn", "resnet18-imagenet", "resnet50", "alexnet",
)


def model_facts(name: str, cfg: CaptureConfig) -> dict[str, Any]:
    """Facts for model ``name`` on the CPU after one forward/backward pass of 2 images, the
    optimizer-state tensors each optimizer holds after one step, and the forward FLOP of one
    ``--batch-size`` batch at ``--image-size`` divided by the batch size."""
    seed_everything(cfg.seed)
    classes = cfg.num_classes or 10
    flop_size = image_size_for(replace(cfg, model=name))
    batch_flop = forward_flop(name, num_classes=classes, image_size=flop_size,
                              batch_size=cfg.batch_size)
    model = build_model(name, classes)
    size = max(32, MIN_IMAGE_SIZE.get(name, 0))
    images = torch.randn(2, 3, size, size)
    labels = torch.arange(2) % classes
    F.cross_entropy(model(images), labels).backward()
    row: dict[str, Any] = {
        "model": name,
        "trainable_params": count_trainable(model),
        "params_with_grad": count_with_grad(model),
        "param_tensors": sum(1 for _ in model.parameters()),
        "conv_layers": count_convs(model),
        "last_linear_in_features": last_linear_in_features(model),
        "num_classes": classes,
        "image_size": flop_size,
        "forward_flop_per_image": batch_flop // cfg.batch_size,
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
    notes = [
        "optimizer state counted after one step with every gradient present",
        f"forward_flop_per_image: torch.utils.flop_counter.FlopCounterMode over the forward "
        f"pass of one batch of {cfg.batch_size}, divided by {cfg.batch_size} (a multiply-add "
        "is 2 FLOP; training costs about 3x the forward pass)",
    ]
    return ExperimentResult("params", run_dir, table, chart, notes=notes)
