"""Layout conversions on AMD: MIOpen's batched_transpose kernels in the MI300X ResNet-18 training
trace (../shared/data/traces/tracelens_mi300_resnet18_ddp_train) count as layout conversions,
checked against a plain pass over the trace JSON."""

from __future__ import annotations

import re

import pytest
from conftest import KERNEL_CATS, TRACES, folder_events, shared_or_skip

import trace_report as tr
from trace_report.analyses.flags import classify, flags

FOLDER = "tracelens_mi300_resnet18_ddp_train"
TRANSPOSE = re.compile(r"^batched_transpose_\d+x\d+_\w+$")  # MIOpen's kernel naming


@pytest.fixture(scope="module")
def kernels() -> list[dict]:
    shared_or_skip()
    return [e for e in folder_events(FOLDER) if e.get("cat") in KERNEL_CATS]


def test_every_batched_transpose_kernel_of_the_mi300_trace_is_a_layout_conversion(kernels):
    names = sorted({k["name"] for k in kernels if TRANSPOSE.match(k["name"])})
    assert "batched_transpose_32x32_half" in names  # the real name the rule cites
    with tr.open(TRACES / FOLDER) as db:
        rows = classify(db, names, 9.4).to_dict(orient="records")
    for row in rows:
        assert "layout_conversion" in row["classes"], row["name"]
        assert "miopen_batched_transpose" in row["rules"]
        assert not {"tensor_core", "fp16_tensor_core"} & set(row["classes"]), row["name"]


def test_layout_conversion_time_matches_the_json(kernels):
    transposes = [k for k in kernels if TRANSPOSE.match(k["name"])]
    with tr.open(TRACES / FOLDER) as db:
        summary = flags(db).summary.set_index("class")
    assert summary.loc["layout_conversion", "count"] == len(transposes) > 0
    assert summary.loc["layout_conversion", "total_us"] == pytest.approx(
        sum(float(k["dur"]) for k in transposes))


def test_igemm_convolutions_are_not_layout_conversions(kernels):
    name = next(k["name"] for k in kernels if "igemm_fwd_gtcx3_nhwc" in k["name"])
    with tr.open(TRACES / FOLDER) as db:
        (row,) = classify(db, [name], 9.4).to_dict(orient="records")
    assert "layout_conversion" not in row["classes"]  # 'nhwc' in a conv name is not a transpose


# ------------------------------------------------------------------ AMD matrix cores (MFMA / WMMA)

MATRIX_FOLDERS = ["hta_amd_mi250", "tracelens_mi300_bert_small", "tracelens_mi300_resnet18_ddp_train",
                  "tracelens_mi300_torch_compile_triton"]
MFMA_TILE = re.compile(r"_MI\d+x\d+x\d+(x\d+)?_")  # Tensile's MatrixInstruction in the kernel name


@pytest.mark.parametrize("folder", MATRIX_FOLDERS)
def test_every_tensile_mfma_and_ck_xdl_kernel_is_tensor_core(folder):
    """Real names: every Tensile/hipBLASLt Cijk_ kernel that names its MFMA instruction, every
    composable_kernel xdl kernel and every MIOpen igemm gtc kernel of the AMD traces."""
    shared_or_skip()
    names = sorted({e["name"] for e in folder_events(folder) if e.get("cat") in KERNEL_CATS})
    matrix = [n for n in names if MFMA_TILE.search(n) or "_xdl" in n or "igemm_" in n]
    assert matrix, folder
    with tr.open(TRACES / folder) as db:
        rows = classify(db, matrix, 9.4).to_dict(orient="records")
    for row in rows:
        assert "tensor_core" in row["classes"], row["name"]
        assert "tc_amd_matrix" in row["rules"], row["name"]


# Constructed (not captured) names, after the public source each cites: no trace here has them.
# (name, rule it must match or None, tensor_core expected, source)
AMD_CONSTRUCTED = [
    ("Cijk_Alik_Bljk_HBH_MT64x128x32_MI32x32x8x1_SE_K1", "tc_amd_matrix", True,
     "Tensile's older four-number MatrixInstruction, as in Tensile's gfx908 assembly kernels"),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x16_MI16x16x16_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1", "tc_amd_matrix", True,
     "rocBLAS Tensile HHS kernel from a public rocprof results.csv (ISA1100: WMMA on RDNA3)"),
    ("Cijk_Alik_Bljk_SB_MT32x64x32_SE_K1", None, False,
     "a Tensile kernel without _MI is a VALU (CUDA-core-like) kernel: Tensile's gfx908 assembly"),
    ("void ck::kernel_gemm_wmma_cshuffle_v3<ck::GridwiseGemm_wmma_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, "
     "ck::tensor_layout::gemm::ColumnMajor, ck::half_t> >(...)", "tc_wmma", True,
     "composable_kernel gridwise_gemm_wmma_cshuffle_v3 (gfx11/gfx12 WMMA), demangled and shortened"),
    ("void ck::mx_mfma_test::matmul<ck::f8_t, 32, ck::f8_t, 32, float, 16, float, 32, 32, 64>(...)",
     "tc_amd_matrix", True, "composable_kernel test/mx_mfma_op: a kernel that names the MFMA instruction"),
]


@pytest.mark.parametrize(("name", "rule_id", "tensor", "source"), AMD_CONSTRUCTED,
                         ids=[c[0][:40] for c in AMD_CONSTRUCTED])
def test_amd_matrix_rules_on_constructed_names(name, rule_id, tensor, source):
    shared_or_skip()  # the rules are read from a database: one of the shared traces
    with tr.open(TRACES / "tracelens_mi300_torch_compile_triton") as db:
        (row,) = classify(db, [name], 9.4).to_dict(orient="records")
    assert ("tensor_core" in row["classes"]) == tensor, source
    assert rule_id is None or rule_id in row["rules"], source


def test_mfma_is_matched_as_a_word():
    """'mfma' inside another word (brcmfmac: a Wi-Fi driver) is not the MFMA instruction."""
    shared_or_skip()
    with tr.open(TRACES / "tracelens_mi300_torch_compile_triton") as db:
        (row,) = classify(db, ["brcmfmac_sdio_rxf_kernel"], 9.4).to_dict(orient="records")
    assert "tensor_core" not in row["classes"]
