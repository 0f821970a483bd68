"""The GPU of a trace from its kernel names when deviceProperties is missing (views_device_arch.sql):
every real trace against a plain count of its kernel names, and the TF32 rule on an inferred sm80."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from advise_traces import TraceBuilder
from conftest import TRACES, events_of, load_json, manifest_rows

import trace_report
from trace_report.present.report.sections.headline import _devices

# token -> (arch, label): the prefixes the libraries write (cuBLAS/cuDNN volta_/turing_/ampere_,
# sm<NN>_xmma, cuBLAS nvjet_, Tensile Cijk_), counted with plain string tests
PLAIN = [("volta_", "sm70", "V100-class"), ("ampere_", "sm80", "A100-class"), ("sm80_", "sm80", "A100-class"),
         ("sm90_", "sm90", "H100-class"), ("nvjet_", "sm90", "H100-class"), ("sm100_", "sm100", "Blackwell")]
RANK = {"sm70": 70, "sm80": 80, "sm90": 90, "sm100": 100}


def _plain(path: Path) -> tuple[str | None, Counter[str]]:
    doc = load_json(path)
    props = (doc.get("deviceProperties") or doc.get("computeProperties") or []) if isinstance(doc, dict) else []
    names = [e["name"] for e in events_of(doc) if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
    counts: Counter[str] = Counter()
    for n in names:
        bare = n.removeprefix("void ")
        counts.update(tok for tok, _, _ in PLAIN if bare.startswith(tok) or f"_{tok}" in bare)
    return (props[0].get("name") if props else None), counts


FILES = sorted(p for p in TRACES.glob("*/*") if p.name.endswith((".json", ".json.gz"))) if TRACES.is_dir() else []


DEFAULT_FOLDERS = {"kineto_rn50_autograd_api_nw0", "kineto_rn50_nw4_2021feb", "hta_a100_ddp_nccl", "hta_amd_mi250"}
"""The default run: both traces without deviceProperties, an NVIDIA and an AMD one with it; slow: every trace."""


def _param(p: Path) -> object:
    marks = () if p.parent.name in DEFAULT_FOLDERS else (pytest.mark.slow,)
    return pytest.param(p, id=f"{p.parent.name}/{p.name}", marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in FILES])
def test_every_trace(path: Path, shared: object) -> None:
    device, counts = _plain(path)
    row = trace_report.open(path).con.execute("SELECT * FROM device_arch").df().iloc[0]
    if device:
        assert row["device_name"] == device and row["source"] == "deviceProperties"
        return
    nvidia = {tok: n for tok, n in counts.items()}
    if not nvidia:
        assert row["source"] is None or row["source"] != row["source"]
        return
    best = max(nvidia, key=lambda t: (RANK[dict((k, a) for k, a, _ in PLAIN)[t]], nvidia[t]))
    arch = dict((k, a) for k, a, _ in PLAIN)[best]
    assert row["source"] == "kernel names" and row["arch"] == arch
    assert f"from {nvidia[best]:,} {best}* kernels" in row["evidence"]
    gpu = next((r["gpu"] or r["description"] for r in manifest_rows() if r["dir"] == f"traces/{path.parent.name}"), "")
    for model, label in (("V100", "V100-class"), ("A100", "A100-class"), ("H100", "H100-class")):
        if model in gpu:
            assert row["evidence"].startswith(label)


@pytest.mark.slow  # every trace; test_every_trace covers four in the default run
def test_inferred_never_above_the_device(shared: object) -> None:
    """On traces that record the device, the inference is a lower bound of the same vendor (a 2080 Ti,
    sm75, runs cuBLAS's volta_sgemm: sm70)."""
    seen = 0
    for path in FILES:
        row = trace_report.open(path).con.execute("SELECT * FROM device_arch").df().iloc[0]
        if row["source"] == "deviceProperties" and row["inferred_cc"] == row["inferred_cc"] and row["inferred_cc"]:
            seen += 1
            assert row["inferred_vendor"] == row["vendor"], path
            assert row["inferred_cc"] <= row["cc"] + 1e-9, path
    assert seen >= 10


def test_report_card_names_the_class(shared: object) -> None:
    path = TRACES / "kineto_rn50_nw4_2021feb" / "worker0.pt.trace.json.gz"
    _, counts = _plain(path)
    assert _devices(trace_report.open(path).con) == f"V100-class (from {counts['volta_']:,} volta_* kernels)"


def _no_device(tmp_path: Path, kernel: str) -> Path:
    b = TraceBuilder()
    b.launch(1000.0, 5.0, 1010.0, 50.0, name=kernel)
    doc = b.document()
    del doc["deviceProperties"]
    out = tmp_path / "nodevice.json"
    out.write_text(__import__("json").dumps(doc))
    return out


@pytest.mark.parametrize(("kernels", "arch", "cc"), [
    (["ampere_sgemm_128x64_nn", "cutlass_tensorop_s1688gemm_128x128_32x3_nn_align4"], "sm80", 8.0),
    (["volta_sgemm_128x64_nn", "cutlass_tensorop_s1688gemm_128x128_32x3_nn_align4"], "sm70", 7.0),
])
def test_tf32_rule_on_inferred_cc(tmp_path: Path, kernels: list[str], arch: str, cc: float) -> None:
    b = TraceBuilder()
    for i, k in enumerate(kernels):
        b.launch(1000.0 + 100 * i, 5.0, 1010.0 + 100 * i, 50.0, name=k)
    doc = b.document()
    del doc["deviceProperties"]
    path = tmp_path / "nodevice.json"
    path.write_text(__import__("json").dumps(doc))
    con = trace_report.open(path).con
    assert con.execute("SELECT arch, cc, source FROM device_arch").fetchone() == (arch, cc, "kernel names")
    classes = dict(con.execute("SELECT name, classes FROM kernel_classes").fetchall())
    tf32 = "tf32_inferred" in classes["cutlass_tensorop_s1688gemm_128x128_32x3_nn_align4"]
    assert tf32 == (cc >= 8.0)


def test_amd_target_from_tensile(tmp_path: Path) -> None:
    name = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_ISA942_IU1_K1"
    assert re.search(r"_ISA942_", name)
    con = trace_report.open(_no_device(tmp_path, name)).con
    assert con.execute("SELECT arch, vendor, cc FROM device_arch").fetchone() == ("gfx942", "AMD", 9.4)
