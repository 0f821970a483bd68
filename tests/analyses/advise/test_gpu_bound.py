"""`advise` on GPU-bound steps, the ranking of the low-utilisation symptom and advice that fits
the trace, on real traces from ../shared/data, each value against a plain-Python pass over the
trace JSON (GPU busy time, kernel classes by their names, fusible chains per stream)."""

from __future__ import annotations

import re

import pytest
from advise_traces import clip, union
from conftest import GPU_OP_CATS, KERNEL_CATS, TRACES, events_of, load_json, tar_ranks, trace_file

import trace_report as tr
from trace_report.analyses.advise import advise
from trace_report.analyses.advise.gpu_bound import GPU_BOUND, kernel_label

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

# The fusible kernels of the V100 ResNet-50 trace hta_ns_resolution, by their names: ATen
# elementwise, foreach and reduce kernels, cuDNN batch norm, ATen copies and torch.cat.
FUSIBLE = re.compile(r"elementwise_kernel|multi_tensor_apply_kernel|reduce_kernel|bn_(fw|bw)_|direct_copy_kernel"
                     r"|CatArrayBatchedCopy")
NORM = re.compile(r"bn_(fw|bw)_")


def found(result) -> dict[str, dict]:
    return {r["finding"]: r for r in result.frame.to_dict(orient="records")}


class Plain:
    """GPU busy time in the ProfilerSteps and the fusible chains, from the JSON alone."""

    def __init__(self, events: list[dict]):
        x = [e for e in events if e.get("ph") == "X" and "dur" in e]
        self.gpu = [e for e in x if e.get("cat") in GPU_OP_CATS]
        self.gpu_us = sum(e["dur"] for e in self.gpu)
        self.steps = [(e["ts"], e["ts"] + e["dur"]) for e in x if str(e["name"]).startswith("ProfilerStep#")
                      and e.get("cat") != "gpu_user_annotation"]  # the CPU-side range, not its GPU copy
        busy = union([(e["ts"], e["ts"] + e["dur"]) for e in self.gpu if e["dur"] > 0])
        self.busy_pct = 100 * sum(clip(busy, a, b) for a, b in self.steps) / sum(b - a for a, b in self.steps)

    def chains(self, fusible: re.Pattern) -> tuple[int, float]:
        """(chains, their µs): runs of two or more consecutive fusible kernels on one stream."""
        streams: dict[object, list[dict]] = {}
        for e in self.gpu:
            if e["cat"] in KERNEL_CATS:
                streams.setdefault((e["pid"], (e.get("args") or {}).get("stream", e["tid"])), []).append(e)
        n, us = 0, 0.0
        for ks in streams.values():
            run: list[dict] = []
            for k in [*sorted(ks, key=lambda e: e["ts"]), None]:
                if k is not None and fusible.search(k["name"]):
                    run.append(k)
                    continue
                if len(run) >= 2:
                    n, us = n + 1, us + sum(e["dur"] for e in run)
                run = []
        return n, us


@pytest.fixture(scope="module")
def v100():
    plain = Plain(events_of(load_json(trace_file("hta_ns_resolution"))))
    with tr.open(TRACES / "hta_ns_resolution") as db:
        return plain, advise(db, all_findings=True)


def test_gpu_bound_trace_gets_its_finding_with_busy_share_and_fusion_saving(v100):
    """V100 ResNet-50: the GPU busy 97% of step time; the saving is half the time of the chains of
    elementwise/norm/copy kernels (a fused chain 2x faster)."""
    plain, result = v100
    assert plain.busy_pct >= GPU_BOUND.busy_pct
    f = found(result)["gpu_bound"]
    assert f["value"] == pytest.approx(plain.busy_pct, abs=0.01)
    chains, chain_us = plain.chains(FUSIBLE)
    assert chains > 100
    saving = chain_us * (1 - 1 / GPU_BOUND.fusion_speedup)
    assert f["est_saving_ms_per_step"] == pytest.approx(saving / len(plain.steps) / 1e3, abs=0.01)
    assert f"fusible: {100 * chain_us / plain.gpu_us:.3g}% of GPU time" in f["evidence"]
    norm = sum(e["dur"] for e in plain.gpu if NORM.search(e["name"]))
    assert f"norm {100 * norm / plain.gpu_us:.3g}%" in f["evidence"]
    assert "torch.compile(model)" in f["recommendation"] and "CUDAFunctor_add" in f["recommendation"]


def test_tensor_core_advice_names_the_kernel_to_change(v100):
    """The V100's largest GEMM/convolution kernel on CUDA cores (plain: most time among the names
    cuBLAS and cuDNN give them) is named in what to change."""
    plain, result = v100
    totals: dict[str, float] = {}
    for e in plain.gpu:
        if e["cat"] in KERNEL_CATS and re.search(r"sgemm|scudnn|dgrad|wgrad|winograd", e["name"]):
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
    top = max(totals, key=totals.__getitem__)
    label = re.split(r"[<(,]", top.removeprefix("void "), maxsplit=1)[0]  # the name without its template
    assert f"({label})" in found(result)["no_tensor_cores"]["recommendation"]


def test_eager_softmax_is_a_finding_with_half_its_time_saved():
    """TimeSformer on an H100: ATen softmax kernels hold 43% of GPU time, no fused attention kernel."""
    plain = Plain(events_of(load_json(trace_file("tracelens_h100_timesformer"))))
    softmax = sum(e["dur"] for e in plain.gpu if e["cat"] in KERNEL_CATS and "softmax" in e["name"].lower())
    assert not [e for e in plain.gpu if "flash" in e["name"] or "fmha" in e["name"]]
    with tr.open(TRACES / "tracelens_h100_timesformer") as db:
        result = advise(db)
    f = found(result)["eager_softmax"]
    assert f["value"] == pytest.approx(100 * softmax / plain.gpu_us, abs=0.01)
    assert f["est_saving_ms_per_step"] == pytest.approx(softmax / 2 / len(plain.steps) / 1e3, abs=0.01)
    assert "scaled_dot_product_attention" in f["recommendation"]
    assert "cunn_SoftMaxForward" in f["recommendation"]  # the kernel of this trace to remove


def test_low_utilization_ranks_after_every_finding_with_a_cause():
    """tb-profiler's one-step excerpt (V100): host syncs and the DataLoader come before low
    utilisation, whose saving is only the idle time no finding explains; the rest of the list has
    no saving."""
    with tr.open(TRACES / "kineto_gpu_metrics_input") as db:
        frame = advise(db, all_findings=True).frame
    order = list(frame["finding"])
    low = order.index("low_gpu_utilization")
    assert {"host_sync", "data_loading"} <= set(order[:low])
    assert frame.iloc[low + 1:]["est_saving_ms_per_step"].isna().all()


def test_compiled_run_gets_cuda_graph_advice_not_torch_compile():
    """vLLM on a B200 runs torch.compile's graph ('## Call CompiledFxGraph' in the JSON): the
    launch-bound advice is CUDA graphs (mode='reduce-overhead'), not 'use torch.compile'."""
    events = events_of(load_json(trace_file("tracelens_b200_vllm_eager")))
    assert any(str(e.get("name", "")).startswith("## Call CompiledFxGraph") for e in events)
    with tr.open(TRACES / "tracelens_b200_vllm_eager") as db:
        f = found(advise(db))["launch_bound"]
    assert "Already compiled" in f["recommendation"] and "reduce-overhead" in f["recommendation"]
    assert "Cut CPU time" not in f["recommendation"] and "the run is compiled" in f["evidence"]
    with tr.open(TRACES / "tracelens_h100_bert_small") as db:  # eager: torch.compile is the advice
        eager = found(advise(db))["launch_bound"]
    assert "torch.compile(mode='reduce-overhead')" in eager["recommendation"]


def test_straggler_advice_only_with_several_ranks():
    """hta_a100_ddp_nccl is one rank of a DDP run: nothing to compare it with; the 8-rank DLRM
    archive has ranks to compare."""
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        one = found(advise(db))["exposed_communication"]
    assert "--stragglers" not in one["recommendation"]
    assert len(tar_ranks(TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz")) == 8
    with tr.open(TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz") as db:
        eight = found(advise(db))["exposed_communication"]
    assert "--stragglers" in eight["recommendation"]


@pytest.mark.parametrize(("name", "label"), [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "vectorized_elementwise_kernel (CUDAFunctor_add)"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float>(c10::BFloat16*)",
     "cunn_SoftMaxForward"),
    ("volta_sgemm_64x64_nt", "volta_sgemm_64x64_nt"),
])
def test_kernel_labels(name, label):
    assert kernel_label(name) == label
