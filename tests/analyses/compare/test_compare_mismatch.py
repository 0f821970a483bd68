"""``compare`` warns when A and B are unlike runs: another GPU vendor or model, or little of B's
kernel time under kernel names A has too. Checked on shared traces whose devices and kernels the
manifest and a plain pass over the JSON give."""

from __future__ import annotations

import pytest
from conftest import TRACES, invoke, shared_or_skip
from gpu_steps_plain import load

H100_BERT = "tracelens_h100_bert_small/gaunernst_bert-small-uncased__1016001.json.gz"
MI300_COMPILE = "tracelens_mi300_torch_compile_triton/trace.json.gz"
A100, V100 = "hta_trace_diff/control.json.gz", "hta_trace_diff/test.json.gz"


def _kernel_us(name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in load(TRACES / name)["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
            out[e["name"]] = out.get(e["name"], 0.0) + float(e["dur"])
    return out


def _warnings(res) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.startswith("warning: ") and "rank" not in line
            and "redacted" not in line]


def test_h100_inference_against_mi300_compile_warns_twice():
    shared_or_skip()
    a, b = _kernel_us(H100_BERT), _kernel_us(MI300_COMPILE)
    shared = 100 * sum(us for n, us in b.items() if n in a) / sum(b.values())
    res = invoke(["compare", TRACES / H100_BERT, TRACES / MI300_COMPILE, "-n", "1"])
    assert res.exit_code == 0, res.output
    got = _warnings(res)
    assert len(got) == 2, got
    assert "A runs on NVIDIA (NVIDIA H100 80GB HBM3), B on AMD (AMD Instinct MI300X)" in got[0]
    assert f"only {shared:.1f}% of B's kernel time" in got[1]
    assert all(line in res.stdout for line in got)  # the headline repeats them


def test_two_models_of_one_vendor_warn_once():
    shared_or_skip()
    res = invoke(["compare", TRACES / A100, TRACES / V100, "-n", "1", "-f", "markdown"])
    got = _warnings(res)
    assert any("another GPU model" in w and "A100" in w and "V100" in w for w in got), got
    assert "> **warning:** A runs on NVIDIA A100-PG509-200, B on Tesla V100-SXM2-16GB" in res.stdout


@pytest.mark.parametrize("name", [H100_BERT, A100])
def test_a_trace_against_itself_does_not_warn(name):
    shared_or_skip()
    res = invoke(["compare", TRACES / name, TRACES / name, "-n", "1"])
    assert res.exit_code == 0 and not _warnings(res), res.output
