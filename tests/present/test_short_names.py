"""Short kernel names keep what tells kernels apart: on the kernel names of every trace
and export in ../shared/data (and this project's own captures), the distinct names of one trace
shortened together at 40, 60 and 80 characters never collide, fit, and keep the functor or
kernel function (``SoftMaxForward``, ``calc_energy``, ``MulFunctor``, ``AddFunctor``); headlines
never cut the functor; a table's name column keeps a sensible width; chart labels are apart."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import tarfile
from pathlib import Path

import pytest
from conftest import GPU_OP_CATS, REPO, SHARED, events_of, load_json

from trace_report.formats.names import PREFERRED, demangle, name_forms
from trace_report.present import fit
from trace_report.present.charts.traces import LABEL_CHARS, LABEL_PX, short_name, unique_labels
from trace_report.present.fit import MIN_NAME_WIDTH, fit_rows, fit_widths, short_names

WIDTHS = (40, 60, 80)
IDENTIFIERS = ("SoftMaxForward", "calc_energy", "MulFunctor", "AddFunctor")

ACC = ("alpaka::ApiCudaRt, alpaka::AccGpuUniformCudaHipRt<alpaka::ApiCudaRt, std::integral_constant<unsigned long, "
       "(unsigned long)1>, unsigned long>, std::integral_constant<unsigned long, (unsigned long)1>, unsigned long")
ARR = "std::array<float, (unsigned long)516> *"
ALPAKA = {  # muDock's Alpaka build under nsys (elvispolimi/muDock, gpu_test_results/profiling_results_micro/
    # nsys_genetic_Alpaka_CUDA_gpukernsum.csv, Apache-2.0): six kernels, one alpaka::detail::gpuKernel template
    "calc_energy": f"void alpaka::detail::gpuKernel<mudock::<unnamed>::calc_energy<(int)256>, {ACC}, int, int, "
                   + "const float *, " * 6 + "const int *, " * 5 + "const float *, const float *, const int *, "
                   "const float *, const float *, const float *, int, int, int, const float *, const int *, float *>"
                   "(alpaka::Vec<T4, T5>, T1, T6...)",
    "apply_alpaka": f"void alpaka::detail::gpuKernel<mudock::<unnamed>::apply_alpaka<(int)256>, {ACC}, int, int, "
                    f"const float *, const float *, const float *, float *, float *, float *, const {ARR}, "
                    + "const int *, " * 6 + "const int *>(alpaka::Vec<T4, T5>, T1, T6...)",
    "iterate_alpaka": f"void alpaka::detail::gpuKernel<mudock::<unnamed>::iterate_alpaka, {ACC}, int, float, int, "
                      f"int *, {ARR}, {ARR}, float *, alpaka::rand::Philox4x32x10 *>(alpaka::Vec<T4, T5>, T1, T6...)",
    "initialize_alpaka": f"void alpaka::detail::gpuKernel<mudock::<unnamed>::initialize_alpaka, {ACC}, int, int *, "
                         f"{ARR}, float *, alpaka::rand::Philox4x32x10 *>(alpaka::Vec<T4, T5>, T1, T6...)",
    "finalize_alpaka": f"void alpaka::detail::gpuKernel<mudock::<unnamed>::finalize_alpaka, {ACC}, int, int *, "
                       f"float *, float *, {ARR}, {ARR}>(alpaka::Vec<T4, T5>, T1, T6...)",
    "init_alpaka_rand": f"void alpaka::detail::gpuKernel<mudock::init_alpaka_rand, {ACC}, "
                        "alpaka::rand::Philox4x32x10 *, unsigned long, unsigned long>(alpaka::Vec<T4, T5>, T1, T6...)",
}

ELEMENTWISE = [  # three PyTorch 2.x kernels that the old shortener cut to one and the same text
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, "
    "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
    "MulFunctor<float> >, std::array<char*, 2ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, "
    "float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
]


# ---------------------------------------------------------------- the kernel names of each input

def _from_events(events: list) -> set[str]:
    return {demangle(str(e["name"])) for e in events
            if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in GPU_OP_CATS}


def _sources() -> list[tuple[str, Path, str | None]]:
    """(id, file, tar member) of every trace and export with kernel names."""
    out: list[tuple[str, Path, str | None]] = []
    data = SHARED / "data"
    for root in (data / "traces", REPO / "traces"):
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            rel = str(p.relative_to(root.parent))
            if p.name.endswith((".json", ".json.gz")) and not p.name.startswith(("run", "results", "summary")):
                out.append((rel, p, None))
            elif p.name.endswith(".tar.gz"):
                with tarfile.open(p) as tar:
                    out += [(f"{rel}:{m.name}", p, m.name) for m in tar.getmembers()
                            if m.isfile() and m.name.endswith(".json")]
    for p in sorted((data / "nsys").glob("*/*")) if (data / "nsys").is_dir() else []:
        if p.suffix in (".csv", ".sqlite"):
            out.append((str(p.relative_to(data)), p, None))
    return out


def kernel_names(path: Path, member: str | None) -> list[str]:
    """The distinct kernel (and memcpy/memset) names of one trace or export, as ingest stores them."""
    if member is not None:
        with tarfile.open(path) as tar:
            names = _from_events(events_of(json.load(tar.extractfile(member))))  # type: ignore[arg-type]
    elif path.suffix == ".csv":  # nsys stats cuda_gpu_kern_sum
        with open(path, newline="") as fh:
            names = {row["Name"] for row in csv.DictReader(fh)}
    elif path.suffix == ".sqlite":  # nsys export
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                               "JOIN StringIds s ON s.id = k.demangledName")}
        finally:
            con.close()
    else:
        doc = load_json(path)
        names = _from_events(events_of(doc)) if isinstance(doc, (list, dict)) else set()
    return sorted(names)


SOURCES = _sources()


def _check_apart(names: list[str], width: int) -> list[str]:
    labels = short_names(names, width)
    assert len(labels) == len(names)
    assert len(set(labels)) == len(names), [lab for lab in labels if labels.count(lab) > 1][:6]
    too_long = [lab for lab in labels if len(lab) > width]
    assert not too_long, too_long[:3]
    for name, label in zip(names, labels, strict=True):
        for word in IDENTIFIERS:
            if word in name:
                assert word in label, (width, label, name[:300])
    return labels


@pytest.mark.parametrize(("key", "path", "member"), [pytest.param(*s, id=s[0]) for s in SOURCES])
def test_the_kernels_of_each_trace_shorten_apart(key: str, path: Path, member: str | None) -> None:
    names = kernel_names(path, member)
    if not names:
        pytest.skip(f"{key}: no kernels")
    for width in WIDTHS:
        _check_apart(names, width)


def test_every_input_was_seen(shared: Path) -> None:
    """The parametrization found the traces, the archive's eight ranks and the nsys exports."""
    keys = [k for k, _, _ in SOURCES]
    assert sum(":dlrm_kineto/" in k for k in keys) == 8
    assert sum(k.startswith("nsys/") for k in keys) == 4
    assert sum(k.startswith("traces/") and ":" not in k for k in keys) >= 22
    timesformer = shared / "data/traces/tracelens_h100_timesformer"
    assert any("SoftMaxForward" in n for p in timesformer.glob("*.json.gz") for n in kernel_names(p, None))


# ---------------------------------------------------------------- without ../shared

@pytest.mark.parametrize("width", WIDTHS)
def test_alpaka_kernels_keep_their_kernel_function(width: int) -> None:
    labels = _check_apart(list(ALPAKA.values()), width)
    for word, label in zip(ALPAKA, labels, strict=True):
        assert word in label, label
        assert "ApiCudaRt" not in label and "integral_constant" not in label
    assert short_names([ALPAKA["calc_energy"]], 40) == ["gpuKernel<calc_energy<256>>"]


@pytest.mark.parametrize("width", WIDTHS)
def test_elementwise_kernels_keep_their_functor(width: int) -> None:
    labels = _check_apart(ELEMENTWISE, width)
    assert "MulFunctor" in labels[0] and "MulFunctor" in labels[1] and "CUDAFunctor_add" in labels[2]
    assert not any("at::native::" in lab or "std::array" in lab for lab in labels)


def test_before_and_after() -> None:
    """The issue's examples, at the width of a two-line name cell of 30 columns (58 characters)."""
    assert short_names(ELEMENTWISE, 58) == [
        "vectorized_elementwise_kernel<AUnaryFunctor<MulFunctor>>",
        "vectorized_elementwise_kernel<BinaryFunctor<MulFunctor>>",
        "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>",
    ]
    assert short_names(ELEMENTWISE, 40) == [  # the kernel function is cut before its functor
        "vectoriz…rnel<AUnaryFunctor<MulFunctor>>",
        "vectoriz…rnel<BinaryFunctor<MulFunctor>>",
        "vectorized_elem…_kernel<CUDAFunctor_add>",
    ]
    assert short_names(ELEMENTWISE, 80) == [
        "vectorized_elementwise_kernel<AUnaryFunctor<MulFunctor<float>>>",
        "vectorized_elementwise_kernel<BinaryFunctor<MulFunctor<float>>>",
        "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>",
    ]


def test_forms_drop_scaffolding_before_the_functor() -> None:
    forms = name_forms(ELEMENTWISE[0])
    assert forms[0].startswith("at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<")
    assert forms[-1] == "vectorized_elementwise_kernel<MulFunctor>"
    preferred = [forms[k] for k in PREFERRED]
    assert all(len(b) <= len(a) for a, b in zip(preferred[1:], preferred[2:], strict=False))
    lam = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
           "{lambda()#2}::operator()() const::{lambda()#14}::operator()() const::{lambda(float)#1}, "
           "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, "
           "unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, …)")
    assert "unrolled_elementwise_kernel<direct_copy_kernel_cuda(float)>" in name_forms(lam)
    assert name_forms("Memcpy DtoD (Device -> Device)")[-1] == "Memcpy DtoD (Device -> Device)"
    assert name_forms("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")[-1] == \
        "ncclKernel_AllReduce_RING_LL_Sum_float"


def test_dtype_variants_stay_apart_with_the_smallest_difference() -> None:
    f32 = ELEMENTWISE[2]
    bf16 = f32.replace("CUDAFunctor_add<float>", "CUDAFunctor_add<c10::BFloat16>")
    assert short_names([f32, bf16], 40) == ["vectorized…ernel<CUDAFunctor_add<float>>",
                                           "vectoriz…rnel<CUDAFunctor_add<BFloat16>>"]
    plain = [f"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize{t}_warpgroupsize1x1x1_g1_"
             "execute_segment_k_off_kernel__5x_cudnn" for t in ("128x128x64", "64x128x64", "64x64x64")]
    labels = short_names(plain, 60)
    assert all(len(lab) <= 60 for lab in labels) and all(lab.startswith("sm90_xmma_fprop_i") for lab in labels)
    assert [re.search(r"tilesize[0-9x]+", lab).group() for lab in labels] == [  # type: ignore[union-attr]
        "tilesize128x128x64", "tilesize64x128x64", "tilesize64x64x64"]
    labels = short_names(plain, 40)  # tighter: the differing number, with the word before it
    assert len(set(labels)) == 3 and all(len(lab) <= 40 and "tilesize" in lab for lab in labels)


def test_equal_names_share_a_label_and_empty_stays_empty() -> None:
    assert short_names([ELEMENTWISE[0], "", ELEMENTWISE[0]], 60) == [short_names([ELEMENTWISE[0]], 60)[0], "",
                                                                     short_names([ELEMENTWISE[0]], 60)[0]]
    assert short_names(["x" * 200], 20) == ["x" * 13 + "…" + "x" * 6]


def test_headline_never_cuts_the_functor() -> None:
    softmax = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
               "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)")
    assert short_name(softmax, 60, identity=True) == "cunn_SoftMaxForward<SoftMaxForwardEpilogue>"
    narrow = short_name(softmax, 24, identity=True)
    assert narrow.endswith("<SoftMaxForwardEpilogue>") and narrow.startswith("cunn_")
    assert "calc_energy" in short_name(ALPAKA["calc_energy"], 16, identity=True)


# ---------------------------------------------------------------- tables and charts

def test_a_name_column_keeps_a_sensible_width_beside_many_numbers() -> None:
    """compare's table: eleven number columns, a status, a kind and the names at 120 columns."""
    headers = ["status", "a_count", "b_count", "diff_count", "a_total_us", "b_total_us", "diff_us", "a_pct", "b_pct",
               "diff_pct", "ratio", "kind", "name"]
    row = ["vanished", "6", "0", "-6", "36,180.0", "0.000", "-36,180.0", "7.213", "0.000", "-7.213", "0.000", "gpu_op",
           ELEMENTWISE[0].removeprefix("void ")]
    numeric = [False] + [True] * 10 + [False, False]
    widths, _ = fit_widths(headers, [row], numeric, 120)
    assert widths[-1] == MIN_NAME_WIDTH
    cells = fit_rows([row], widths, fit.MAX_LINES, headers)[0]
    assert "MulFunctor" in cells[-1].replace("\n", "") and cells[-1].count("\n") <= 1


def test_fit_rows_shortens_a_name_column_together() -> None:
    rows = [[n.removeprefix("void ")] for n in ELEMENTWISE]
    cells = [r[0].replace("\n", "") for r in fit_rows(rows, [20], 2, ["name"])]
    assert len(set(cells)) == 3 and all(len(c) <= 38 for c in cells)
    assert "MulFunctor" in cells[0] and "MulFunctor" in cells[1] and "add" in cells[2]
    text = "a name that is long enough to be cut"
    assert fit_rows([[text]], [10], 2) == [[fit._fold(fit._cut(text, 18), 10, 2)]]  # no headers: cut as before


def test_chart_labels_are_apart_and_never_truncated_by_the_axis() -> None:
    import pandas as pd

    names = pd.Series([*ELEMENTWISE, *ALPAKA.values(), ELEMENTWISE[0]])
    labels = unique_labels(names)
    assert len(set(labels)) == len(labels) and max(map(len, labels)) <= LABEL_CHARS
    assert labels[-1] == labels[0][:LABEL_CHARS - 5] + " [2]"
    assert LABEL_PX >= 7 * LABEL_CHARS
