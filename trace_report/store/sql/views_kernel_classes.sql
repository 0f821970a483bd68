-- Kernel classes (docs/analysis.md): a versioned rule table and the classes of every GPU
-- operation name (kernels, memcpy, memset). TEMP views, created on every connection.
-- A rule matches when its RE2 pattern (regexp_matches, case-sensitive unless (?i)) finds the
-- name, the trace's compute capability is >= min_cc (when set), and the name already has the
-- class in `requires` (or lacks it, for '!class'). `requires` refers only to rules without one.
-- A cuda_core match removes tensor_core (and so the classes that require it); an inductor
-- pointwise or reduction kernel (triton plus elementwise or reduction) is no convolution.
-- Every rule is tested on a real kernel name from ../shared/data or traces/ (our own captures),
-- in tests/analyses/flags/test_kernel_classes.py (and _amd.py); a pattern no real name there has is tested
-- on a name built from its cited public source, and the test says so.
-- tensor_core is one fact for flags, advise and the roofline estimate: the estimate asks
-- kernel_class_matches too (analyses/roofline/estimate.py), so a new pattern here reaches all three.
CREATE OR REPLACE TEMP VIEW kernel_class_rules AS
SELECT '10' AS version, * FROM (VALUES
    (5, 'cuda_core_ffma', 'cuda_core', '_ffma_', NULL, NULL,
     'cuDNN/cuBLAS xmma kernels built for CUDA cores name their math _ffma_ (FP32 FMA) and their '
     || 'types f32f32_f32f32_f32; they run no MMA (Nsight Compute on an H100 counts no HMMA/HGMMA in '
     || 'sm80_xmma_fprop_implicit_gemm_..._ffma_...). The class vetoes tensor_core, which '
     || 'xmma_gemm / xmma_(fprop|dgrad|wgrad)_implicit_gemm would otherwise give',
     'traces/h100-2026-11-25 (this project''s H100 ResNet-18 captures and their ncu forward pass)'),
    (9, 'tc_wmma', 'tensor_core', '(?i)wmma', NULL, NULL,
     'WMMA is matrix-core math on both vendors: NVIDIA''s warp-level wmma API runs on tensor cores '
     || '(cutlass_80_wmma_tensorop_*), AMD''s WMMA instructions on RDNA3/RDNA4 matrix cores '
     || '(composable_kernel kernel_gemm_wmma_cshuffle_v3, built for gfx11/gfx12 only)',
     'CUDA C++ Programming Guide (Warp Matrix Functions, nvcuda::wmma); ROCm composable_kernel '
     || 'gridwise_gemm_wmma_cshuffle_v3 (kernel_gemm_wmma_cshuffle_v3) and RDNA3 ISA v_wmma_* instructions'),
    (10, 'tc_pyprof', 'tensor_core',
     'h884|s884|h1688|s1688|hmma|i8816|16816|dgrad_1x1_stride_2x2|first_layer_wgrad_kernel|conv1x1|conv2d_c1_k1|direct_group|xmma_implicit_gemm|xmma_sparse_conv|xmma_warp_specialized_implicit_gemm|xmma_gemm|xmma_sparse_gemm|c1688',
     NULL, NULL,
     'kernel names that encode a tensor-core MMA shape or an xmma/hmma engine',
     'torch-tb-profiler TC_Allowlist (pytorch/kineto tb_plugin/torch_tb_profiler/profiler/tensor_core.py), from NVIDIA PyProf tc.py'),
    (11, 'tc_xmma_conv', 'tensor_core', 'xmma_(fprop|dgrad|wgrad)(_indexed)?_implicit_gemm', NULL, NULL,
     'cuDNN xmma implicit-GEMM convolutions (sm80_xmma_fprop_implicit_gemm_..._tensor16x8x8; '
     || 'sm90 names put indexed first: sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_...)',
     'cuDNN kernel naming; the names carry the MMA tile (tensor16x8x8)'),
    (12, 'tc_cutlass_tensorop', 'tensor_core', 'tensorop|MmaTensorOp', NULL, NULL,
     'CUTLASS names kernels by operator class: tensorop (tensor cores) vs simt (CUDA cores); '
     || 'cuDNN''s CUTLASS convolutions carry it in their template arguments, as the warp-level '
     || 'MmaTensorOp (vs MmaSimt). CUTLASS 3 library kernels keep the word after the architecture: '
     || 'cutlass3x_sm90_tensorop_*, cutlass3x_sm100_tensorop_*, block-scaled cutlass3x_sm100_bstensorop_*, '
     || 'while cutlass3x_sm100_simt_sgemm_* (cuBLAS FP32 on B200) stays CUDA-core',
     'NVIDIA CUTLASS library operation naming (cutlass_tensorop_*, cutlass_simt_*; CUTLASS 3 '
     || 'python/cutlass_library: cutlass3x_<arch>_<opclass>_..., opclass tensorop / bstensorop / simt)'),
    (13, 'tc_tf32', 'tensor_core', 'tf32', NULL, NULL,
     'TF32 math exists only on tensor cores (sm80+)',
     'NVIDIA Ampere architecture whitepaper (TF32 Tensor Core operations)'),
    (14, 'tc_flash', 'tensor_core', 'flash_fwd|flash_bwd|fmha', NULL, NULL,
     'FlashAttention / fused MHA kernels are built on tensor-core MMA',
     'Dao-AILab/flash-attention (CUTLASS/CuTe MMA); pytorch_flash kernels in PyTorch'),
    (15, 'tc_amd_matrix', 'tensor_core',
     '_MI[0-9]+x[0-9]+x[0-9]+(x[0-9]+)?_|(?i:_xdl)|(^|[^A-Za-z])(mfma|MFMA)|igemm_(fwd|bwd|wrw)_gtcx', NULL, NULL,
     'AMD matrix cores (MFMA on CDNA; WMMA in Tensile''s gfx11 kernels): Tensile/hipBLASLt/rocBLAS kernels '
     || 'name their MatrixInstruction (_MI16x16x1_, _MI16x16x16_, and the older four-number _MI32x32x8x1_; a '
     || 'Cijk_ kernel without _MI is a VALU kernel), composable_kernel and MIOpen xdl / xdlops kernels '
     || '(kernel_grouped_conv_fwd_xdl_cshuffle_v3, gridwise_gemm_xdlops_*), MIOpen igemm gtc xdlops, and '
     || 'kernels that name the MFMA instruction itself (mfma / MFMA after a non-letter: not brcmfmac)',
     'ROCm Tensile kernel naming (MatrixInstruction: Cijk_Alik_Bljk_HBH_MT64x128x32_MI32x32x8x1_SE_K1 in '
     || 'Tensile''s gfx908 assembly), ROCm composable_kernel (gridwise_gemm_xdl_cshuffle_v3), MIOpen igemm_gtc; '
     || 'AMD CDNA ISA (v_mfma_* instructions)'),
    (16, 'tc_nvjet', 'tensor_core', '^nvjet_', NULL, NULL,
     'cuBLAS/cuBLASLt GEMM kernels of CUDA 12.8+ on Hopper and Blackwell are nvjet_[sm<NN>_]<types>_<tiles>... '
     || '(nvjet_tst_*, nvjet_hsh_*, nvjet_sm90_*, nvjet_sm100_tst_*, nvjet_sm120_tst_mma_*); they replaced the '
     || 'sm90_xmma_gemm_* / cutlass_80_tensorop_* tensor-core kernels cuBLAS ran before. The three type letters '
     || 'name the cuBLASLt entry point (hsh: cublasLtHSHMatmul FP16, tst: cublasLtTSTMatmul BF16, '
     || 'sss_tf32: cublasLtSSSMatmul with TF32), every one a tensor-core type; FP32 GEMMs without TF32 run '
     || 'other kernels (sm80_xmma_gemm_..._ffma_, cutlass_80_simt_sgemm_* in traces/h100-2026-11-25/baseline, '
     || 'cutlass3x_sm100_simt_sgemm_* on B200), and an nvjet name with _ffma_ would still lose tensor_core '
     || 'to cuda_core_ffma',
     'tracelens_b200_vllm_eager (nvjet_tst_* launched by aten::linear on c10::BFloat16); nvFuser '
     || 'HopperMatmulTest.HSH Nsight Systems export (nvjet_hsh_*, H100); NVIDIA developer forum thread 348958 '
     || '(H100 NVL: sm90_xmma_gemm/cutlass_80_tensorop kernels with CUDA 12.1 become nvjet_tst with CUDA 12.8); '
     || 'NVIDIA-TAO/tao-pytorch nvidia_tao_pytorch/cv/grounding_dino/scripts/train.py@d999a78 (nvjet_sm120_hsh/tst/'
     || 'sss_tf32_mma kernels = cublasLtHSH/TST/SSSMatmul, fp16/bf16/TF32)'),
    (17, 'tc_sm90_xmma', 'tensor_core', '^sm(9|1[0-2])[0-9][a-z]?_xmma_', NULL, NULL,
     'cuBLAS/cuDNN xmma kernels built for Hopper and Blackwell (sm90_xmma_*, sm100_xmma_*) are warpgroup '
     || 'MMA kernels: their names carry warpgroupsize instead of warpsize, and the FP32 ones compute in TF32 '
     || '(f32f32_tf32f32_f32); Nsight Compute counts HGMMA.64x128x8.F32.TF32 in '
     || 'sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_warpgroupsize1x1x1_*. '
     || 'Anchored at the start: cask_plugin init_device_workspace_kernel<xmma__5x_cudnn::...> is no MMA kernel, '
     || 'and an xmma name with _ffma_ stays cuda_core',
     'traces/h100-2026-11-25/ncu-step/forward-instances.ncu.csv (per-opcode counts of this project''s H100 '
     || 'ResNet-18 forward pass); cuBLAS/cuDNN kernel naming (sm90_xmma_gemm_bf16bf16_bf16f32_f32_*__5x_cublas)'),
    (18, 'tc_gmma', 'tensor_core', 'gmma|Gmma|GMMA', NULL, NULL,
     'Hopper warpgroup MMA: PTX wgmma.mma_async, its SASS HGMMA, and CUTLASS 3 / CuTe kernels whose template '
     || 'arguments name the GMMA mainloop or atoms (cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized*, '
     || 'cute::SM90::GMMA::*)',
     'PTX ISA (wgmma.mma_async, sm_90a); NVIDIA CUTLASS include/cutlass/gemm/dispatch_policy.hpp and '
     || 'collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp'),
    (19, 'tc_sm100_umma', 'tensor_core', 'UMMA|Umma|tcgen05|SM1[0-2][0-9][a-z]?_MMA_', NULL, NULL,
     'Blackwell tensor-core MMA (tcgen05.mma, called UMMA in CUTLASS): CUTLASS 3 / CuTe kernels whose template '
     || 'arguments name the UMMA mainloop or atoms (cutlass::gemm::MainloopSm100TmaUmmaWarpSpecialized*, '
     || 'cute::SM100_MMA_F16BF16_SS, cute::UMMA::*). Case-sensitive: summary contains umma. The bare word '
     || 'sm100 is no evidence: cutlass3x_sm100_simt_sgemm_* is a CUDA-core GEMM',
     'PTX ISA (tcgen05.mma, sm_100a); NVIDIA CUTLASS include/cutlass/gemm/dispatch_policy.hpp, '
     || 'collective/sm100_mma_warpspecialized.hpp, include/cute/arch/mma_sm100_umma.hpp'),
    (19, 'tc_fp8_fp4', 'tensor_core', '(?i)(^|[_.:])(mx)?(e4m3|e5m2|e2m1|e2m3|e3m2)', NULL, NULL,
     'a kernel whose operands are 8-, 6- or 4-bit floats (FP8 E4M3/E5M2, FP6 E2M3/E3M2, FP4 E2M1, '
     || 'and their block-scaled MX forms) runs on tensor cores: no CUDA-core instruction computes in '
     || 'those types (TensorRT-LLM bmm_MxE4m3_MxE2m1..._sm100f MoE kernels, cuBLAS *_e4m3* GEMMs)',
     'NVIDIA Hopper (FP8) and Blackwell (FP4/FP6, MX formats) tensor-core architecture whitepapers; OCP '
     || 'Microscaling Formats (MX) v1.0; tracelens_b200_vllm_eager kernel names'),
    (20, 'tf32_named', 'tf32', 'tf32', NULL, NULL,
     'the kernel name says TF32 (cuDNN/cuBLAS/CUTLASS TF32 kernels)',
     'kernel naming: sm80_xmma_*_tf32f32_*, cutlass_tensorop_s1688*_tf32_*'),
    (21, 'tf32_sm80_s1688gemm', 'tf32_inferred', 'tensorop_s1688gemm', NULL, 8.0,
     'un-prefixed CUTLASS tensorop_s1688gemm (fp32 in and out, m16n8k8 MMA) on sm80+ runs TF32; '
     || 'tensorop_bf16_s1688gemm / tensorop_f16_s1688gemm are BF16 / FP16, not TF32',
     'MMA m16n8k8 with 32-bit operands is TF32 on sm80 (PTX ISA mma shapes)'),
    (30, 'bf16_tc', 'bf16_tensor_core', '(?i)bf16|bfloat16|^nvjet_(sm[0-9]+[a-z]?_)?t[a-z]{2}_', 'tensor_core', NULL,
     'tensor-core kernel with BF16 operands (bf16 in the name or its template arguments, or an nvjet '
     || 'kernel whose first type letter is t: nvjet_tst_* is cublasLtTSTMatmul, BF16 A and B)',
     'kernel naming: cutlass_80_tensorop_bf16_s16816gemm, sm90_xmma_gemm_bf16bf16_*; nvjet_tst_* launched '
     || 'by aten::linear on c10::BFloat16 in tracelens_b200_vllm_eager; NVIDIA-TAO/tao-pytorch '
     || 'grounding_dino train.py@d999a78 (bf16: nvjet_sm120_tst_mma_*, cublasLtTSTMatmul)'),
    (31, 'fp16_tc', 'fp16_tensor_core',
     '(?i)(^|[^bt])f16|fp16|half|h884|h1688|h16816|^nvjet_(sm[0-9]+[a-z]?_)?h[a-z]{2}_', 'tensor_core', NULL,
     'tensor-core kernel with FP16 operands (f16/fp16/half, or hNNN MMA shapes; bf16 excluded; an nvjet kernel '
     || 'whose first type letter is h: nvjet_hsh_* is cublasLtHSHMatmul, FP16 A and B)',
     'kernel naming: volta_fp16_s884gemm, turing_fp16_s1688gemm, cutlass_80_tensorop_f16_s16816gemm; nvjet_hsh_* '
     || 'in the nvFuser HopperMatmulTest.HSH export; NVIDIA-TAO/tao-pytorch grounding_dino train.py@d999a78 '
     || '(fp16: nvjet_sm120_hsh_mma_*, cublasLtHSHMatmul)'),
    (40, 'cudnn_layout', 'layout_conversion', '(nchwToNhwc|nhwcToNchw)Kernel', NULL, NULL,
     'cuDNN converts activations between NCHW and NHWC around NHWC (tensor-core) kernels; '
     || 'layout words inside GEMM/conv names (..._nhwckrsc_nchw_..., *_nchw) are not conversions',
     'FORMATS.md; cuDNN nchw2nhwc_params_t / nhwc2nchw_params_t'),
    (41, 'miopen_batched_transpose', 'layout_conversion', '(^|[^A-Za-z_])batched_transpose_[0-9]+x[0-9]+_', NULL, NULL,
     'MIOpen (ROCm) transposes activations and gradients between NCHW and NHWC around its NHWC '
     || 'implicit-GEMM (igemm_*_gtcx*_nhwc) convolutions with batched_transpose_<tile>_<type> kernels: '
     || 'the AMD counterpart of cuDNN nchwToNhwcKernel',
     'MI300X ResNet-18 training trace (AMD-AGI/TraceLens tests/traces/mi300/ddp_resnet18_no_pool, '
     || 'batched_transpose_32x32_half beside igemm_fwd_gtcx3_nhwc_bf16); ROCm MIOpen '
     || 'src/kernels/batched_transpose.cpp and the NCHW<->NHWC transpose solutions of the NHWC igemm solvers'),
    (50, 'memcpy', 'memcpy', '^Memcpy ', NULL, NULL,
     'gpu_memcpy activity (CUPTI memcpy records: Memcpy HtoD/DtoH/DtoD)',
     'Kineto gpu_memcpy event names'),
    (51, 'memset', 'memset', '^Memset ', NULL, NULL,
     'gpu_memset activity (CUPTI memset records)',
     'Kineto gpu_memset event names'),
    (60, 'collective', 'collective',
     '^nccl|^rccl|ncclKernel|ncclDevKernel|multimem_all_reduce|cross_device_reduce|(one|two)_shot_all_reduce',
     NULL, NULL,
     'NCCL/RCCL collective kernels and PyTorch/vLLM custom all-reduce kernels',
     'NCCL kernel naming (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllGather_RING_LL)'),
    (70, 'elementwise', 'elementwise', 'elementwise_kernel|multi_tensor_apply_kernel|^triton_poi_', NULL, NULL,
     'ATen TensorIterator elementwise kernels, foreach (multi_tensor_apply) kernels, inductor pointwise',
     'PyTorch aten/src/ATen/native/cuda (Loops.cuh, MultiTensorApply.cuh); inductor triton_poi_ prefix'),
    (71, 'reduction', 'reduction', '(^|[^A-Za-z_])reduce_kernel|^triton_(red|per)_|cub::DeviceReduce|cub::DeviceSegmentedReduce',
     NULL, NULL,
     'ATen reduce_kernel, CUB device reductions, inductor reduction / persistent-reduction kernels',
     'PyTorch aten/src/ATen/native/cuda/Reduce.cuh; inductor triton_red_/triton_per_ prefixes'),
    (72, 'attention', 'attention', '(?i)flash_fwd|flash_bwd|fmha|(^|[^a-z])attn_(fwd|bwd)|attention', '!triton', NULL,
     'fused attention kernels (FlashAttention, memory-efficient fmha, AMD aotriton attn_fwd, vLLM '
     || 'paged/unified attention): what F.scaled_dot_product_attention runs. Not an Inductor kernel, '
     || 'whose name lists the aten operators it fuses',
     'Dao-AILab/flash-attention (flash_fwd_kernel); PyTorch pytorch_flash:: and fmha_cutlassF kernels; '
     || 'ROCm aotriton attn_fwd in tracelens_mi300_bert_small'),
    (73, 'softmax', 'softmax', '(?i)softmax', '!triton', NULL,
     'ATen softmax kernels (cunn_SoftMaxForward/Backward, softmax_warp_forward/backward): a softmax run '
     || 'as its own kernel, as eager attention (matmul, softmax, matmul) runs it. Not an Inductor kernel',
     'PyTorch aten/src/ATen/native/cuda/SoftMax.cu, PersistentSoftmax.cuh; tracelens_h100_timesformer'),
    (74, 'norm', 'norm',
     '(?i)layer_?norm|rms_?norm|group_?norm|batch_?norm|instance_?norm|(^|[^a-z])bn_(fw|bw)_|RowwiseMoments|ComputeFusedParams|GammaBetaBackward',
     '!triton', NULL,
     'normalisation kernels: ATen layer/batch/group norm (vectorized_layer_norm_kernel, '
     || 'batch_norm_collect_statistics_kernel, RowwiseMomentsCUDAKernel), cuDNN bn_fw_/bn_bw_, MIOpen '
     || 'MIOpenBatchNorm*, vLLM rms_norm_kernel. Not an Inductor kernel',
     'PyTorch aten/src/ATen/native/cuda (layer_norm_kernel.cu, Normalization.cuh, group_norm_kernel.cu); '
     || 'cuDNN and vLLM kernel naming; tracelens_mi300_resnet18_ddp_train, tracelens_b200_vllm_eager'),
    (75, 'copy', 'copy', 'direct_copy_kernel|copy_device_to_device|CatArrayBatchedCopy', NULL, NULL,
     'ATen copy kernels: tensor.to/.contiguous()/copy_ (direct_copy_kernel_cuda, copy_device_to_device) '
     || 'and torch.cat (CatArrayBatchedCopy): data moved, not computed',
     'PyTorch aten/src/ATen/native/cuda/Copy.cu and Shape.cu'),
    (80, 'triton', 'triton', '^triton_', NULL, NULL,
     'kernels generated by TorchInductor (triton_poi_/triton_red_/triton_per_/triton_tem_); a '
     || 'pointwise or reduction one is never a convolution, though its name lists the aten operators '
     || 'it fuses (triton_poi_fused_convolution_backward_native_batch_norm_backward_17)',
     'PyTorch torch/_inductor kernel naming'),
    (90, 'convolution', 'convolution',
     '(?i)convol|conv[0-9]d|grouped_conv|fprop|dgrad|wgrad|scudnn|winograd|implicit_convolve|explicit_convolve|fft2d_|im2col|flip_filter|igemm_(fwd|bwd|wrw)|bwd_weight|bwd_data|naive_conv_|asmconv|miopenconv|miopencv|groupconv',
     NULL, NULL,
     'cuDNN/MIOpen/CUTLASS/composable_kernel convolution kernels (implicit GEMM, Winograd, FFT, im2col, '
     || 'fprop/dgrad/wgrad). composable_kernel computes a convolution''s weight gradient as a batched GEMM '
     || 'named for its direction (kernel_batched_gemm_xdlops_bwd_weight, GridwiseGemm_..._bwd_weight): '
     || 'a convolution, not a GEMM; MIOpen names its own kernels naive_conv_*, miopenSp3AsmConv*, '
     || 'MIOpenConv*/MIOpenCv*, MIOpenGroupConv*',
     'cuDNN, MIOpen and CUTLASS kernel naming; ROCm composable_kernel device_grouped_conv_bwd_weight_'
     || 'multiple_d_xdl_cshuffle.hpp (kernel_batched_gemm_xdlops_bwd_weight); MIOpen naive_conv.cpp '
     || '(naive_conv_nonpacked_wrw_nchw_*), conv_bin_wino*.cpp (miopenSp3AsmConv_v21_1_3_*)'),
    (91, 'gemm', 'gemm', '(?i)(^|[^b])gemm|gemv|^Cijk_|^nvjet_|^bmm_|splitKreduce', '!convolution', NULL,
     'cuBLAS/cuBLASLt/CUTLASS/hipBLASLt GEMM and GEMV kernels (not implicit-GEMM convolutions; fbgemm is not a GEMM)',
     'cuBLAS (volta_sgemm, ampere_sgemm, nvjet), CUTLASS (*gemm*), Tensile (Cijk_) kernel naming'),
    (92, 'inductor_gemm_template', 'gemm', '^triton_tem_fused_(.*_)?(addmm|mm|bmm|baddbmm)(_|$)', '!convolution', NULL,
     'TorchInductor matmul templates (max-autotune): triton_tem_fused_ then the aten ops fused into '
     || 'the kernel, sorted by name (triton_tem_fused_addmm_mean_t_view_29, triton_tem_fused_mm_t_0)',
     'PyTorch torch/_inductor select_algorithm (TritonTemplateKernel, kernel_name_from_nodes)')
) AS t(priority, rule_id, class, pattern, requires, min_cc, rationale, source);

-- The rules a name matches, as a list of {class, rule_id} in priority order. cc = the trace's
-- compute capability (DOUBLE, NULL when unknown: rules with min_cc never match then).
-- kernel_class_regexp is regexp_matches with this table's patterns as constants, compiled once per
-- query rather than once per name (generated: views_kernel_class_regexp.sql; after a new pattern
-- here, python -m trace_report.store.kernel_class_regexp > trace_report/store/sql/views_kernel_class_regexp.sql).
CREATE OR REPLACE TEMP MACRO kernel_class_matches(kname, kcc) AS (
    WITH m AS (
        SELECT class, rule_id, requires, priority FROM kernel_class_rules
        WHERE kernel_class_regexp(kname, pattern) AND (min_cc IS NULL OR kcc >= min_cc)
    ),
    -- cuda_core (a kernel that names its CUDA-core math) vetoes tensor_core; an inductor
    -- pointwise or reduction kernel vetoes convolution (the name lists the ops it fuses)
    base AS (SELECT * FROM m WHERE requires IS NULL AND NOT (
        class = 'tensor_core' AND EXISTS (SELECT 1 FROM m v WHERE v.class = 'cuda_core'))
        AND NOT (class = 'convolution' AND EXISTS (SELECT 1 FROM m v WHERE v.class = 'triton')
                 AND EXISTS (SELECT 1 FROM m v WHERE v.class IN ('elementwise', 'reduction')))),
    dep AS (
        SELECT * FROM m
        WHERE requires IS NOT NULL
          AND (EXISTS (SELECT 1 FROM base b WHERE b.class = ltrim(m.requires, '!'))) <> starts_with(m.requires, '!')
    )
    SELECT list({'class': class, 'rule_id': rule_id} ORDER BY priority)
    FROM (SELECT * FROM base UNION ALL SELECT * FROM dep)
);

-- Classes of every GPU operation name (kernels, memcpy, memset) per trace; names that match no
-- rule are left out. The compute capability is the trace's deviceProperties' or, without them,
-- the one its kernel names show (device_arch_of, views_device_arch.sql: a lower bound).
-- classes: sorted, distinct; rules: rule ids in priority order.
-- kernel_classes_of(names): the same for a relation of gpu_op_names' rows (its name).
CREATE OR REPLACE TEMP MACRO kernel_classes_of(names) AS TABLE
WITH trace_names AS (
    SELECT DISTINCT e.trace_id, e.name, t.cc
    FROM query_table(names) e JOIN device_arch_of(names) t ON t.trace_id = e.trace_id
),
distinct_names AS (SELECT DISTINCT name, cc FROM trace_names),
matched AS (SELECT name, cc, kernel_class_matches(name, cc) AS m FROM distinct_names)
SELECT n.trace_id, n.name,
       list_sort(list_distinct(list_transform(m.m, lambda x: x.class))) AS classes,
       list_transform(m.m, lambda x: x.rule_id) AS rules
FROM trace_names n JOIN matched m ON m.name = n.name AND m.cc IS NOT DISTINCT FROM n.cc
WHERE len(m.m) > 0;

CREATE OR REPLACE TEMP VIEW kernel_classes AS  -- a table in advise, report
    SELECT * FROM kernel_classes_of('gpu_op_names');
