"""This project's own H100 captures (traces/h100-2026-11-25, written by ``./run gpu-check`` on an
NVIDIA H100 80GB HBM3 with torch 2.11/cuDNN 9.19; traces/README.md): what they must show.

Expected values come from plain-Python passes over the trace JSON and the ncu CSV, and from the
capture's own run.json; these files live in the repository, so nothing here needs ../shared.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
from pathlib import Path

import pytest
from test_h200_captures import kernels_launched_in

import trace_report as tr
from trace_report.analyses.roofline.measured import RooflineOptions, ncu_roofline
from trace_report.present.charts.roofline import _safe, chart_points

H100 = Path(__file__).resolve().parents[2] / "traces" / "h100-2026-11-25"
REGION_NAMES = ("forward", "loss", "backward", "optimizer_step")
LAYOUT = re.compile(r"(nchwToNhwc|nhwcToNchw)Kernel")

pytestmark = pytest.mark.skipif(not H100.is_dir(), reason="traces/h100-2026-11-25 is not present")


def trace_doc(run: str) -> dict:
    (path,) = (H100 / run).glob("*.pt.trace.json.gz")
    with gzip.open(path) as fh:
        return json.load(fh)


def kernels(run: str) -> list[dict]:
    return [e for e in trace_doc(run)["traceEvents"] if e.get("cat") == "kernel"]


def run_json(run: str) -> dict:
    return json.loads((H100 / run / "run.json").read_text())


def flagged(run: str, cls: str) -> dict[str, tuple[int, float]]:
    """name -> (count, total_us) of the kernels `flags` gives class ``cls``."""
    with tr.open(H100 / run) as db:
        frame = db.flags()
    rows = frame[frame["classes"].map(lambda c: cls in list(c))]
    return {r.name: (int(r.count), float(r.total_us)) for r in rows.itertuples()}


# ------------------------------------------------------------------ TF32 and tensor cores


def test_tf32_is_allowed_and_the_convolutions_run_tf32_kernels():
    assert run_json("baseline")["environment"]["tf32"]["cudnn_allow_tf32"] is True
    expected: dict[str, list[float]] = {}
    for e in kernels("baseline"):
        if "tf32" in e["name"]:
            expected.setdefault(e["name"], []).append(e["dur"])
    assert len(expected) >= 5  # cuDNN picks several TF32 implicit-GEMM engines
    got = flagged("baseline", "tf32")
    assert set(got) == set(expected)
    for name, durs in expected.items():
        assert got[name][0] == len(durs)
        assert got[name][1] == pytest.approx(sum(durs), abs=1e-3)
    convolutions = flagged("baseline", "convolution")
    assert set(got) <= set(convolutions)  # every TF32 kernel of this model is a convolution


def test_xmma_kernels_that_name_ffma_math_are_cuda_core_not_tensor_core():
    ffma = {e["name"] for e in kernels("baseline") if "_ffma_" in e["name"]}
    assert any("xmma_gemm" in n for n in ffma) and any("implicit_gemm" in n for n in ffma)
    assert ffma == set(flagged("baseline", "cuda_core"))
    assert not ffma & set(flagged("baseline", "tensor_core"))


# ------------------------------------------------------------------ NCHW <-> NHWC conversions


def test_nchw_model_pays_for_layout_conversions_and_channels_last_removes_them():
    assert run_json("channels-last")["config"]["channels_last"] is True
    conversions = [e for e in kernels("baseline") if LAYOUT.search(e["name"])]
    assert len(conversions) > 100  # cuDNN's NHWC TF32 engines wrap NCHW activations
    got = flagged("baseline", "layout_conversion")
    assert sum(c for c, _ in got.values()) == len(conversions)
    assert sum(t for _, t in got.values()) == pytest.approx(sum(e["dur"] for e in conversions), abs=1e-3)
    assert not [e for e in kernels("channels-last") if LAYOUT.search(e["name"])]
    assert flagged("channels-last", "layout_conversion") == {}


# ------------------------------------------------------------------ steps, regions, ranks


@pytest.mark.parametrize("run", ["baseline", "ddp"])
def test_steps_regions_and_rank_are_present(run):
    doc = trace_doc(run)
    active = run_json(run)["config"]["active"]
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"]
    assert len(steps) == active == 3
    with tr.open(H100 / run) as db:
        frame = db.breakdown()
        traces = db.sql("SELECT rank, rank_source, world_size, compute_capability FROM traces").df()
    by_region = frame.set_index("region")
    assert set(REGION_NAMES) <= set(by_region.index)
    assert (by_region.loc[list(REGION_NAMES), "gpu_us"] > 0).all()
    assert set(by_region["steps"]) == {active}
    assert by_region.loc["forward", "kernels"] == kernels_launched_in(doc["traceEvents"], "forward")
    info = doc.get("distributedInfo")
    row = traces.iloc[0]
    assert row["compute_capability"] == "9.0"
    if run == "ddp":
        assert info["backend"] == "nccl" and info["world_size"] == 1
        assert (row["rank"], row["rank_source"], row["world_size"]) == (info["rank"], "distributedInfo", 1)


# ------------------------------------------------------------------ ncu, forward region only


def ncu_rows() -> list[dict[str, str]]:
    lines = (H100 / "ncu-forward" / "ncu.ncu.csv").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    reader = csv.DictReader(lines[start:])
    next(reader)  # the units row
    return list(reader)


def number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "n/a") else 0.0


def test_ncu_region_profiled_only_the_forward_pass():
    rows = ncu_rows()
    nvtx = next(k for k in rows[0] if "Push/Pop_Range" in k)
    assert len(rows) == 130
    assert all(":forward:" in r[nvtx] for r in rows)  # the NVTX range ncu filtered on
    assert not any("nll_loss" in r["Kernel Name"] or "backward" in r["Kernel Name"] for r in rows)
    config = run_json("ncu-forward")["config"]  # the capture ncu ran (bracketed by cudaProfilerStart/Stop)
    assert config["cuda_profiler_range"] is True and config["active"] == 1 and config["batch_size"] == 16


def test_csv_fp32_work_is_counted_and_tensor_work_is_unknown_not_zero():
    rows = ncu_rows()
    op = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    fp32 = [2 * number(r[op.format("ffma")]) + number(r[op.format("fadd")]) + number(r[op.format("fmul")])
            for r in rows]
    mma = [max(number(r[k]) for k in r if k.startswith("sm__pipe_tensor_type_") and ".max.pct" in k) >= 1
           for r in rows]
    assert sum(mma) == sum("tf32" in r["Kernel Name"] for r in rows) == 18
    with tr.open(H100 / "ncu-forward" / "ncu.ncu.csv") as db:
        result = ncu_roofline(db.con, RooflineOptions())
    frame = result.frame.sort_values("launch_id")
    assert frame["flop_fp32"].fillna(0).tolist() == pytest.approx(fp32)
    assert frame["tensor_uncounted"].tolist() == mma
    assert frame.loc[frame["tensor_uncounted"], "flop"].isna().all()  # unknown, not 0 FLOP
    assert frame.loc[~frame["tensor_uncounted"], "flop"].notna().all()
    assert any("18 launch(es) ran tensor-core MMA instructions" in n for n in result.notes)
    assert math.isnan(result.total_flop)  # a sum without them is no total
    points = chart_points(result.frame)  # and no FP32-only point stands in for a TF32 convolution
    assert not points["kernel"].isin(set(frame.loc[frame["tensor_uncounted"], "kernel"].map(_safe))).any()
    assert len(points) > 0


# ------------------------------------------------------------------ ncu, per-opcode counts

STEP_CSV = H100 / "ncu-step" / "forward-instances.ncu.csv"
MMA_SHAPE = re.compile(r"^(HMMA|HGMMA)\.(?:(\d+)x(\d+)x(\d+)|(16)(8)(8|16))\.")


def mma_flop(cell: str) -> float:
    """Tensor FLOP of one launch from its per-opcode cell, written out: mma.sync m16n8k8 /
    m16n8k16 per warp instruction; wgmma MxNxK per warpgroup = 4 counted warp instructions."""
    flop = 0.0
    for item in cell[cell.index("(") + 1:-1].split("; "):
        name, count = item.rsplit(": ", 1)
        found = MMA_SHAPE.match(name)
        if found is None:
            continue
        m, n, k = (int(x) for x in (found.group(2, 3, 4) if found.group(2) else found.group(5, 6, 7)))
        flop += 2 * m * n * k * float(count.replace(",", "")) / (4 if found.group(1) == "HGMMA" else 1)
    return flop


def test_measured_forward_flop_per_image_matches_flop_counter_mode():
    lines = STEP_CSV.read_text().splitlines()
    rows = list(csv.DictReader(lines))[1:]  # after the units row
    opcodes = "sass__inst_executed_per_opcode_with_modifier_all"
    assert any("HGMMA.64x128x8.F32.TF32" in r[opcodes] for r in rows)  # Hopper warpgroup MMA
    assert any("HMMA.1688.F32.TF32" in r[opcodes] for r in rows)      # and mma.sync, both TF32
    with tr.open(STEP_CSV) as db:
        result = ncu_roofline(db.con, RooflineOptions(batch_size=16))
    frame = result.frame.sort_values("launch_id")
    assert not frame["tensor_uncounted"].any() and not frame["unknown_tensor_shapes"].any()
    assert frame["tensor_flop"].fillna(0).tolist() == pytest.approx([mma_flop(r[opcodes]) for r in rows])
    per_image = result.total_flop / 16
    expected = run_json("ncu-forward")["flop"]["forward_flop_per_image"]  # FlopCounterMode, same model
    assert per_image == pytest.approx(expected, rel=0.05)
    assert 1.0 < per_image / expected < 1.02  # tile padding adds ~1%; without the /4, 2.5x
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from trace_report.capture.models import build_model

    with FlopCounterMode(display=False) as counter:
        build_model("resnet18", 10).train()(torch.randn(16, 3, 32, 32))
    assert counter.get_total_flops() / 16 == expected


def test_advise_names_the_layout_conversions_and_not_after_channels_last():
    gpu = [e for e in trace_doc("baseline")["traceEvents"]
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    share = 100 * sum(e["dur"] for e in gpu if LAYOUT.search(e["name"])) / sum(e["dur"] for e in gpu)
    with tr.open(H100 / "baseline") as db:
        found = db.advise().set_index("finding")
    assert found.loc["layout_conversions", "value"] == pytest.approx(share, abs=5e-4)  # shown to 3 places
    assert "channels_last" in found.loc["layout_conversions", "recommendation"]
    with tr.open(H100 / "channels-last") as db:
        assert "layout_conversions" not in set(db.advise()["finding"])


def test_an_mma_shape_we_cannot_read_makes_the_launch_unknown_not_smaller(tmp_path):
    text = STEP_CSV.read_text()
    assert text.count("HGMMA.64x64x8.F32.TF32:") >= 2
    changed = tmp_path / "renamed.ncu.csv"  # as if a future ncu named the shape differently
    changed.write_text(text.replace("HGMMA.64x64x8.F32.TF32:", "HGMMA.SP.64x64x8.F32.TF32:"))
    with tr.open(changed) as db:
        result = ncu_roofline(db.con, RooflineOptions(batch_size=16))
    frame = result.frame
    unknown = frame["unknown_tensor_shapes"].astype(bool)
    assert unknown.sum() == sum("HGMMA.64x64x8" in line for line in text.splitlines())
    assert frame.loc[unknown, "flop"].isna().all() and frame.loc[unknown, "precision"].isna().all()
    assert frame.loc[~unknown, "flop"].notna().all()
    assert math.isnan(result.total_flop) and result.per_run["flop_per_image"].isna().all()
    assert any("no known MMA shape" in n for n in result.notes)


def test_every_bf16_convolution_of_the_amp_run_is_a_bf16_tensor_core_kernel():
    run = run_json("amp-bf16")
    assert (run["config"]["amp"], run["config"]["amp_dtype"]) == (True, "bf16")
    xmma = {e["name"] for e in kernels("amp-bf16") if e["name"].startswith("sm90_xmma_")
            and "_bf16bf16_" in e["name"]}
    assert any("wgrad_indexed_implicit_gemm" in n for n in xmma)  # sm90 puts `indexed` first
    assert {"fprop", "dgrad", "wgrad"} == {n.split("_")[2] for n in xmma}
    assert xmma <= set(flagged("amp-bf16", "bf16_tensor_core"))
    assert xmma <= set(flagged("amp-bf16", "tensor_core"))
