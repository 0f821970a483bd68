"""Kernel classes and `trace-report flags` on real kernel names and traces from ../shared/data.

Every rule of the table is exercised on a real kernel name; counts and times are checked against
MANIFEST.tsv and plain-Python passes over the trace JSON.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import Counter, defaultdict

import cpp_demangle
import pandas as pd
import pytest
from conftest import GPU_OP_CATS, KERNEL_CATS, REPO, SHARED, TRACES, folder_events, invoke, manifest_by_dir, tar_ranks

import trace_report as tr
from trace_report.analyses.flags import FlagsOptions, classify, flags, flags_summary, rules
from trace_report.errors import InputError

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")

KERNEL, GPU_OPS = KERNEL_CATS, GPU_OP_CATS





def nsys_kernel_names(folder: str) -> list[str]:
    (path,) = (SHARED / "data" / "nsys" / folder).glob("*.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [n for (n,) in con.execute(
            "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName")]
    finally:
        con.close()


_names_cache: dict[str, list[str]] = {}


def real_names(source: str) -> list[str]:
    """GPU op names of a trace folder, the DLRM archive, or an Nsight Systems export (nsys:...)."""
    if source not in _names_cache:
        if source.startswith("repo:"):  # traces/ of this repository (our own captures)
            names = sorted({e["name"] for e in repo_trace_events(source[5:]) if e.get("cat") in GPU_OPS})
        elif source.startswith("nsys:"):
            names = nsys_kernel_names(source[5:])
        elif source == "param_dlrm_kineto_v100x8":
            ranks = tar_ranks(TRACES / source / "dlrm_kineto.tar.gz")
            names = sorted({e["name"] for ev in ranks.values() for e in ev if e.get("cat") in GPU_OPS})
        else:
            names = sorted({e["name"] for e in folder_events(source) if e.get("cat") in GPU_OPS})
        _names_cache[source] = names
    return _names_cache[source]


def repo_trace_events(folder: str) -> list[dict]:
    (path,) = (REPO / "traces" / folder).glob("*.pt.trace.json.gz")
    with gzip.open(path) as fh:
        return json.load(fh)["traceEvents"]


def real_name(source: str, fragment: str) -> str:
    hits = [n for n in real_names(source) if fragment in n]
    assert hits, f"no GPU op name containing {fragment!r} in {source}"
    return hits[0]




@pytest.fixture(scope="module")
def small():
    """Any connection has the rule table and the classification macro."""
    with tr.open(TRACES / "hta_triton_example") as db:
        yield db


# ------------------------------------------------------------------ every rule on a real name

# (rule_id, source of the real name, fragment that finds it, compute capability, class it gives)
H100 = "repo:h100-2026-11-25/baseline"
H100_BF16 = "repo:h100-2026-11-25/amp-bf16"
H200_AUTOTUNE = "repo:h200-2026-11-26/compile-max-autotune/compiled"

RULE_CASES = [
    ("cuda_core_ffma", H100, "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8", 9.0, "cuda_core"),
    ("cuda_core_ffma", H100, "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs", 9.0, "cuda_core"),
    ("tc_pyprof", "tracelens_h100_timesformer", "cutlass_75_tensorop_bf16_s1688gemm", 9.0, "tensor_core"),
    ("tc_pyprof", "tracelens_h100_timesformer", "sm90_xmma_gemm_bf16bf16", 9.0, "tensor_core"),
    ("tc_xmma_conv", "hta_a100_ddp_nccl", "sm80_xmma_fprop_implicit_gemm", 8.0, "tensor_core"),
    ("tc_xmma_conv", H100_BF16, "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16", 9.0, "tensor_core"),
    ("bf16_tc", H100_BF16, "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16", 9.0, "bf16_tensor_core"),
    ("tc_cutlass_tensorop", "hta_a100_ddp_nccl", "cutlass_tensorop_s1688fprop_optimized_tf32", 8.0, "tensor_core"),
    ("tc_cutlass_tensorop", "tracelens_h100_bert_small", "cutlass_80_wmma_tensorop_bf16_s161616gemm", 9.0,
     "tensor_core"),
    ("tc_cutlass_tensorop", H100, "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemm", 9.0, "tensor_core"),
    ("tc_cutlass_tensorop", "hta_a100_ddp_nccl", "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemm", 8.0,
     "tensor_core"),
    ("tc_tf32", "hta_a100_ddp_nccl", "sm80_xmma_dgrad_implicit_gemm_tf32f32", 8.0, "tensor_core"),
    ("tc_flash", "tracelens_h100_bert_small", "pytorch_flash::flash_fwd_kernel", 9.0, "tensor_core"),
    ("tc_amd_matrix", "tracelens_mi300_torch_compile_triton", "Cijk_Alik_Bljk_BBS", 9.4, "tensor_core"),
    ("tc_amd_matrix", "tracelens_mi300_resnet18_ddp_train", "igemm_fwd_gtcx3_nhwc_bf16", 9.4, "tensor_core"),
    ("tc_amd_matrix", "tracelens_mi300_resnet18_ddp_train", "kernel_grouped_conv_fwd_xdl", 9.4, "tensor_core"),
    ("tc_nvjet", "nsys:nvfuser_nsys_h100_matmul", "nvjet_hsh_", 9.0, "tensor_core"),
    ("tc_nvjet", "tracelens_b200_vllm_eager", "nvjet_tst_", 10.0, "tensor_core"),
    ("tc_sm90_xmma", "tracelens_h100_timesformer", "sm90_xmma_gemm_bf16bf16", 9.0, "tensor_core"),
    ("tc_sm90_xmma", H100, "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32", 9.0, "tensor_core"),
    ("tc_sm90_xmma", H200_AUTOTUNE, "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32", 9.0, "tensor_core"),
    ("tc_wmma", "tracelens_h100_bert_small", "cutlass_80_wmma_tensorop_bf16_s161616gemm", 9.0, "tensor_core"),
    ("tc_fp8_fp4", "tracelens_b200_vllm_eager", "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_", 10.0, "tensor_core"),
    ("tc_fp8_fp4", "tracelens_b200_vllm_eager", "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_", 10.0, "tensor_core"),
    ("bf16_tc", "tracelens_b200_vllm_eager", "nvjet_tst_", 10.0, "bf16_tensor_core"),
    ("tf32_named", "hta_a100_ddp_nccl", "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32", 8.0, "tf32"),
    ("tf32_named", "hta_a100_ddp_nccl", "cutlass_tensorop_s1688dgrad_optimized_tf32", 8.0, "tf32"),
    ("tf32_sm80_s1688gemm", "hta_a100_ddp_nccl", "cutlass_80_tensorop_s1688gemm", 8.0, "tf32_inferred"),
    ("tf32_sm80_s1688gemm", "hta_trace_diff", "cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4", 8.0,
     "tf32_inferred"),
    ("bf16_tc", "tracelens_h100_timesformer", "cutlass_75_tensorop_bf16_s1688gemm", 9.0, "bf16_tensor_core"),
    ("bf16_tc", "tracelens_h100_falconsai_vit", "cutlass_tensorop_bf16_s16816fprop", 9.0, "bf16_tensor_core"),
    ("fp16_tc", "nsys:nvfuser_nsys_h100_matmul", "nvjet_hsh_", 9.0, "fp16_tensor_core"),
    ("cudnn_layout", "hta_a100_ddp_nccl", "cudnn::ops::nchwToNhwcKernel", 8.0, "layout_conversion"),
    ("cudnn_layout", "hta_a100_ddp_nccl", "cudnn::ops::nhwcToNchwKernel", 8.0, "layout_conversion"),
    ("cudnn_layout", "kineto_rn50_nw4_2021jun", "void nchwToNhwcKernel", 7.0, "layout_conversion"),
    ("cudnn_layout", "tracelens_h100_timesformer", "engines_precompiled::nhwcToNchwKernel", 9.0,
     "layout_conversion"),
    ("miopen_batched_transpose", "tracelens_mi300_resnet18_ddp_train", "batched_transpose_32x32_half", 9.4,
     "layout_conversion"),
    ("memcpy", "hta_a100_ddp_nccl", "Memcpy DtoD", 8.0, "memcpy"),
    ("memset", "hta_a100_ddp_nccl", "Memset (Device)", 8.0, "memset"),
    ("collective", "hta_a100_ddp_nccl", "ncclKernel_AllReduce_RING_LL", 8.0, "collective"),
    ("collective", "tracelens_b200_vllm_eager", "ncclDevKernel_AllGather", 10.0, "collective"),
    ("collective", "tracelens_b200_vllm_eager", "multimem_all_reduce_kernel", 10.0, "collective"),
    ("elementwise", "hta_a100_ddp_nccl", "vectorized_elementwise_kernel", 8.0, "elementwise"),
    ("elementwise", "param_linear_kineto_2080ti", "multi_tensor_apply_kernel", 7.5, "elementwise"),
    ("elementwise", "hta_triton_example", "triton_poi_fused_add_cos_sin_0", 8.0, "elementwise"),
    ("reduction", "hta_amd_mi250", "at::native::reduce_kernel", 9.0, "reduction"),
    ("reduction", "tracelens_mi300_torch_compile_triton", "triton_red_fused", 9.4, "reduction"),
    ("triton", "hta_triton_example", "triton_poi_fused_add_cos_sin_0", 8.0, "triton"),
    ("triton", "tracelens_mi300_torch_compile_triton", "triton_red_fused", 9.4, "triton"),
    ("convolution", "kineto_rn50_nw4_2021jun", "implicit_convolve_sgemm", 7.0, "convolution"),
    ("convolution", "kineto_rn50_nw4_2021jun", "volta_scudnn_winograd", 7.0, "convolution"),
    ("convolution", "hta_a100_ddp_nccl", "ImplicitGemmConvolution", 8.0, "convolution"),
    ("convolution", "tracelens_mi300_resnet18_ddp_train", "igemm_bwd_gtcx3", 9.4, "convolution"),
    ("attention", "tracelens_mi300_bert_small", "attn_fwd", 9.4, "attention"),
    ("attention", "tracelens_h100_bert_small", "pytorch_flash::flash_fwd_kernel", 9.0, "attention"),
    ("softmax", "tracelens_h100_timesformer", "cunn_SoftMaxForward", 9.0, "softmax"),
    ("softmax", "hta_a100_ddp_nccl", "softmax_warp_backward", 8.0, "softmax"),
    ("norm", "tracelens_h100_bert_small", "vectorized_layer_norm_kernel", 9.0, "norm"),
    ("norm", "tracelens_mi300_resnet18_ddp_train", "batch_norm_backward_kernel", 9.4, "norm"),
    ("norm", "hta_a100_ddp_nccl", "bn_fw_tr_1C11_kernel_NCHW", 8.0, "norm"),
    ("norm", "tracelens_b200_vllm_eager", "vllm::fused_add_rms_norm_kernel", 10.0, "norm"),
    ("copy", "hta_amd_mi250", "direct_copy_kernel_cuda", 9.0, "copy"),
    ("copy", "hta_trace_diff", "CatArrayBatchedCopy<float", 8.0, "copy"),
    ("copy", "kineto_rn50_nw4_2021jun", "copy_device_to_device", 7.0, "copy"),
    ("convolution", "tracelens_mi300_resnet18_ddp_train", "igemm_wrw_gtcx3", 9.4, "convolution"),
    ("gemm", "param_linear_kineto_2080ti", "volta_sgemm_64x64_tn", 7.5, "gemm"),
    ("gemm", "tracelens_b200_vllm_eager", "nvjet_tst_", 10.0, "gemm"),
    ("gemm", "tracelens_mi300_torch_compile_triton", "Cijk_Alik_Bljk_BBS", 9.4, "gemm"),
    ("gemm", "hta_a100_ddp_nccl", "cutlass_80_tensorop_s1688gemm", 8.0, "gemm"),
    ("inductor_gemm_template", H200_AUTOTUNE, "triton_tem_fused_addmm_mean_t_view_", 9.0, "gemm"),
    ("inductor_gemm_template", H200_AUTOTUNE, "triton_tem_fused_mm_t_", 9.0, "gemm"),
]

# (source, fragment, compute capability, classes the name must NOT get, why)
NOT_CASES = [
    ("hta_a100_ddp_nccl", "_nhwckrsc_nchw_", 8.0, {"layout_conversion", "gemm"}, "layout words in a conv name"),
    ("hta_a100_ddp_nccl", "bn_fw_tr_1C11_kernel_NCHW", 8.0, {"layout_conversion"}, "layout word in a BN kernel"),
    ("hta_a100_ddp_nccl", "max_pool_forward_nchw", 8.0, {"layout_conversion"}, "layout word in a pooling kernel"),
    ("kineto_rn50_nw4_2021jun", "relu_exp_small_nhwc_tn_v1", 7.0, {"layout_conversion"}, "nhwc in a conv name"),
    ("tracelens_mi300_resnet18_ddp_train", "batched_transpose_32x32_half", 9.4,
     {"fp16_tensor_core", "tensor_core"}, "MIOpen transpose is a layout conversion, not an MMA"),
    ("tracelens_h100_timesformer", "cutlass_75_tensorop_bf16_s1688gemm", 9.0, {"tf32", "tf32_inferred",
     "fp16_tensor_core"}, "BF16 s1688gemm is not TF32"),
    ("hta_a100_ddp_nccl", "cutlass_80_tensorop_s1688gemm", 7.5, {"tf32_inferred"}, "no TF32 below sm80"),
    ("hta_a100_ddp_nccl", "cutlass_80_tensorop_s1688gemm", None, {"tf32_inferred"}, "unknown GPU"),
    ("param_linear_kineto_2080ti", "volta_sgemm_64x64_tn", 7.5, {"tensor_core"}, "FP32 SIMT GEMM"),
    ("kineto_rn50_nw4_2021jun", "volta_scudnn_128x64_relu", 7.0, {"tensor_core", "gemm"}, "FP32 SIMT conv"),
    ("param_dlrm_kineto_v100x8", "fbgemm_gpu::permute_2D_data_kernel", 7.0, {"gemm"}, "fbgemm is not a GEMM"),
    ("tracelens_b200_vllm_eager", "multimem_all_reduce_kernel", 10.0, {"reduction"}, "all_reduce_kernel"),
    ("hta_trace_diff", "splitKreduce_kernel", 8.0, {"reduction"}, "cuBLAS split-K epilogue is GEMM"),
    ("hta_a100_ddp_nccl", "sm80_xmma_fprop_implicit_gemm", 8.0, {"gemm"}, "implicit-GEMM conv is a conv"),
    (H100, "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8", 9.0,
     {"tensor_core", "tf32", "fp16_tensor_core", "bf16_tensor_core"}, "xmma GEMM on CUDA cores (_ffma_)"),
    (H100, "sm80_xmma_dgrad_implicit_gemm_f32f32_f32f32_f32_nchwkcrs", 9.0, {"tensor_core"},
     "xmma conv on CUDA cores (_ffma_): ncu counts no MMA in its fprop sibling"),
    (H100, "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32", 9.0, {"cuda_core"}, "TF32 xmma conv (HGMMA)"),
    (H100, "init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm::fprop", 9.0, {"tensor_core"},
     "cuDNN's workspace initialisation names xmma in its template arguments but runs no MMA"),
    ("tracelens_b200_vllm_eager", "nvjet_tst_", 10.0, {"fp16_tensor_core", "cuda_core"},
     "nvjet_tst is BF16 (t), not FP16"),
    ("nsys:nvfuser_nsys_h100_matmul", "nvjet_hsh_", 9.0, {"bf16_tensor_core", "cuda_core"},
     "nvjet_hsh is FP16 (h), not BF16"),
    ("tracelens_mi300_resnet18_ddp_train", "SubTensorOpWithScalar1d", 9.4, {"tensor_core"},
     "MIOpen's SubTensorOp is elementwise: tensorop is matched case-sensitively"),
    ("nsys:pipit_nsys_a100_cloverleaf", "field_summary", 8.0, {"tensor_core"},
     "summary contains umma: the UMMA rule is case-sensitive"),
    ("tracelens_b200_vllm_eager", "cutlass::bfloat16_t", 10.0, {"tensor_core"},
     "a MoE finalize kernel with cutlass types in its template arguments is no MMA kernel"),
    (H200_AUTOTUNE, "triton_tem_fused_addmm_mean_t_view_", 9.0, {"convolution", "elementwise", "reduction"},
     "a matmul template with a fused epilogue is a GEMM"),
    ("tracelens_mi300_resnet18_ddp_train", "igemm_wrw_gtcx3", 9.4, {"gemm"}, "MIOpen weight-gradient conv"),
    ("tracelens_b200_vllm_eager", "routingRenormalize", 10.0, {"norm"}, "MoE routing renormalises, no norm"),
    ("tracelens_h100_timesformer", "cunn_SoftMaxForward", 9.0, {"attention"}, "eager softmax is no fused attention"),
    ("tracelens_mi300_torch_compile_triton", "triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt", 9.4,
     {"norm", "attention", "softmax", "copy"}, "an Inductor kernel is fused already"),
]


@pytest.mark.parametrize(("rule_id", "source", "fragment", "cc", "cls"), RULE_CASES,
                         ids=[f"{c[0]}:{c[2]}" for c in RULE_CASES])
def test_rule_on_real_kernel_name(small, rule_id, source, fragment, cc, cls):
    name = real_name(source, fragment)
    (row,) = classify(small, [name], cc).to_dict(orient="records")
    assert rule_id in row["rules"]
    assert cls in row["classes"]


@pytest.mark.parametrize(("source", "fragment", "cc", "not_classes", "why"), NOT_CASES,
                         ids=[c[4] for c in NOT_CASES])
def test_rule_does_not_fire(small, source, fragment, cc, not_classes, why):
    name = real_name(source, fragment)
    (row,) = classify(small, [name], cc).to_dict(orient="records")
    assert not (not_classes & set(row["classes"])), why


# Patterns that no kernel name in ../shared/data or traces/ has: each is tested on a name written
# after the public source it cites (CONSTRUCTED, not captured), and test_constructed_names_are_not_in_
# the_real_traces checks that no real name could have been used instead.
# (rule_id, constructed name, compute capability, classes it must give, classes it must not, where from)
CONSTRUCTED_CASES = [
    ("convolution", "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_37GridwiseGemm_bk0mk1_"
     "bk0nk1_mn_xdlops_bwd_weightILi256EttffNS_8TupleIJEEE", 9.4, {"convolution", "tensor_core"}, {"gemm"},
     "composable_kernel device_grouped_conv_bwd_weight_multiple_d_xdl_cshuffle.hpp: the weight-gradient "
     "convolution kernel kernel_batched_gemm_xdlops_bwd_weight<GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops_bwd_weight>, "
     "mangled as CK's other kernels in tracelens_mi300_resnet18_ddp_train"),
    ("convolution", "naive_conv_nonpacked_wrw_nchw_float_double_float", 9.4, {"convolution"}, {"gemm"},
     "MIOpen naive_conv.cpp kernel names (naive_conv_nonpacked_wrw_nchw_<suffix>)"),
    ("convolution", "miopenSp3AsmConv_v21_1_3_gfx9_fp32_f2x3_stride1", 9.0, {"convolution"}, {"gemm"},
     "MIOpen Winograd assembly kernel (ConvBinWinogradRxSf2x3 solver)"),
    ("tc_nvjet", "nvjet_sm100_tst_128x256_64x4_1x2_h_bz_TNT", 10.0,
     {"tensor_core", "bf16_tensor_core", "gemm"}, {"fp16_tensor_core"},
     "cuBLAS on B200 (public vLLM/SGLang profiles: nvjet_sm100_tst_* launched by aten::mm on c10::BFloat16)"),
    ("tc_nvjet", "nvjet_sm120_tst_mma_64x64x128_3_32x32x128_tmaAB_alignCD4_bz_TNNN", 12.0,
     {"tensor_core", "bf16_tensor_core", "gemm"}, {"fp16_tensor_core"},
     "cuBLAS on RTX Blackwell (NVIDIA-TAO/tao-pytorch grounding_dino train.py: nvjet_sm120_tst_mma = BF16)"),
    ("tc_nvjet", "nvjet_sm120_hsh_mma_16x128x32", 12.0,
     {"tensor_core", "fp16_tensor_core", "gemm"}, {"bf16_tensor_core"},
     "prefix of the FP16 kernel in NVIDIA-TAO/tao-pytorch grounding_dino train.py (cublasLtHSHMatmul)"),
    ("tc_nvjet", "nvjet_sss_tf32_128x256_TNT", 9.0,
     {"tensor_core", "tf32", "gemm"}, {"fp16_tensor_core", "bf16_tensor_core", "cuda_core"},
     "cuBLAS FP32 GEMM with TF32 allowed (cublasLtSSSMatmul), from a public H100 profile"),
    ("tc_sm90_xmma", "sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", 10.0, {"tensor_core", "bf16_tensor_core", "gemm"}, set(),
     "the sm90_xmma_gemm name of tracelens_h100_timesformer with the Blackwell prefix"),
    ("tc_gmma", "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedCooperative<4, "
     "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>, "
     "cute::tuple<cute::C<128>, cute::C<256>, cute::C<64> >, cutlass::bfloat16_t> > >(...)", 9.0,
     {"tensor_core", "bf16_tensor_core"}, {"cuda_core"},
     "CUTLASS 3 Hopper GEMM, demangled (dispatch policy of include/cutlass/gemm/dispatch_policy.hpp), shortened"),
    ("tc_gmma", "sm90_hgmma_kernel_wgmma_64x128x16", 9.0, {"tensor_core"}, set(),
     "a kernel that names the PTX wgmma / SASS HGMMA instruction"),
    ("tc_sm100_umma", "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, "
     "int>, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm100TmaUmmaWarpSpecialized<13, 2, 4, "
     "cute::tuple<cute::C<1>, cute::C<4>, cute::C<1> > >, cute::tuple<cute::C<64>, cute::C<64>, cute::C<128> >, "
     "cutlass::float_e4m3_t> > >(...)", 10.0, {"tensor_core"}, {"cuda_core"},
     "CUTLASS 3 Blackwell FP8 GEMM (a public mangled name, demangled and shortened)"),
    ("tc_sm100_umma", "void cute::kernel<cute::TiledMMA<cute::MMA_Atom<cute::SM100_MMA_F16BF16_SS<cute::half_t, "
     "cute::half_t, float, 128, 256, cute::UMMA::Major::K, cute::UMMA::Major::K> > > >(...)", 10.0,
     {"tensor_core", "fp16_tensor_core"}, set(), "a CuTe kernel whose MMA atom is SM100_MMA_F16BF16_SS (UMMA)"),
    ("tc_sm100_umma", "gemm_tcgen05_mma_bf16_kernel", 10.0, {"tensor_core", "bf16_tensor_core", "gemm"}, set(),
     "a kernel that names the PTX tcgen05 instruction family"),
    ("tc_cutlass_tensorop", "cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_void_bf16_128x128x64_1x1x1_0_"
     "tnn_align8_warpspecialized_pingpong_epi_tma", 9.0, {"tensor_core", "bf16_tensor_core", "gemm"}, set(),
     "CUTLASS 3 library kernel name (cutlass_library naming, as the CUTLASS profiler prints it)"),
    ("tc_cutlass_tensorop", "cutlass3x_sm100_bstensorop_gemm_ue4m3xe2m1_ue4m3xe2m1_f32_bf16_bf16_128x128x256_1x1x1_"
     "0_tnt_align32_1sm", 10.0, {"tensor_core", "bf16_tensor_core", "gemm"}, set(),
     "CUTLASS 3 block-scaled Blackwell GEMM (opclass bstensorop)"),
]

# Constructed names that must NOT be tensor-core: (name, cc, classes it must not get, why)
CONSTRUCTED_NOT_CASES = [
    ("cutlass3x_sm100_simt_sgemm_f32_f32_f32_f32_f32_128x128x16_1x1x1_3_tnn_align1_bias_f32_relu", 10.0,
     {"tensor_core"}, "CUTLASS 3 SIMT GEMM on B200 (cuBLAS FP32 in public B200 profiles): sm100 alone is no MMA"),
    ("nvjet_sm90_tst_64x64_64x16_2x1_v_bz_ffma_TNT", 9.0, {"tensor_core", "bf16_tensor_core"},
     "hypothetical: a name that says _ffma_ would lose tensor_core to the cuda_core veto, nvjet or not"),
]


@pytest.mark.parametrize(("rule_id", "name", "cc", "classes", "not_classes", "source"), CONSTRUCTED_CASES,
                         ids=[f"{c[0]}:{c[1][:40]}" for c in CONSTRUCTED_CASES])
def test_rule_on_constructed_name(small, rule_id, name, cc, classes, not_classes, source):
    """Constructed (not captured) kernel names, written after the public source in ``source``."""
    (row,) = classify(small, [name], cc).to_dict(orient="records")
    assert rule_id in row["rules"], source
    assert classes <= set(row["classes"]), (source, row["classes"])
    assert not (not_classes & set(row["classes"])), (source, row["classes"])


@pytest.mark.parametrize(("name", "cc", "not_classes", "why"), CONSTRUCTED_NOT_CASES,
                         ids=[c[3][:40] for c in CONSTRUCTED_NOT_CASES])
def test_rule_does_not_fire_on_constructed_name(small, name, cc, not_classes, why):
    (row,) = classify(small, [name], cc).to_dict(orient="records")
    assert not (not_classes & set(row["classes"])), why


REAL_SOURCES = sorted({c[1] for c in RULE_CASES} | {c[0] for c in NOT_CASES} | {
    "tracelens_b200_vllm_eager", "nsys:pipit_nsys_a100_cloverleaf", "hta_amd_mi250", "tracelens_mi300_bert_small",
    "repo:h100-2026-11-25/channels-last", "repo:h100-2026-11-25/ddp",
    "repo:h200-2026-11-26/compile-reduce-overhead/compiled"})


def test_constructed_names_are_not_in_the_real_traces(small):
    """The rules tested only on constructed names match no real kernel name we have (else a real
    one would be tested): tc_gmma and tc_sm100_umma on none at all, tc_nvjet on no sm-prefixed name."""
    real = sorted({n for source in REAL_SOURCES for n in real_names(source)})
    rows = classify(small, real, 9.0)
    fired = {r: [n for n, rs in zip(rows["name"], rows["rules"], strict=True) if r in rs]
             for r in ("tc_gmma", "tc_sm100_umma")}
    assert fired == {"tc_gmma": [], "tc_sm100_umma": []}
    assert not [n for n in real if n.startswith(("nvjet_sm", "cutlass3x_"))]


def test_every_rule_is_tested_and_documented(small):
    table = rules(small)
    assert set(table["rule_id"]) == {c[0] for c in RULE_CASES} | {c[0] for c in CONSTRUCTED_CASES}
    assert not {c[0] for c in CONSTRUCTED_CASES} - {c[0] for c in RULE_CASES} - {"tc_gmma", "tc_sm100_umma"}
    assert table["version"].nunique() == 1
    for col in ("pattern", "class", "rationale", "source"):
        assert table[col].notna().all() and (table[col].str.len() > 0).all()
    assert {"tensor_core", "tf32", "bf16_tensor_core", "fp16_tensor_core", "layout_conversion", "memcpy", "memset",
            "collective", "elementwise", "reduction", "triton", "gemm", "convolution", "attention", "softmax", "norm",
            "copy"} <= set(table["class"])


# ------------------------------------------------------------------ flags vs MANIFEST and the JSON

MANIFEST_TRACES = ["hta_a100_ddp_nccl", "hta_ns_resolution", "kineto_rn50_autograd_api_nw0", "kineto_rn50_nw4_2021jun",
                   "tracelens_h100_falconsai_vit", "tracelens_h100_timesformer", "tracelens_b200_vllm_eager"]


def _is_layout(name: str) -> bool:
    return "nchwToNhwc" in name or "nhwcToNchw" in name


@pytest.mark.parametrize("folder", MANIFEST_TRACES)
def test_flag_counts_match_manifest(folder):
    facts = manifest_by_dir()[f"traces/{folder}"]
    kernels = [e for e in folder_events(folder) if e.get("cat") in KERNEL]
    tf32 = [k for k in kernels if "tf32" in k["name"]]
    layout = [k for k in kernels if _is_layout(k["name"])]
    assert len(tf32) == int(facts["tf32_kernels"]) and len(layout) == int(facts["layout_conversion_kernels"])
    with tr.open(TRACES / folder) as db:
        summary = flags(db).summary.set_index("class")
    assert summary.loc["tf32", "count"] == len(tf32)
    assert summary.loc["tf32", "total_us"] == pytest.approx(sum(k["dur"] for k in tf32))
    assert summary.loc["layout_conversion", "count"] == len(layout)
    assert summary.loc["layout_conversion", "total_us"] == pytest.approx(sum(k["dur"] for k in layout))


def test_a100_flags_rows_and_shares(a100, a100_events):
    result = flags(a100)
    gpu = [e for e in a100_events if e.get("cat") in GPU_OPS]
    gpu_us = sum(e["dur"] for e in gpu)
    per_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in gpu:  # mangled names are stored demangled (as nsys stats shows them)
        name = cpp_demangle.demangle(e["name"]) if e["name"].startswith("_Z") else e["name"]
        per_name[name][0] += 1
        per_name[name][1] += e["dur"]
    frame = result.frame
    assert frame["name"].is_unique
    for row in frame.itertuples(index=False):
        count, total = per_name[row.name]
        assert row.count == count and row.total_us == pytest.approx(total)
        assert row.pct_of_gpu_time == pytest.approx(100.0 * total / gpu_us)
        assert isinstance(row.classes, list) and row.classes
    summary = result.summary.set_index("class")
    inferred = [e for e in gpu if "tensorop_s1688gemm" in e["name"]]
    assert summary.loc["tf32_inferred", "count"] == len(inferred)
    assert summary.loc["tf32", "pct_of_gpu_time"] == pytest.approx(
        100.0 * sum(e["dur"] for e in gpu if "tf32" in e["name"]) / gpu_us)
    assert summary.loc["layout_conversion", "pct_of_gpu_time"] == pytest.approx(
        100.0 * sum(e["dur"] for e in gpu if _is_layout(e["name"])) / gpu_us)
    assert summary.loc["tensor_core", "total_us"] >= summary.loc["tf32", "total_us"] + summary.loc[
        "tf32_inferred", "total_us"] - 1e-6
    assert list(result.summary["class"][:4]) == ["tf32", "tf32_inferred", "tensor_core", "layout_conversion"]


def test_class_filter_and_explain(a100, a100_events):
    result = flags(a100, FlagsOptions(classes=("tf32",)))
    tf32 = Counter(e["name"] for e in a100_events if e.get("cat") in KERNEL and "tf32" in e["name"])
    assert set(result.frame["name"]) == set(tf32)
    assert result.frame["count"].sum() == sum(tf32.values())
    assert set(result.explain["class"]) == {"tf32"}
    (rule,) = result.explain.to_dict(orient="records")
    assert rule["rule_id"] == "tf32_named" and rule["source"] and rule["count"] == sum(tf32.values())
    with pytest.raises(InputError, match="unknown class"):
        flags(a100, FlagsOptions(classes=("warp_speed",)))


def test_cpu_only_trace_has_nothing_to_flag():
    with tr.open(TRACES / "hta_cpu_only") as db:
        result = flags(db)
    assert result.frame.empty
    assert list(result.frame.columns) == ["name", "classes", "count", "total_us", "pct_of_gpu_time"]
    assert any("no GPU activity" in n for n in result.notes)
    # a class filter on no rows kept the rows' columns (it selected columns by an empty mask: KeyError)
    filtered = invoke(["flags", str(TRACES / "hta_cpu_only"), "-c", "tf32", "-f", "json"])
    assert filtered.exit_code == 0, filtered.output
    assert json.loads(filtered.stdout) == []


def test_flags_per_rank_on_the_ddp_archive():
    path = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
    ranks = tar_ranks(path)
    with tr.open(path) as db:
        per_rank = flags(db, FlagsOptions(by_rank=True)).summary
        total = flags(db).summary.set_index("class")
    for rank, events in ranks.items():
        nccl = sum(e["dur"] for e in events if e.get("cat") in KERNEL and e["name"].startswith("ncclKernel"))
        got = per_rank[(per_rank["rank"] == rank) & (per_rank["class"] == "collective")]["total_us"].sum()
        assert got == pytest.approx(nccl)
    assert total.loc["collective", "total_us"] == pytest.approx(
        per_rank.loc[per_rank["class"] == "collective", "total_us"].sum())


@pytest.mark.parametrize("folder", ["param_dlrm_kineto_v100x8", "hta_cpu_only", "hta_a100_ddp_nccl"])
def test_flags_summary_alone_is_the_summary_of_flags(folder):
    """advise and the report read flags_summary, the flags command flags(): the same rows and notes,
    per rank or not, narrowed to some traces, one class (the ranks' NCCL time is checked above)."""
    with tr.open(TRACES / folder) as db:
        ids = [t for (t,) in db.con.execute("SELECT trace_id FROM traces ORDER BY 1").fetchall()]
        for opts in (FlagsOptions(), FlagsOptions(by_rank=True), FlagsOptions(trace_ids=tuple(ids[:1])),
                     FlagsOptions(classes=("tf32",), by_rank=True)):
            summary, notes = flags_summary(db, opts)
            whole = flags(db, opts)
            pd.testing.assert_frame_equal(summary, whole.summary)
            assert notes == whole.notes


# ------------------------------------------------------------------ CLI



def test_cli_flags_json_table_explain(a100_events):
    target = str(TRACES / "hta_a100_ddp_nccl")
    as_json = invoke(["flags", target, "-c", "layout_conversion", "-f", "json"])
    assert as_json.exit_code == 0, as_json.output
    rows = json.loads(as_json.stdout)
    assert {"name", "classes", "count", "total_us", "pct_of_gpu_time"} == set(rows[0])
    assert rows[0]["classes"] == ["layout_conversion"]
    layout = [e for e in a100_events if e.get("cat") in KERNEL and _is_layout(e["name"])]
    assert sum(r["count"] for r in rows) == len(layout)
    table = invoke(["flags", target, "-n", "3", "-f", "markdown"])
    assert table.exit_code == 0 and "Share of GPU time" not in table.stdout  # markdown: no titles
    assert "| class | count |" in table.stdout and "| tf32 | 216 |" in table.stdout
    explain = invoke(["flags", target, "--explain", "-c", "tf32", "-f", "json"])
    (rule,) = json.loads(explain.stdout)
    assert rule["class"] == "tf32" and rule["pattern"] == "tf32" and "naming" in rule["source"]
    summary = invoke(["flags", target, "--summary", "-f", "json"])
    by_class = {r["class"]: r for r in json.loads(summary.stdout)}
    assert by_class["layout_conversion"]["count"] == len(layout)
    bad = invoke(["flags", target, "-c", "nope"])
    assert bad.exit_code == 1 and bad.stderr.startswith("Error:")
