"""FLOP estimates from operator shapes: ResNet-18 against MACs counted with forward hooks, and
kernel-time attribution on real GPU traces."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SHARED, TRACES, invoke

import trace_report as tr
from trace_report.analyses.flags import FlagsOptions, flags
from trace_report.analyses.roofline.estimate import estimate_ops, precision_of, tensor_core_of
from trace_report.analyses.roofline.measured import RooflineOptions, roofline


def trace_dir(name: str) -> Path:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


def raw_events(path: Path) -> list[dict[str, Any]]:
    file = next(p for p in sorted(path.iterdir()) if p.name.endswith((".json", ".json.gz")))
    opener = gzip.open if file.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(file, "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


# ------------------------------------------------------------------ precision (the FLOP and byte
# formulas: the operator cost model, tests/store/test_op_cost.py)


def test_precision_classes() -> None:
    assert precision_of("float", False) == "fp32"
    assert precision_of("float", True) == "tf32_tensor"
    assert precision_of("c10::BFloat16", True) == "fp16_tensor"
    assert precision_of("c10::Half", False) == "fp16"
    assert precision_of("double", None) == "fp64"
    assert precision_of("double", True) == "fp64_tensor"
    assert precision_of("long int", True) is None


def test_tensor_core_of_is_the_kernel_class_rule() -> None:
    """The estimate's tensor-core fact per kernel name is class tensor_core of the rule table, with
    the cuda_core veto: the names the old regex of the estimate got wrong, both ways."""
    with tr.open(trace_dir("hta_triton_example")) as db:
        got = tensor_core_of(db.con, [
            "volta_sgemm_128x64_nn",
            "ampere_tf32_s1688gemm_fp32_128x128_nn",
            "nvjet_tst_128x64_64x8_1x2_h_bz_coopA_TNT",
            "nvjet_sm100_tst_128x256_64x4_1x2_h_bz_TNT",
            # CUDA-core xmma (_ffma_, the old regex said xmma = tensor core) and cuDNN's workspace init
            "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_"
            "execute_kernel__5x_cublas",
            "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm"
            "::fprop::Warp_specialized_params_non_template<xmma__5x_cudnn::Grid_constant_params> >",
            "SubTensorOpWithScalar1d",  # MIOpen elementwise (the old regex matched tensorop in any case)
            # Tensile MFMA kernels (the old regex looked for the word mfma, which they do not have)
            "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB0",
        ], 9.0)
    assert got == {
        "volta_sgemm_128x64_nn": False,
        "ampere_tf32_s1688gemm_fp32_128x128_nn": True,
        "nvjet_tst_128x64_64x8_1x2_h_bz_coopA_TNT": True,
        "nvjet_sm100_tst_128x256_64x4_1x2_h_bz_TNT": True,
        "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_"
        "execute_kernel__5x_cublas": False,
        "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm"
        "::fprop::Warp_specialized_params_non_template<xmma__5x_cudnn::Grid_constant_params> >": False,
        "SubTensorOpWithScalar1d": False,
        "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB0": True,
    }


# ------------------------------------------------------------------ one tensor-core fact


def _every_trace() -> list[Path]:
    """Every trace of ../shared/data (folders of traces/, the Nsight Systems exports) and of
    traces/ (this project's captures)."""
    folders = sorted(p for p in TRACES.iterdir() if p.is_dir()) if TRACES.is_dir() else []
    nsys = sorted((SHARED / "data" / "nsys").glob("*/*.sqlite"))
    ours = sorted({f.parent for f in (REPO / "traces").rglob("*.pt.trace.json.gz")})
    return folders + nsys + ours


def _trace_id(path: Path) -> str:
    for root in (SHARED / "data", REPO):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return path.name


IN_THE_DEFAULT_RUN = {"traces/tracelens_b200_vllm_eager", "traces/tracelens_mi300_resnet18_ddp_train",
                      "traces/hta_a100_ddp_nccl", "traces/h100-2026-11-25/baseline",
                      "traces/h200-2026-11-26/compile-max-autotune/compiled",
                      "nsys/nvfuser_nsys_h100_matmul/report1.sqlite"}
"""The traces of :func:`test_flags_and_estimate_agree_on_every_kernel_name` in the default run (one
per kind of kernel name: cuBLAS nvjet on B200, AMD Tensile/MIOpen, cuDNN/NCCL on A100, our H100
capture, Triton templates, an Nsight Systems export); every other trace runs with the slow tests."""


@pytest.mark.parametrize("path", [pytest.param(p, id=_trace_id(p), marks=() if _trace_id(p) in IN_THE_DEFAULT_RUN
                                               else pytest.mark.slow) for p in _every_trace()])
def test_flags_and_estimate_agree_on_every_kernel_name(path: Path) -> None:
    """flags' tensor_core names (the kernel_classes view) and the estimate's tensor-core decision
    (tensor_core_of, the expression estimate_ops applies to each kernel an operator launched) are
    the same set, on every kernel name of every trace."""
    with tr.open(path) as db:
        kernels = db.con.execute(
            "SELECT DISTINCT e.name, try_cast(t.compute_capability AS DOUBLE) AS cc FROM events e "
            "JOIN traces t ON t.trace_id = e.trace_id WHERE e.cat = 'kernel' ORDER BY 1").fetchall()
        frame = flags(db).frame
        flagged = set(frame.loc[frame["classes"].map(lambda c: "tensor_core" in c), "name"])
        estimated: set[str] = set()
        for cc in {c for _, c in kernels}:
            names = [n for n, c in kernels if c == cc or (c is None and cc is None)]
            estimated |= {n for n, tc in tensor_core_of(db.con, names, cc).items() if tc}
    assert estimated == flagged
    if path.name == "tracelens_b200_vllm_eager":  # the cuBLAS GEMMs of the kind
        assert {n for n, _ in kernels if n.startswith("nvjet_tst_")} <= estimated


def test_estimate_counts_tensile_mfma_gemms_as_tensor_core() -> None:
    """End to end: the MI300X BERT linears run on Tensile MFMA kernels (Cijk_..._MI16x16x1_), which
    flags calls tensor_core; the estimate now says fp16_tensor for every one (it said fp16)."""
    path = trace_dir("tracelens_mi300_bert_small")
    with tr.open(path) as db:
        ops = estimate_ops(db.con)
        flagged = set(flags(db, FlagsOptions(classes=("tensor_core",))).frame["name"])
    linears = ops[ops["op"] == "aten::linear"]
    assert len(linears) == 26 and (linears["n_kernels"] > 0).all()
    assert set(linears["precision"]) == {"fp16_tensor"}
    assert flagged and all("_MI16x16x1_" in n for n in flagged)


# ------------------------------------------------------------------ ResNet-18 end to end


def test_resnet18_flops_match_hooked_macs(tmp_path: Path) -> None:
    """A torch.profiler trace (record_shapes=True) of torchvision's ResNet-18 at 224x224 on the
    CPU: the estimate must equal the multiply-adds counted from each Conv2d/Linear module's real
    output shape, ~1.81 G per image (torchvision lists 1.81 GFLOPS, counted as MACs)."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    from torch.profiler import ProfilerActivity, profile

    model = torchvision.models.resnet18(weights=None).eval()
    macs = 0

    def hook(module: Any, inputs: Any, output: Any) -> None:
        nonlocal macs
        if isinstance(module, torch.nn.Conv2d):
            macs += output.numel() * module.in_channels // module.groups * math.prod(module.kernel_size)
        else:
            macs += output.numel() * module.in_features

    for module in model.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            module.register_forward_hook(hook)
    batch = 2
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(torch.randn(batch, 3, 224, 224))
    prof.export_chrome_trace(str(tmp_path / "resnet18.pt.trace.json"))
    (tmp_path / "run.json").write_text(json.dumps({"config": {"batch_size": batch}}))
    with tr.open(tmp_path / "resnet18.pt.trace.json") as db:
        ops = estimate_ops(db.con)
        result = roofline(db, RooflineOptions(batch_size=batch))
    assert ops["note"].isna().all() and set(ops["op"]) == {"aten::conv2d", "aten::linear"}
    assert len(ops) == 21  # 20 convolutions + the classifier
    assert ops["flop"].sum() == 2 * macs
    assert 1.80e9 < macs / batch < 1.83e9
    assert result.flop_per_sample == pytest.approx(2 * macs / batch)
    assert ops["time_s"].isna().all()  # CPU only: no kernels to time


# ------------------------------------------------------------------ real GPU traces


def test_vit_h100_estimates_and_kernel_time() -> None:
    path = trace_dir("tracelens_h100_falconsai_vit")
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    with tr.open(path) as db:
        ops = estimate_ops(db.con)
    conv = ops[ops["op"] == "aten::conv2d"].iloc[0]
    # patch embedding: [4, 3, 224, 224] * [768, 3, 16, 16], stride 16 -> 14 x 14 patches
    assert conv["flop"] == 2 * 4 * 768 * 14 * 14 * 3 * 16 * 16 == 924844032
    assert conv["precision"] == "fp16_tensor"
    linears = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::linear"]
    expected = sum(2 * math.prod(e["args"]["Input Dims"][0][:-1]) * e["args"]["Input Dims"][1][0]
                   * e["args"]["Input Dims"][0][-1] for e in linears)
    lin = ops[ops["op"] == "aten::linear"]
    assert len(lin) == len(linears) == 73 and lin["flop"].sum() == expected
    # kernel time by External id: kernels carrying the id of an operator inside each linear
    kernels = [e for e in events if e.get("cat") == "kernel"]
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    total = 0.0
    for e in linears:
        inside = {c["args"]["External id"] for c in cpu if c["tid"] == e["tid"]
                  and e["ts"] <= c["ts"] <= e["ts"] + e["dur"]}
        total += sum(k["dur"] for k in kernels if k["args"].get("External id") in inside)
    assert lin["time_s"].sum() * 1e6 == pytest.approx(total, rel=1e-9)


def test_2021_trace_without_concrete_inputs() -> None:
    with tr.open(trace_dir("kineto_rn50_nw4_2021jun")) as db:
        result = roofline(db)
    frame = result.frame
    fwd = frame[frame["kernel"] == "aten::conv2d"]
    bwd = frame[frame["kernel"] == "aten::cudnn_convolution_backward"]
    assert len(fwd) == len(bwd) == 318
    assert fwd["flop"].isna().all() and fwd["note"].str.contains("Concrete Inputs").all()
    assert bwd["flop"].notna().all() and (bwd["time_s"] > 0).all()
    assert result.peaks.key == "v100-sxm2" and set(bwd["bound"].dropna()) <= {"memory", "compute"}
    assert any("without a FLOP count" in n for n in result.notes)


def test_cli_on_a_trace(tmp_path: Path) -> None:
    path = trace_dir("tracelens_h100_bert_small")
    res = invoke(["roofline", str(path), "--by-name", "-f", "json", "--chart",
                                   str(tmp_path / "est.html")])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert sorted((r["kernel"], r["launches"], r["source"]) for r in rows) == [
        ("aten::linear", 26, "estimate"), ("aten::scaled_dot_product_attention", 4, "estimate")]
    assert {r["precision"] for r in rows} == {"fp16_tensor"} and {r["bound"] for r in rows} <= {"memory", "compute"}
    assert "estimates from operator shapes" in res.stderr
    assert (tmp_path / "est.html").stat().st_size > 10000


@pytest.mark.parametrize(("name", "key"), [("hta_amd_mi250", "mi250-gcd"), ("tracelens_mi300_bert_small", "mi300x")])
def test_amd_traces_get_their_mi_series_peaks(name: str, key: str) -> None:
    """The MI250 trace names its device "AMD Radeon Graphics": its deviceProperties (gfx 9.0, 104
    compute units, read here from the JSON) make it one MI250 GCD; the MI300X VF matches by name."""
    path = next(trace_dir(name).glob("*.json.gz"))
    with gzip.open(path, "rt") as f:
        props = json.load(f)["deviceProperties"][0]
    if name == "hta_amd_mi250":
        assert (props["name"], props["computeMajor"], props["computeMinor"], props["numSms"]) == \
            ("AMD Radeon Graphics", 9, 0, 104)
    with tr.open(trace_dir(name)) as db:
        result = roofline(db, RooflineOptions(by_name=True))
    assert result.peaks is not None and result.peaks.key == key
    with tr.open(trace_dir(name)) as db:
        assert roofline(db, RooflineOptions(by_name=True, gpu="h100-sxm")).peaks.key == "h100-sxm"  # --gpu wins
