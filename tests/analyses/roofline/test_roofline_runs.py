"""Roofline estimates on real CPU captures: the forward-region FLOP per
image against FlopCounterMode's count in run.json, and several runs on one chart.

Two tiny captures (AlexNet and torchvision's ResNet-18 at 64x64, batch 2, 2 profiled steps,
``--record-shapes``) are made once per module (slow: two captures under torch).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from conftest import invoke

import trace_report as tr
from trace_report.analyses.roofline.measured import RooflineOptions, roofline
from trace_report.present.charts import roofline_chart

CAPTURE = ["--image-size", "64", "--batch-size", "2", "--steps", "3", "--wait", "0", "--warmup", "1",
           "--active", "2", "--synthetic-test", "16", "--threads", "1", "--no-progress", "--format", "csv",
           "--record-shapes"]
MODELS = {"alex": "alexnet", "rn18": "resnet18-imagenet"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torchvision")
    from trace_report.capture.__main__ import main

    root = tmp_path_factory.mktemp("roofline-runs")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        for run_id, model in MODELS.items():
            code = main(["baseline", "--model", model, *CAPTURE, "--out-dir", str(root), "--run-id", run_id])
            assert code == 0, out.getvalue()[-2000:]
    return {run_id: root / run_id for run_id in MODELS}


def counted_forward_flop_per_image(run: Path) -> int:
    flop = json.loads((run / "run.json").read_text())["flop"]
    assert flop["image_size"] == 64 and flop["batch_size"] == 2  # like with like: the captured shapes
    return int(flop["forward_flop_per_image"])


@pytest.mark.parametrize("run_id", list(MODELS))
def test_forward_region_flop_per_image_matches_flop_counter(runs: dict[str, Path], run_id: str) -> None:
    """conv2d + linear (+ matmul) operators inside the `forward` region of each ProfilerStep, summed
    per step and divided by the batch size, against FlopCounterMode over one forward pass."""
    with tr.open(runs[run_id]) as db:
        result = roofline(db, RooflineOptions(region="forward"))
    expected = counted_forward_flop_per_image(runs[run_id])
    assert result.region_flop_per_image == pytest.approx(expected, rel=0.02)
    per_run = result.per_run.iloc[0]
    assert per_run["steps"] == 2 and per_run["batch_size"] == 2
    assert per_run["flop_per_image_min"] == per_run["flop_per_image_max"]  # every step the same pass
    frame = result.frame
    assert set(frame["kernel"]) == {"aten::conv2d", "aten::linear"}  # no backward, no optimizer work
    assert set(frame["region"]) == {"forward"} and sorted(set(frame["step"])) == [1, 2]
    assert (frame["forward_flop_per_image"] == result.region_flop_per_image).all()
    with tr.open(runs[run_id]) as db:
        everything = roofline(db, RooflineOptions())
    # the whole-step total holds backward work too: about 3x the forward pass
    assert everything.total_flop > 2.5 * result.total_flop


def test_cli_region_forward(runs: dict[str, Path]) -> None:
    res = invoke(["roofline", runs["alex"], "--region", "forward", "-f", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    expected = counted_forward_flop_per_image(runs["alex"])
    assert rows and all(r["forward_flop_per_image"] == pytest.approx(expected, rel=0.02) for r in rows)
    assert "run" not in rows[0]  # one run: no run column
    assert re.search(r"forward_flop_per_image: 1\.88\d*e\+08 FLOP \(median over 2 step\(s\)", res.stderr)
    # without a region the line says what it divides
    res = invoke(["roofline", runs["alex"], "-f", "json"])
    assert res.exit_code == 0 and "per sample per step (batch size 2; forward + backward" in res.stderr


def test_cli_region_errors(runs: dict[str, Path]) -> None:
    res = invoke(["roofline", runs["alex"], "--region", "sideways"])
    assert res.exit_code != 0 and res.stderr.startswith("Error:") and "Traceback" not in res.output
    assert "forward, loss, backward, optimizer_step" in res.stderr


def test_several_runs_on_one_chart(runs: dict[str, Path], tmp_path: Path) -> None:
    html = tmp_path / "runs.html"
    res = invoke(["roofline", runs["alex"], runs["rn18"], "--gpu", "a100-sxm4-80gb", "-f", "json", "--chart", html])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    labels = {"alexnet (alex)", "resnet18-imagenet (rn18)"}
    assert list(rows[0])[0] == "run" and {r["run"] for r in rows} == labels
    # CPU captures: estimated intensity against the A100 roofs, no time and no achieved FLOP/s
    assert all(r["time_s"] is None and r["achieved_flop_per_s"] is None for r in rows)
    assert all(r["ai_flop_per_byte"] > 0 and r["roof_flop_per_s"] == 19.5e12 for r in rows if r["flop"])
    assert "alexnet (alex): all estimated operators" in res.stderr
    spec = json.loads(re.search(r'data-chart="chart">(.*?)</script>', html.read_text(), re.S).group(1))
    assert "estimated" in spec["title"]["text"] and "no achieved FLOP/s" in spec["title"]["subtitle"][0]
    colours = [layer["encoding"]["color"] for layer in spec["layer"] if "color" in layer.get("encoding", {})]
    assert colours and all(c["field"] == "run" for c in colours)
    assert set(colours[0]["scale"]["domain"]) == labels
    ticks = [layer for layer in spec["layer"] if layer["mark"]["type"] == "tick"]
    assert len(ticks) == 1 and ticks[0]["encoding"]["y"] == {"value": 411}  # along the bottom of the plot
    drawn = spec["datasets"][ticks[0]["data"]["name"]]
    assert {d["run"] for d in drawn} == labels and all("perf" not in d for d in drawn)


def test_several_runs_forward_region(runs: dict[str, Path]) -> None:
    res = invoke(["roofline", runs["alex"], runs["rn18"], "--region", "forward", "--by-name", "-f", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    per_run = {r["run"]: r["forward_flop_per_image"] for r in rows}
    assert per_run == {
        "alexnet (alex)": pytest.approx(counted_forward_flop_per_image(runs["alex"]), rel=0.02),
        "resnet18-imagenet (rn18)": pytest.approx(counted_forward_flop_per_image(runs["rn18"]), rel=0.02)}


def test_chart_function_colours_by_run(runs: dict[str, Path]) -> None:
    with tr.open([runs["alex"], runs["rn18"]]) as db:
        result = roofline(db, RooflineOptions(gpu="a100-sxm4-80gb", by_run=True, by_name=True))
    spec = roofline_chart(result).to_dict()
    assert spec["title"]["text"] == "Roofline, NVIDIA A100 SXM4 80GB (estimated from operator shapes)"
    tick = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "tick")
    assert tick["encoding"]["color"]["title"] == "Run (estimated)"
