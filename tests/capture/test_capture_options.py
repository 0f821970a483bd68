"""Capture options: ImageFolder class counts, CIFAR-100 (synthetic and pickle), the autocast
dtype, torch.compile modes and the device-resident synthetic set."""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from test_capture_cli import TINY, assert_one_error_line
from test_capture_runs import capture, metrics

from trace_report.capture import experiments
from trace_report.capture.__main__ import main
from trace_report.capture.config import CaptureConfig, validate
from trace_report.capture.data import (
    DeviceLoader,
    SyntheticCIFAR,
    build_loaders,
    dataset_classes,
    resolve_classes,
)
from trace_report.capture.loop import DistInfo, Trainer, amp_dtype
from trace_report.capture.runner import run_capture
from trace_report.errors import InputError


def image_folder(root: Path, classes: int, *, per_class: int = 2, val_classes: int | None = None):
    """A tiny ImageFolder tree: ``classes`` folders in train/, ``val_classes`` in val/."""
    from PIL import Image

    for split, count in (("train", classes), ("val", val_classes or classes)):
        for k in range(count):
            folder = root / split / f"class{k:02d}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                Image.new("RGB", (12, 10), (k * 20, i * 60, 90)).save(folder / f"{i}.png")
    return root


def test_image_folder_takes_its_class_count_from_the_folder(capsys, tmp_path):
    data = image_folder(tmp_path / "data", 12)
    run_dir, _ = capture(capsys, tmp_path / "out", "--dataset", "imagefolder", "--data-dir",
                         str(data), *TINY, "--batch-size", "4", "--steps", "2")
    (epoch,) = metrics(run_dir)
    assert int(epoch["samples"]) == 8
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert config["num_classes"] == len(list((data / "train").iterdir())) == 12


def test_image_folder_with_a_disagreeing_num_classes_is_one_error_line(capsys, tmp_path):
    data = image_folder(tmp_path / "data", 12)
    code = main(["--dataset", "imagefolder", "--data-dir", str(data), "--num-classes", "10",
                 *TINY, "--out-dir", str(tmp_path / "out")])
    assert_one_error_line(code, capsys.readouterr().err, "--num-classes 10", "12 classes")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_image_folder_with_different_train_and_val_classes_is_an_error(tmp_path):
    data = image_folder(tmp_path / "data", 3, val_classes=2)
    with pytest.raises(InputError, match="same class folders"):
        dataset_classes(CaptureConfig(dataset="imagefolder", data_dir=data))


def test_explicit_num_classes_is_kept_for_synthetic_data():
    assert resolve_classes(CaptureConfig()).num_classes == 10
    assert resolve_classes(CaptureConfig(num_classes=7)).num_classes == 7
    assert resolve_classes(CaptureConfig(dataset="cifar100")).num_classes == 100


def test_cifar100_without_data_dir_is_synthetic_with_100_classes(tmp_path):
    cfg = validate(CaptureConfig(dataset="cifar100", steps=2, batch_size=8, synthetic_test=16))
    loaders = build_loaders(resolve_classes(cfg), torch.device("cpu"))
    labels = loaders.train.dataset.labels
    assert int(labels.max()) < 100 and len(labels.unique()) > 10  # more than CIFAR-10's classes
    reference = SyntheticCIFAR(len(labels), num_classes=100, seed=0, split="train")
    assert torch.equal(labels, reference.labels)


def write_fake_cifar100(root: Path, per_split: int = 16) -> Path:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ("train", "test"):
        batch = {b"data": rng.integers(0, 256, (per_split, 3072), dtype=np.uint8),
                 b"fine_labels": [int(x) for x in rng.integers(0, 100, per_split)],
                 b"coarse_labels": [int(x) for x in rng.integers(0, 20, per_split)]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh)
    return root


def test_cifar100_pickle_layout_uses_the_fine_labels(capsys, tmp_path):
    data = write_fake_cifar100(tmp_path / "data")
    run_dir, _ = capture(capsys, tmp_path / "out", "--dataset", "cifar100", "--data-dir",
                         str(data), *TINY)
    (epoch,) = metrics(run_dir)
    assert int(epoch["samples"]) == 16 and int(epoch["test_samples"]) == 16
    assert json.loads((run_dir / "run.json").read_text())["config"]["num_classes"] == 100
    with open(data / "cifar-100-python" / "train", "rb") as fh:
        fine = pickle.load(fh, encoding="bytes")[b"fine_labels"]
    cfg = resolve_classes(CaptureConfig(dataset="cifar100", data_dir=data, batch_size=4))
    assert build_loaders(cfg, torch.device("cpu")).train.dataset.labels == fine


def test_missing_cifar100_is_one_error_line(capsys, tmp_path):
    code = main(["--dataset", "cifar100", "--data-dir", str(tmp_path), *TINY,
                 "--out-dir", str(tmp_path / "out")])
    assert_one_error_line(code, capsys.readouterr().err, "CIFAR-100 not found")


# ------------------------------------------------------------------------- AMP dtype, compile mode

def test_amp_dtype_defaults_and_choices():
    cpu = torch.device("cpu")
    assert amp_dtype(CaptureConfig(amp=True), cpu) == torch.bfloat16
    assert amp_dtype(CaptureConfig(amp=True, amp_dtype="bf16"), cpu) == torch.bfloat16
    assert amp_dtype(CaptureConfig(amp=True), torch.device("cuda")) == torch.float16
    assert amp_dtype(CaptureConfig(amp=True, amp_dtype="bf16"), torch.device("cuda")) == \
        torch.bfloat16
    with pytest.raises(InputError, match="fp16 needs CUDA"):
        amp_dtype(CaptureConfig(amp=True, amp_dtype="fp16"), cpu)


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--amp", "--amp-dtype", "fp16", "--device", "cpu"], "--amp-dtype fp16 needs CUDA"),
    (["amp", "--amp-dtype", "fp16", "--device", "cpu"], "--amp-dtype fp16 needs CUDA"),
    (["--amp-dtype", "fp8"], "--amp-dtype 'fp8'"),
    (["--compile-mode", "fast"], "--compile-mode 'fast'"),
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["compile", "--warmup-epochs", "0"], "--warmup-epochs must be at least 1"),
    (["--num-classes", "0"], "--num-classes must be at least 1"),
    (["ddp", "--nproc", "2", "--nproc-list", "1,2"], "cannot be combined"),
    (["ddp", "--nproc-list", "1,x"], "--nproc-list"),
    (["--data-on-device", "--workers", "2"], "drop --workers"),
    (["--data-on-device", "--dataset", "imagefolder", "--data-dir", "."], "synthetic"),
])
def test_new_bad_options_give_one_error_line(capsys, tmp_path, argv, fragment):
    code = main([*argv, "--out-dir", str(tmp_path), "--no-progress"])
    assert_one_error_line(code, capsys.readouterr().err, fragment)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_bf16_autocast_runs_on_cpu(capsys, tmp_path):
    run_dir, _ = capture(capsys, tmp_path, "--amp", "--amp-dtype", "bf16", *TINY, "--no-profile")
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["config"]["amp_dtype"] == "bf16"
    assert float(metrics(run_dir)[0]["loss"]) > 0


def test_compile_mode_reaches_torch_compile(monkeypatch):
    seen = {}

    def fake_compile(model, mode=None):
        seen["mode"] = mode
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    for mode, expected in (("default", None), ("max-autotune", "max-autotune"),
                           ("reduce-overhead", "reduce-overhead")):
        Trainer(CaptureConfig(compile=True, compile_mode=mode, model="resnet18"),
                torch.device("cpu"), DistInfo())
        assert seen["mode"] == expected


@pytest.mark.parametrize(("cfg", "expected"), [
    (CaptureConfig(experiment="compile", compile_mode="reduce-overhead"), True),
    (CaptureConfig(compile=True, compile_mode="max-autotune"), True),
    (CaptureConfig(experiment="compile"), False),  # mode default: no CUDA graphs
    (CaptureConfig(compile_mode="reduce-overhead"), False),  # nothing compiled
])
def test_cuda_graph_compile_modes_imply_set_to_none(cfg, expected):
    # On an H200 (torch 2.11) `capture compile --compile-mode reduce-overhead` stopped in the
    # second step while zero_grad(set_to_none=False) kept the CUDA graphs' gradients.
    assert validate(cfg).set_to_none is expected


def test_the_experiment_runs_with_the_validated_options(monkeypatch, tmp_path):
    seen = []

    class Stop(Exception):
        pass

    def fake_compile(cfg, run_dir):
        seen.append(cfg)
        raise Stop

    monkeypatch.setattr(experiments, "compile_", fake_compile)
    cfg = CaptureConfig(experiment="compile", compile_mode="reduce-overhead", device="cpu",
                        out_dir=tmp_path, progress=False)
    with pytest.raises(Stop):
        run_capture(cfg)
    assert [c.set_to_none for c in seen] == [True]


# ------------------------------------------------------------------------- data on the device

def test_device_loader_yields_the_dataset_samples_without_a_dataloader():
    dataset = SyntheticCIFAR(20, image_size=8, seed=3)
    loader = DeviceLoader(dataset, torch.device("cpu"), 6, shuffle=False, drop_last=False)
    batches = list(loader)
    assert len(loader) == len(batches) == 4 and [len(b[1]) for b in batches] == [6, 6, 6, 2]
    images = torch.cat([b[0] for b in batches])
    expected = torch.stack([dataset[i][0] for i in range(20)])
    torch.testing.assert_close(images, expected)
    assert torch.equal(torch.cat([b[1] for b in batches]), dataset.labels)


def test_device_loader_shuffles_per_epoch_and_shards_by_rank():
    dataset = SyntheticCIFAR(24, image_size=8, seed=1)
    ranks = [DeviceLoader(dataset, torch.device("cpu"), 4, shuffle=True, drop_last=True,
                          seed=5, rank=r, world_size=2) for r in (0, 1)]
    first = [torch.cat([b[1] for b in loader]) for loader in ranks]
    assert all(len(labels) == 12 for labels in first)
    for loader in ranks:
        loader.set_epoch(1)
    second = torch.cat([b[1] for b in ranks[0]])
    assert not torch.equal(first[0], second)  # a new permutation (24! orders: fails ~never)
    assert sorted(torch.cat(first).tolist()) == sorted(dataset.labels.tolist())  # a partition


def test_data_on_device_run_has_no_dataloader_in_the_trace(capsys, tmp_path):
    from test_capture_runs import annotation_names, read_trace, traces_in

    run_dir, _ = capture(capsys, tmp_path, "--data-on-device", *TINY)
    names = annotation_names(read_trace(traces_in(run_dir)[0]))
    assert "forward" in names
    assert not [n for n in names if n.startswith("enumerate(DataLoader)")]
    with open(run_dir / "steps.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 2


# ------------------------------------------------------------------------- DDP world sizes

def test_ddp_world_sizes_beyond_the_gpu_count_are_an_input_error(monkeypatch):
    from trace_report.capture.ddp import world_sizes

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert world_sizes(CaptureConfig(device="cuda", nproc_list=(1, 2, 4))) == (1, 2, 4)
    assert world_sizes(CaptureConfig(device="cuda")) == (4,)
    with pytest.raises(InputError, match="needs 8 GPUs; this machine has 4"):
        world_sizes(CaptureConfig(device="cuda", nproc_list=(1, 2, 4, 8)))


def test_scaling_efficiency_is_relative_to_one_process_or_the_smallest_world():
    import pandas as pd

    from trace_report.capture.ddp import add_scaling_efficiency

    table = pd.DataFrame({"world_size": [1, 2, 4], "aggregate_samples_per_s": [100.0, 180, 300]})
    out, how = add_scaling_efficiency(table)
    assert list(out["scaling_efficiency"]) == pytest.approx([1.0, 180 / 200, 300 / 400])
    assert "throughput(1)" in how
    out, how = add_scaling_efficiency(table.iloc[1:])
    assert list(out["scaling_efficiency"]) == pytest.approx([1.0, (300 / 4) / (180 / 2)])
    assert "relative to world size 2" in how


def test_overhead_benchmark_builds_its_tiny_model_with_the_dataset_classes(monkeypatch):
    from benchmarks import capture_overhead_loop as overhead

    seen = {}

    def fake_compare(trainer, loaders, steps, repeats):  # skip the 800 timed tiny steps
        seen["classes"] = trainer.model[-1].out_features
        seen["labels"] = int(loaders.train.dataset.labels.max()) + 1
        return {"plain": [(1e-3, 1e-3)], "shared": [(1.2e-3, 1e-3)]}

    monkeypatch.setattr(overhead, "compare_loops", fake_compare)
    cfg = CaptureConfig(batch_size=4, profile=False, progress=False, threads=1)
    result = overhead.loop_fixed_cost(cfg, repeats=1)
    assert seen["classes"] == seen["labels"] == 10  # the synthetic set's classes
    assert result["loop_fixed_cost_us_per_step"] == pytest.approx(200)
