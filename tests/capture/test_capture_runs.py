"""Every capture experiment end to end on the CPU with tiny settings: traces with ProfilerStep
and the four regions, run.json without environment variables, metrics, results and charts."""

from __future__ import annotations

import csv
import gzip
import json
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import captured_runs

import trace_report as tr
from trace_report.capture.__main__ import main
from trace_report.capture.config import CaptureConfig, validate
from trace_report.capture.data import SyntheticCIFAR
from trace_report.capture.loop import train

TINY = ["--steps", "2", "--batch-size", "8", "--image-size", "16", "--wait", "0",
        "--warmup", "1", "--active", "1", "--synthetic-test", "16", "--threads", "1", "--no-progress"]
REGIONS = {"forward", "loss", "backward", "optimizer_step"}
TRACE_NAME = re.compile(r"^.+_(\d+|rank\d+)\.\d+\.pt\.trace\.json\.gz$")
SUMMARY_COLUMNS = {"variant", "mean_data_s", "mean_compute_s", "mean_total_s", "samples_per_s",
                   "final_loss", "test_accuracy", "run_dir"}


def capture(capsys, tmp_path: Path, *argv: str, run_id: str = "run") -> tuple[Path, str]:
    code = main([*argv, "--out-dir", str(tmp_path), "--run-id", run_id])
    out, err = capsys.readouterr()
    assert code == 0, err
    return tmp_path / run_id, out + err


def all_keys(value) -> list[str]:
    if isinstance(value, dict):
        return [k for key, item in value.items() for k in [key, *all_keys(item)]]
    if isinstance(value, list):
        return [k for item in value for k in all_keys(item)]
    return []


def read_trace(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def annotation_names(trace: dict) -> list[str]:
    return [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]


def results(run_dir: Path) -> list[dict]:
    with open(run_dir / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert json.loads((run_dir / "results.json").read_text())[0].keys() == rows[0].keys()
    assert (run_dir / "chart.html").stat().st_size > 0
    return rows


def metrics(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def traces_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pt.trace.json.gz"))


def test_default_capture_writes_a_profiled_run(capsys, tmp_path, monkeypatch):
    secret = "hf_" + "x" * 34
    monkeypatch.setenv("TRACE_REPORT_TEST_TOKEN", secret)
    run_dir, output = capture(capsys, tmp_path, "--steps", "6", "--batch-size", "8",
                              "--image-size", "16", "--synthetic-test", "16", "--threads", "1",
                              "--no-progress")
    (trace,) = traces_in(run_dir)
    assert TRACE_NAME.match(trace.name)
    doc = read_trace(trace)
    names = annotation_names(doc)
    steps = sorted(n for n in names if n.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]  # wait 1, warmup 1
    assert set(names) >= REGIONS
    assert sum(n == "forward" for n in names) == 3
    # nn.Module events by default (our own traces always have them): 20 convolutions
    # a forward pass, 3 profiled steps; `modules` nests them under the model
    convs = [e for e in doc["traceEvents"] if e.get("cat") == "python_function"
             and e.get("name", "").startswith("nn.Module: Conv2d_")]
    assert len(convs) == 20 * 3
    with tr.open(trace) as db:
        tree = db.modules(depth=1)
    assert len(tree) and (tree["calls"] == 3).all()

    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["traces"] == [trace.name]
    assert manifest["seed"] == 0 and manifest["config"]["steps"] == 6
    env = manifest["environment"]
    assert env["torch_version"] == torch.__version__ and env["device"] == "cpu"
    assert {"cuda_version", "cudnn_version", "device_name", "compute_capability", "tf32", "host",
            "git"} <= env.keys()
    text = (run_dir / "run.json").read_text()
    assert secret not in text and os.environ["PATH"] not in text
    assert not ({"env", "environ", "environment_variables"} & set(all_keys(manifest)))
    with gzip.open(trace) as fh:
        assert secret.encode() not in fh.read()

    (epoch,) = metrics(run_dir)
    assert int(epoch["steps"]) == 6 and int(epoch["samples"]) == 48
    for column in ("data_s", "compute_s", "total_s", "loss", "accuracy", "samples_per_s",
                   "test_accuracy"):
        assert float(epoch[column]) >= 0
    assert float(epoch["total_s"]) >= float(epoch["compute_s"]) > 0
    with open(run_dir / "steps.csv", newline="") as fh:
        profiled = [row["profiled"] == "True" for row in csv.DictReader(fh)]
    assert profiled == [False, False, True, True, True, False]
    assert (SUMMARY_COLUMNS - {"run_dir"}) <= results(run_dir)[0].keys()
    assert f"trace-report top-kernels {run_dir}" in output
    chart = (run_dir / "chart.html").read_text()  # self-contained: works offline, no CDN
    assert "vegaEmbed" in chart and "cdn.jsdelivr" not in chart and "<script src=" not in chart


def test_results_as_json_on_stdout(capsys, tmp_path):
    code = main(["no-bn", *TINY, "--format", "json", "--out-dir", str(tmp_path), "--run-id", "j"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads(out)  # stdout holds only the rows; notes and paths go to stderr
    assert [row["variant"] for row in rows] == ["with-bn", "without-bn"]
    assert rows == json.loads((tmp_path / "j" / "results.json").read_text())
    assert "trace-report top-kernels" in err


def test_loss_falls_on_the_synthetic_set(tmp_path):
    cfg = validate(CaptureConfig(steps=12, batch_size=16, image_size=16, profile=False,
                                 synthetic_test=64, threads=1, progress=False))
    run = train(cfg, tmp_path)
    losses = [s.loss for s in run.steps]
    assert losses[0] == pytest.approx(np.log(10), abs=0.4)  # chance level at the start
    assert max(losses[-3:]) < 0.8 * min(losses[:3])
    assert run.epochs[0].accuracy > 0.3


def test_synthetic_data_is_deterministic_and_class_dependent():
    a = SyntheticCIFAR(64, seed=5)
    b = SyntheticCIFAR(64, seed=5)
    c = SyntheticCIFAR(64, seed=6)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)
    image, label = a[0]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    means = torch.stack([a.images[a.labels == k].float().mean(0) for k in a.labels.unique()[:2]])
    assert (means[0] - means[1]).abs().mean() > 10  # classes differ beyond the noise


def write_fake_cifar(root: Path, per_batch: int = 16) -> None:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": [int(x) for x in rng.integers(0, 10, per_batch)]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh)


def test_cifar10_pickle_layout(capsys, tmp_path):
    write_fake_cifar(tmp_path / "data")
    run_dir, _ = capture(capsys, tmp_path / "out", "--dataset", "cifar10", "--data-dir",
                         str(tmp_path / "data"), *TINY, "--record-shapes")
    (epoch,) = metrics(run_dir)
    assert int(epoch["samples"]) == 16 and int(epoch["test_samples"]) == 16
    trace = read_trace(traces_in(run_dir)[0])
    assert set(annotation_names(trace)) >= REGIONS
    convs = [e for e in trace["traceEvents"] if e.get("name") == "aten::convolution"]
    assert convs and all("Input Dims" in e["args"] for e in convs)  # --record-shapes


def test_image_folder_layout(capsys, tmp_path):
    from PIL import Image

    for split in ("train", "val"):
        for label in ("cat", "dog"):
            folder = tmp_path / "data" / split / label
            folder.mkdir(parents=True)
            for i in range(4):
                Image.new("RGB", (20, 24), (i * 40, 80, 160)).save(folder / f"{i}.png")
    run_dir, _ = capture(capsys, tmp_path / "out", "--dataset", "imagefolder", "--data-dir",
                         str(tmp_path / "data"), *TINY, "--batch-size", "4")
    (epoch,) = metrics(run_dir)
    assert int(epoch["samples"]) == 8 and int(epoch["test_samples"]) == 8


@pytest.mark.slow
def test_params(capsys, tmp_path):
    run_dir, output = capture(capsys, tmp_path, "params", "--threads", "1")
    rows = {row["model"]: row for row in results(run_dir)}
    assert set(rows) == {"resnet18", "resnet18-nobn", "resnet18-imagenet", "resnet50", "alexnet"}
    import torchvision

    reference = sum(p.numel() for p in torchvision.models.resnet18(num_classes=10).parameters())
    assert int(rows["resnet18-imagenet"]["trainable_params"]) == reference
    assert int(rows["resnet18"]["trainable_params"]) == 11_173_962
    assert int(rows["resnet18"]["params_with_grad"]) == 11_173_962
    assert int(rows["resnet18"]["conv_layers"]) == 20
    assert int(rows["resnet18"]["last_linear_in_features"]) == 512
    assert int(rows["resnet50"]["trainable_params"]) == 23_528_522
    assert int(rows["resnet18"]["optimizer_state_tensors_adam"]) == 3 * 62
    assert "11173962" in output.replace(",", "")


def listed_rows(run_dir: Path) -> dict[str, dict]:
    """results.csv by variant, in the order run.json lists the variants."""
    rows = {row["variant"]: row for row in results(run_dir)}
    manifest = json.loads((run_dir / "run.json").read_text())
    assert [v["variant"] for v in manifest["variants"]] == list(rows)
    return rows


def variant_rows(run_dir: Path) -> dict[str, dict]:
    """:func:`listed_rows`, each variant with its trace (the four regions) and metrics.csv."""
    rows = listed_rows(run_dir)
    for variant in rows:
        (trace,) = traces_in(run_dir / variant)
        assert set(annotation_names(read_trace(trace))) >= REGIONS
        assert (run_dir / variant / "metrics.csv").exists()
    return rows


def test_optimized_against_baseline(capsys, tmp_path):
    run_dir, _ = capture(capsys, tmp_path, "optimized", *TINY)
    rows = variant_rows(run_dir)
    assert list(rows) == ["baseline", "optimized"]
    base_s, fast_s = float(rows["baseline"]["mean_total_s"]), float(rows["optimized"]["mean_total_s"])
    assert float(rows["optimized"]["speedup"]) == pytest.approx(base_s / fast_s)  # time ratio, baseline / optimized
    assert int(rows["optimized"]["workers"]) > 0
    fast = json.loads((run_dir / "optimized" / "run.json").read_text())["config"]
    assert fast["channels_last"] and fast["set_to_none"] and fast["persistent_workers"]


def test_workers(capsys, tmp_path):
    run_dir, output = capture(capsys, tmp_path, "workers", "--workers-list", "0,1", *TINY)
    rows = variant_rows(run_dir)
    assert [int(r["workers"]) for r in rows.values()] == [0, 1]
    assert rows["workers-0"].keys() >= SUMMARY_COLUMNS
    assert "best:" in output


def test_devices(tmp_path_factory):
    rows = listed_rows(captured_runs(tmp_path_factory) / "dev")  # captured once per session, --no-profile: no traces
    cpus = len(os.sched_getaffinity(0))
    assert rows["cpu-1-thread"]["threads"] == "1"
    assert rows[f"cpu-{cpus}-threads"]["threads"] == str(cpus)
    assert ("cuda" in rows) == torch.cuda.is_available()
    one = float(rows["cpu-1-thread"]["mean_total_s"])
    for row in rows.values():
        assert float(row["speedup"]) == pytest.approx(one / float(row["mean_total_s"]))


def test_repeats_give_median_min_and_max_per_row(capsys, tmp_path):
    run_dir, output = capture(capsys, tmp_path, "workers", "--workers-list", "0", "--repeats",
                              "3", *TINY, "--no-profile")
    (row,) = results(run_dir)
    totals = sorted(float(metrics(run_dir / "workers-0" / f"repeat-{i}")[0]["total_s"])
                    for i in (1, 2, 3))
    assert row["repeats"] == "3"
    assert float(row["mean_total_s"]) == pytest.approx(totals[1])  # the median of three
    assert float(row["mean_total_s_min"]) == pytest.approx(totals[0])
    assert float(row["mean_total_s_max"]) == pytest.approx(totals[2])
    assert "3 runs per variant: timing columns are medians" in output


def test_optimizers(tmp_path_factory):
    rows = variant_rows(captured_runs(tmp_path_factory) / "opt")  # the experiment captured once per session
    assert list(rows) == ["sgd", "sgd-nesterov", "adagrad", "adadelta", "adam"]
    assert {float(r["lr"]) for r in rows.values()} == {0.1}


def test_no_bn(capsys, tmp_path):
    run_dir, _ = capture(capsys, tmp_path, "no-bn", *TINY)
    rows = variant_rows(run_dir)
    assert [r["model"] for r in rows.values()] == ["resnet18", "resnet18-nobn"]


@pytest.mark.slow
def test_amp_batch_sweep(capsys, tmp_path):
    run_dir, _ = capture(capsys, tmp_path, "amp", "--batch-sizes", "4,8", *TINY)
    rows = variant_rows(run_dir)
    assert list(rows) == ["fp32-bs4", "amp-bf16-bs4", "fp32-bs8", "amp-bf16-bs8"]
    for row in rows.values():
        assert float(row["median_samples_per_s"]) > 0
        assert float(row["peak_memory_mb"]) > 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*torch.jit:FutureWarning")
def test_torchscript(capsys, tmp_path):
    from trace_report.capture.data import SyntheticCIFAR
    from trace_report.capture.models import build_model

    run_dir, output = capture(capsys, tmp_path, "torchscript", *TINY, "--latency-runs", "5",
                              "--latency-warmup", "2", "--repeats", "2")
    rows = {row["variant"]: row for row in results(run_dir)}
    assert list(rows) == ["cpu-eager", "cpu-torchscript"] + (
        ["cuda-eager", "cuda-torchscript"] if torch.cuda.is_available() else [])
    assert all(row["outputs_equal"] == "True" for row in rows.values())
    assert all(float(row["median_ms"]) > 0 and row["runs"] == "5" for row in rows.values())
    assert all(row["repeats"] == "2" for row in rows.values())
    for row in rows.values():
        assert float(row["median_ms_min"]) <= float(row["median_ms"]) <= float(row["median_ms_max"])
    # it trained first: the loaded model is the trained one, not a fresh initialisation
    (train_epoch,) = metrics(run_dir / "train")
    assert int(train_epoch["steps"]) == 2 and int(rows["cpu-eager"]["train_steps"]) == 2
    loaded = torch.jit.load(str(run_dir / "resnet18.torchscript.pt"))
    fresh = build_model("resnet18", 10)
    assert not torch.equal(loaded.state_dict()["linear.weight"], fresh.state_dict()["linear.weight"])
    # test accuracy recomputed here, independently, from the saved model and the synthetic test set
    test_set = SyntheticCIFAR(16, num_classes=10, image_size=16, seed=0, split="test")
    images = torch.stack([test_set[i][0] for i in range(len(test_set))])
    with torch.no_grad():
        expected = float((loaded.eval()(images).argmax(1) == test_set.labels).float().mean())
    assert float(rows["cpu-eager"]["test_accuracy"]) == pytest.approx(expected)
    assert rows["cpu-torchscript"]["test_accuracy"] == rows["cpu-eager"]["test_accuracy"]
    assert all(row["accuracy_equal"] == "True" for row in rows.values())
    # speed-up: eager median / the row's median, per device
    eager_ms = float(rows["cpu-eager"]["median_ms"])
    assert float(rows["cpu-eager"]["speedup"]) == 1.0
    assert float(rows["cpu-torchscript"]["speedup"]) == pytest.approx(
        eager_ms / float(rows["cpu-torchscript"]["median_ms"]))
    assert "graph(" in output and (run_dir / "graph.txt").read_text().startswith("graph(")
    assert "forward" in annotation_names(read_trace(traces_in(run_dir / "cpu-torchscript")[0]))


@pytest.mark.slow
def test_compile(capsys, tmp_path):
    run_dir, _ = capture(capsys, tmp_path, "compile", *TINY, "--steps", "1",
                         "--timed-runs", "2", "--warmup-epochs", "2")
    rows = variant_rows(run_dir)
    assert list(rows) == ["eager", "compiled"]
    for variant, row in rows.items():
        epochs = [float(m["total_s"]) for m in metrics(run_dir / variant)]
        assert int(row["timed_runs"]) == 2 and int(row["epochs"]) == len(epochs) == 4
        assert float(row["median_run_s"]) == pytest.approx(np.median(epochs[2:]))
        assert float(row["first_run_s"]) == pytest.approx(epochs[0])
    assert float(rows["compiled"]["speedup"]) == pytest.approx(
        float(rows["eager"]["median_run_s"]) / float(rows["compiled"]["median_run_s"]))
    compiled = json.loads((run_dir / "compiled" / "run.json").read_text())["config"]
    assert compiled["compile"] is True and compiled["compile_mode"] == "default"


def epoch_throughput(folder: Path, files: list[str]) -> float:
    """Samples of every rank's (single) epoch over the slowest rank's epoch time."""
    epochs = [metrics_file(folder / name)[0] for name in files]
    return sum(int(e["samples"]) for e in epochs) / max(float(e["total_s"]) for e in epochs)


def metrics_file(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_ddp_gloo_scaling_over_world_sizes(capsys, tmp_path):
    run_dir, output = capture(capsys, tmp_path, "ddp", *TINY, "--nproc-list", "1,2")
    rows = {int(r["world_size"]): r for r in results(run_dir)}
    assert list(rows) == [1, 2] and {r["backend"] for r in rows.values()} == {"gloo"}
    one = epoch_throughput(run_dir / "world-1", ["metrics.csv"])
    two = epoch_throughput(run_dir / "world-2", ["metrics-rank0.csv", "metrics-rank1.csv"])
    assert float(rows[1]["aggregate_samples_per_s"]) == pytest.approx(one)
    assert float(rows[2]["aggregate_samples_per_s"]) == pytest.approx(two)
    assert float(rows[1]["scaling_efficiency"]) == pytest.approx(1.0)
    assert float(rows[2]["scaling_efficiency"]) == pytest.approx(two / (2 * one))
    ranks = metrics_file(run_dir / "ranks.csv")
    assert [(int(r["world_size"]), int(r["rank"])) for r in ranks] == [(1, 0), (2, 0), (2, 1)]
    traces = traces_in(run_dir / "world-2")
    assert [re.search(r"_rank(\d)\.", t.name).group(1) for t in traces] == ["0", "1"]
    for rank, trace in enumerate(traces):
        data = read_trace(trace)
        assert set(annotation_names(data)) >= REGIONS
        assert data["distributedInfo"]["rank"] == rank
        assert data["distributedInfo"]["world_size"] == 2
        manifest = json.loads((run_dir / "world-2" / f"run-rank{rank}.json").read_text())
        assert manifest["distributed"]["world_size"] == 2
    assert "throughput(N) / (N x throughput(1))" in output
    for n in (1, 2):  # each world size is a run folder for the run analyses
        manifest = json.loads((run_dir / f"world-{n}" / "run.json").read_text())
        assert manifest["variant"] == f"world-{n}" and manifest["distributed"]["world_size"] == n
