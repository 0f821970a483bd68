"""This project's own H200 captures (traces/h200-2026-11-26, written by ``./run gpu-check`` on an
NVIDIA H200 with torch 2.11/cuDNN 9.19; traces/README.md): ``torch.compile`` with CUDA graphs
(modes reduce-overhead and max-autotune) and TorchScript on CUDA, the studies the H100 check did
not reach.

Expected values come from plain-Python passes over the trace JSON and from the capture's own
run.json and results.json; these files live in the repository, so nothing here needs ../shared.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

import trace_report as tr
from trace_report.analyses.advise import advise
from trace_report.analyses.ops import OpsOptions, ops

H200 = Path(__file__).resolve().parents[2] / "traces" / "h200-2026-11-26"
COMPILED = H200 / "compile-reduce-overhead" / "compiled"
# both CUDA-graph modes: reduce-overhead, and max-autotune (autotuned GEMMs; convolutions left to
# ATen by TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN so that autotuning fit the lease)
GRAPH_RUNS = [pytest.param(H200 / f"compile-{mode}" / "compiled", mode, id=mode)
              for mode in ("reduce-overhead", "max-autotune")]
REGION_NAMES = ("forward", "loss", "backward", "optimizer_step")

pytestmark = pytest.mark.skipif(not H200.is_dir(), reason="traces/h200-2026-11-26 is not present")


def events(folder: Path) -> list[dict]:
    (path,) = folder.glob("*.pt.trace.json.gz")
    with gzip.open(path) as fh:
        return json.load(fh)["traceEvents"]


GPU_OPS = ("kernel", "gpu_memcpy", "gpu_memset")


def launch_calls(evs: list[dict]) -> dict[int, dict]:
    """The runtime or driver call of each correlation id."""
    return {e["args"]["correlation"]: e for e in evs
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


def launched(evs: list[dict], cats: tuple[str, ...] = GPU_OPS) -> list[tuple[dict, dict]]:
    """(GPU operation of ``cats``, the call that launched it) for every one with a launch call."""
    calls = launch_calls(evs)
    return [(g, calls[g["args"]["correlation"]]) for g in evs
            if g.get("cat") in cats and g.get("args", {}).get("correlation") in calls]


def launcher_of_each_kernel(evs: list[dict]) -> list[tuple[dict, dict]]:
    """(kernel, the runtime call with its correlation id) for every launched kernel."""
    return launched(evs, ("kernel",))


def kernels_launched_in(evs: list[dict], region: str) -> int:
    """Kernels whose launching call (a cudaGraphLaunch included) starts inside a ``region`` range."""
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in evs
             if e.get("cat") == "user_annotation" and e.get("name") == region]
    return sum(1 for _, call in launcher_of_each_kernel(evs)
               if any(a <= call["ts"] <= b for a, b in spans))


def run_config(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text())["config"]


# ------------------------------------------------------------------ CUDA graphs


@pytest.mark.parametrize(("compiled", "mode"), GRAPH_RUNS)
def test_cuda_graph_kernels_count_in_the_region_that_replays_them(compiled: Path, mode: str):
    evs = events(compiled)
    launchers = Counter(call["name"] for _, call in launcher_of_each_kernel(evs))
    # CUDA graph trees replay one graph for the forward and one for the backward of each step
    graph_launches = [e for e in evs if e.get("name") == "cudaGraphLaunch"]
    assert len(graph_launches) == 2 * run_config(compiled)["active"]
    assert launchers["cudaGraphLaunch"] > 0.85 * sum(launchers.values())
    with tr.open(compiled) as db:
        frame = db.breakdown().set_index("region")
    assert set(REGION_NAMES) <= set(frame.index)
    for region in ("forward", "backward"):
        expected = kernels_launched_in(evs, region)
        assert expected > 100
        assert frame.loc[region, "kernels"] == expected


@pytest.mark.parametrize(("compiled", "mode"), GRAPH_RUNS)
def test_cuda_graph_modes_zero_gradients_by_dropping_them_in_both_variants(compiled: Path, mode: str):
    for variant in ("eager", "compiled"):
        config = run_config(compiled.parent / variant)
        assert config["compile_mode"] == mode and config["set_to_none"] is True
    assert run_config(compiled)["compile"] is True
    rows = {r["variant"]: r for r in json.loads((compiled.parent / "results.json").read_text())}
    assert rows["compiled"]["speedup"] == pytest.approx(
        rows["eager"]["median_run_s"] / rows["compiled"]["median_run_s"])
    assert rows["compiled"]["speedup"] > 1.5  # launch-bound at batch 32: the graphs pay off



@pytest.mark.parametrize(("compiled", "mode"), GRAPH_RUNS)
def test_ops_replayed_from_cuda_graphs_are_not_counted_as_launch_bound(compiled: Path, mode: str):
    """One cudaGraphLaunch serves every kernel of its graph: HTA's rule (an op shorter than its
    launch call) is applied to the other operations only."""
    evs = events(compiled)
    steps = {(e["ts"], e["ts"] + e["dur"]) for e in evs if str(e.get("name", "")).startswith("ProfilerStep#")}
    in_steps = [(g, c) for g, c in launched(evs) if any(a <= c["ts"] < b for a, b in steps)]
    graph = [(g, c) for g, c in in_steps if c["name"] == "cudaGraphLaunch"]
    own = [(g, c) for g, c in in_steps if c["name"] != "cudaGraphLaunch"]
    assert len(graph) > 5 * len(own) > 0
    with tr.open(compiled) as db:
        (row,) = db.con.execute("SELECT * FROM launch_bound").df().itertuples(index=False)
        found = {r["finding"]: r for r in advise(db, all_findings=True).frame.to_dict(orient="records")}
    assert (row.graph_ops, row.gpu_ops) == (len(graph), len(own))
    assert row.shorter_pct == pytest.approx(100.0 * sum(g["dur"] < c["dur"] for g, c in own) / len(own))
    # counted against their one launch call, as HTA counts them, nearly all would be "shorter"
    assert sum(g["dur"] < c["dur"] for g, c in graph) > 0.9 * len(graph)
    # where the GPU still waits for launches (tiny batch), advise counts only the ops with launches of
    # their own, names the replayed ones, and does not tell a graph run to use CUDA graphs
    if "launch_bound" in found:
        f = found["launch_bound"]
        assert f"{row.shorter_pct:.0f}% shorter than their launch" in f["evidence"]
        assert "replayed from CUDA/HIP graphs" in f["evidence"]
        assert f["recommendation"].startswith("Capture more of the step in CUDA graphs")


@pytest.mark.parametrize(("compiled", "mode"), GRAPH_RUNS)
def test_ops_say_how_much_gpu_time_the_aten_rows_leave_to_compiled_graphs(compiled: Path, mode: str):
    evs = events(compiled)
    total = sum(g["dur"] for g in evs if g.get("cat") in GPU_OPS)
    replayed = sum(g["dur"] for g, call in launched(evs) if call["name"] == "cudaGraphLaunch")
    with tr.open(compiled) as db:
        aten = ops(db, OpsOptions(limit=None))
        every = ops(db, OpsOptions(all_ops=True, limit=None)).frame
    graphs = every[every["name"].str.startswith("## Call CompiledFxGraph")]
    assert graphs["gpu_self_us"].sum() == pytest.approx(replayed)  # the graph replays' caller
    (note,) = [n for n in aten.notes if n.startswith("aten:: operators launched")]
    by_aten, of = (float(x.replace(",", "")) for x in re.findall(r"([\d,]+) (?:of|us)", note)[:2])
    assert of == round(total) and by_aten == round(total - replayed)
    assert "--all" in note


# ------------------------------------------------------------------ kernel classes of inductor


def test_inductor_kernels_that_name_a_convolution_are_not_convolutions():
    names = {k["name"]: k for k, _ in launcher_of_each_kernel(events(COMPILED))}
    fused = {n for n in names if re.match(r"triton_(poi|red|per)_", n) and "convolution" in n}
    assert len(fused) >= 3  # triton_poi_fused_convolution_backward_native_batch_norm_backward_17
    with tr.open(COMPILED) as db:
        frame = db.flags()
    classes = {r.name: set(r.classes) for r in frame.itertuples()}
    for name in fused:
        assert "convolution" not in classes[name] and "triton" in classes[name]
        assert classes[name] & {"elementwise", "reduction"}
    # the cuDNN kernels the compiled model calls: implicit-GEMM fprop/dgrad/wgrad and the like
    cudnn = {n for n in names
             if not n.startswith("triton_") and re.search(r"(?i)convol|fprop|dgrad|wgrad", n)}
    assert len(cudnn) >= 5
    assert {n for n, c in classes.items() if "convolution" in c} == cudnn


# ------------------------------------------------------------------ TorchScript on CUDA


def test_torchscript_on_cuda_keeps_the_accuracy_and_its_speedup_is_the_latency_ratio():
    rows = json.loads((H200 / "torchscript" / "results.json").read_text())
    by = {(r["device"], r["mode"]): r for r in rows}
    assert set(by) == {(d, m) for d in ("cpu", "cuda") for m in ("eager", "torchscript")}
    for device in ("cpu", "cuda"):
        eager, script = by[(device, "eager")], by[(device, "torchscript")]
        assert eager["test_samples"] == script["test_samples"] > 0
        assert eager["test_accuracy"] == script["test_accuracy"]
        assert script["speedup"] == pytest.approx(eager["median_ms"] / script["median_ms"])
    assert run_config(H200 / "torchscript")["device"] == "cuda"
