"""The operator cost model (view ``op_costs``, store/sql/views_op_cost.sql) against PyTorch:
FLOP per operator call equal to torch.utils.flop_counter.FlopCounterMode's on meta tensors of
the shapes real traces recorded (record_shapes=True), and the convolution and GEMM formulas
against the output shapes torch computes."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from conftest import SHARED, TRACES, load_json

from trace_report.store.views import create_views

SOURCES = ("tracelens_mi300_resnet18_ddp_train", "tracelens_h100_timesformer", "tracelens_h100_bert_small",
           "tracelens_mi300_torch_compile_triton")
"""Traces with shapes: convolutions forward and backward (miopen), GEMMs, linear, matmul, and
scaled-dot-product attention (flash, and its aten::_flash_attention_forward)."""
PER_OPERATOR = 3
"""Distinct shapes kept per operator name: a few dozen cases in all."""


def _trace_cases() -> list[tuple[str, list, list]]:
    """(name, "Input Dims", "Concrete Inputs") of the first distinct calls per operator name of
    the model in :data:`SOURCES`, by a plain pass over the JSON."""
    if not (SHARED / "data" / "MANIFEST.tsv").is_file():
        return []
    seen: dict[str, list[tuple[str, list, list]]] = {}
    for folder in SOURCES:
        path = next(p for p in sorted((TRACES / folder).iterdir()) if p.name.endswith((".json", ".json.gz")))
        for e in load_json(path)["traceEvents"]:
            args = e.get("args", {})
            if e.get("cat") != "cpu_op" or e["name"] not in TORCH_CALLS or "Input Dims" not in args:
                continue
            case = (e["name"], args["Input Dims"], args.get("Concrete Inputs") or [])
            kept = seen.setdefault(e["name"], [])
            if case not in kept and len(kept) < PER_OPERATOR:
                kept.append(case)
    return [c for kept in seen.values() for c in kept]


def _ints(text: str) -> list[int]:
    return json.loads(text)


def _meta(shape: list[int]) -> Any:
    import torch

    return torch.empty(shape, device="meta", dtype=torch.bfloat16)


def _conv(x: list[int], w: list[int], conc: list[str], stride: int, pad: int, dil: int, groups: int,
          transposed: int | None = None, outp: int | None = None) -> None:
    """aten::convolution with the arguments read at these positions of "Concrete Inputs"
    (native_functions.yaml)."""
    import torch

    torch.ops.aten.convolution(_meta(x), _meta(w), None, _ints(conc[stride]), _ints(conc[pad]), _ints(conc[dil]),
                               conc[transposed] == "True" if transposed else False,
                               _ints(conc[outp]) if outp else [0] * (len(x) - 2), int(conc[groups]))


def _linear(d: list, c: list) -> None:
    import torch

    torch.nn.functional.linear(_meta(d[0]), _meta(d[1]), _meta(d[2]) if d[2] else None)


TORCH_CALLS: dict[str, Any] = {
    "aten::mm": lambda d, c: __import__("torch").ops.aten.mm(_meta(d[0]), _meta(d[1])),
    "aten::addmm": lambda d, c: __import__("torch").ops.aten.addmm(_meta(d[0]), _meta(d[1]), _meta(d[2])),
    "aten::bmm": lambda d, c: __import__("torch").ops.aten.bmm(_meta(d[0]), _meta(d[1])),
    "aten::baddbmm": lambda d, c: __import__("torch").ops.aten.baddbmm(_meta(d[0]), _meta(d[1]), _meta(d[2])),
    "aten::matmul": lambda d, c: __import__("torch").matmul(_meta(d[0]), _meta(d[1])),
    "aten::linear": _linear,
    "aten::conv2d": lambda d, c: _conv(d[0], d[1], c, 3, 4, 5, 6),
    "aten::convolution": lambda d, c: _conv(d[0], d[1], c, 3, 4, 5, 8, 6, 7),
    "aten::_convolution": lambda d, c: _conv(d[0], d[1], c, 3, 4, 5, 8, 6, 7),
    "aten::cudnn_convolution": lambda d, c: _conv(d[0], d[1], c, 3, 2, 4, 5),
    "aten::miopen_convolution": lambda d, c: _conv(d[0], d[1], c, 4, 3, 5, 6),
    "aten::convolution_backward": lambda d, c: __import__("torch").ops.aten.convolution_backward(
        _meta(d[0]), _meta(d[1]), _meta(d[2]), None, _ints(c[4]), _ints(c[5]), _ints(c[6]), c[7] == "True",
        _ints(c[8]), int(c[9]), [m.strip() == "True" for m in c[10].strip("[]").split(",")]),
    "aten::scaled_dot_product_attention": lambda d, c: __import__("torch").ops.aten.scaled_dot_product_attention(
        _meta(d[0]), _meta(d[1]), _meta(d[2]), _meta(d[3]) if d[3] else None, is_causal=c[5] == "True"),
    "aten::_scaled_dot_product_flash_attention": lambda d, c: __import__(
        "torch").ops.aten._scaled_dot_product_flash_attention(_meta(d[0]), _meta(d[1]), _meta(d[2]), 0.0,
                                                              c[4] == "True"),
    "aten::_flash_attention_forward": lambda d, c: __import__("torch").ops.aten._flash_attention_forward(
        _meta(d[0]), _meta(d[1]), _meta(d[2]), None, None, int(c[5]), int(c[6]), 0.0, c[8] == "True", False),
}
"""Each operator of the model the sources record, called as torch calls it from the recorded
shapes and "Concrete Inputs" (its schema's positions)."""

CASES = _trace_cases()


def _flop_counter(name: str, dims: list, conc: list) -> int:
    """FlopCounterMode's count of one call on meta tensors of the recorded shapes."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        TORCH_CALLS[name](dims, conc)
    return counter.get_total_flops()


@pytest.fixture(scope="module")
def model() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection with the cost model over an ``events`` table the test fills (:func:`costs`)."""
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE events (trace_id BIGINT, event_id BIGINT, name VARCHAR, cat VARCHAR, pid BIGINT, "
                "tid BIGINT, ts_us DOUBLE, dur_us DOUBLE, external_id BIGINT, args VARCHAR)")
    create_views(con, only=["op_costs"], record=False)
    yield con
    con.close()


def costs(con: duckdb.DuckDBPyConnection, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of ``op_costs`` for calls (operator name, args), in their order."""
    con.execute("DELETE FROM events")
    con.executemany("INSERT INTO events VALUES (1, ?, ?, 'cpu_op', 1, 1, ?, 1.0, NULL, ?)",
                    [(i, name, float(i), json.dumps(args)) for i, (name, args) in enumerate(calls)])
    cur = con.execute("SELECT name, dtype, flop, bytes, note FROM op_costs ORDER BY event_id")
    return [dict(zip(("name", "dtype", "flop", "bytes", "note"), row, strict=True)) for row in cur.fetchall()]


def cost(con: duckdb.DuckDBPyConnection, name: str, dims: list | None, conc: list[str] | None = None,
         types: list[str] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"Input type": types or ["float"]}
    if dims is not None:
        args["Input Dims"] = dims
    if conc is not None:
        args["Concrete Inputs"] = conc
    return costs(con, [(name, args)])[0]


def test_trace_cases_cover_every_family() -> None:
    if not CASES:
        pytest.skip(f"{SHARED} is absent: real traces unavailable")
    names = {n for n, _, _ in CASES}
    assert {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::convolution",
            "aten::convolution_backward", "aten::scaled_dot_product_attention",
            "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward"} <= names
    assert 20 <= len(CASES) <= 60


@pytest.mark.parametrize(("name", "dims", "conc"), CASES,
                         ids=[f"{n}-{json.dumps(d[:3])}" for n, d, _ in CASES])
def test_flop_equals_flop_counter(model: duckdb.DuckDBPyConnection, name: str, dims: list, conc: list) -> None:
    """Our FLOP of a call the traces recorded equals FlopCounterMode's for the same shapes
    (attention: the full matrix, causal or not, as torch counts it)."""
    pytest.importorskip("torch")
    got = cost(model, name, dims, conc)
    assert got["flop"] == _flop_counter(name, dims, conc), got


@pytest.mark.parametrize("case", [
    dict(x=[2, 3, 32, 32], w=[8, 3, 3, 3], stride=1, padding=1, dilation=1, groups=1),
    dict(x=[1, 4, 17, 19], w=[6, 2, 5, 3], stride=[2, 3], padding=[2, 0], dilation=[1, 2], groups=2),
    dict(x=[3, 8, 30], w=[16, 8, 4], stride=2, padding=0, dilation=3, groups=1),
    dict(x=[1, 2, 6, 7, 8], w=[4, 2, 3, 3, 3], stride=1, padding=1, dilation=1, groups=1),
    dict(x=[2, 32, 14, 14], w=[32, 1, 3, 3], stride=1, padding="same", dilation=1, groups=32),
    dict(x=[2, 3, 15, 15], w=[5, 3, 4, 4], stride=1, padding="valid", dilation=1, groups=1),
])
def test_conv_flop_matches_torch_output_shape(model: duckdb.DuckDBPyConnection, case: dict[str, Any]) -> None:
    """Forward convolutions (scalar, list, 'same' and 'valid' arguments; grouped) against the
    output torch computes: 2 * out.numel() * C/g * prod(k) FLOP, x + W + out bytes."""
    torch = pytest.importorskip("torch")
    fn = {3: torch.nn.functional.conv1d, 4: torch.nn.functional.conv2d, 5: torch.nn.functional.conv3d}[len(case["x"])]
    out = fn(torch.zeros(case["x"]), torch.zeros(case["w"]), stride=case["stride"], padding=case["padding"],
             dilation=case["dilation"], groups=case["groups"])
    macs = out.numel() * (case["x"][1] // case["groups"]) * math.prod(case["w"][2:])
    op = {3: "aten::conv1d", 4: "aten::conv2d", 5: "aten::conv3d"}[len(case["x"])]
    concrete = ["", "", "", str(case["stride"]), str(case["padding"]), str(case["dilation"]), str(case["groups"])]
    got = cost(model, op, [case["x"], case["w"], []], concrete)
    assert got["flop"] == 2 * macs
    assert got["bytes"] == 4 * (math.prod(case["x"]) + math.prod(case["w"]) + out.numel())


def test_transposed_and_backward_convolution(model: duckdb.DuckDBPyConnection) -> None:
    torch = pytest.importorskip("torch")
    x, w = [2, 8, 9, 9], [8, 4, 3, 3]  # conv_transpose weight: [C_in, C_out/groups, k, k]
    out = torch.nn.functional.conv_transpose2d(torch.zeros(x), torch.zeros(w), stride=2, padding=1, output_padding=1)
    concrete = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"]
    got = cost(model, "aten::convolution", [x, w, []], concrete)
    assert got["flop"] == 2 * math.prod(x) * 4 * 9  # every input element meets C_out*k*k weights
    assert got["bytes"] == 4 * (math.prod(x) + math.prod(w) + out.numel())
    gy, xi, wi = [4, 16, 8, 8], [4, 8, 16, 16], [16, 8, 3, 3]  # forward: stride 2, padding 1
    forward = 2 * math.prod(gy) * 8 * 9
    concrete = ["", "", "", "[0]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]
    assert cost(model, "aten::convolution_backward", [gy, xi, wi], concrete)["flop"] == 2 * forward
    concrete[-1] = "[False, True, False]"
    assert cost(model, "aten::convolution_backward", [gy, xi, wi], concrete)["flop"] == forward
    # 2021 traces: cudnn_convolution_backward(self, grad_output, weight, ...) without Concrete Inputs
    assert cost(model, "aten::cudnn_convolution_backward", [xi, gy, wi])["flop"] == 2 * forward


def test_grouped_convolution_backward_counts_its_groups(model: duckdb.DuckDBPyConnection) -> None:
    """The one documented deviation from FlopCounterMode: the grad weight of a grouped
    convolution is counted with C/g input channels (its multiply-adds), torch counts all C."""
    pytest.importorskip("torch")
    gy, x, w, groups = [2, 32, 8, 8], [2, 32, 8, 8], [32, 1, 3, 3], 32
    concrete = ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", str(groups), "[True, True, False]"]
    macs = math.prod(gy) * 1 * 9
    assert cost(model, "aten::convolution_backward", [gy, x, w], concrete)["flop"] == 2 * 2 * macs
    grad_input = _flop_counter("aten::convolution_backward", [gy, x, w], concrete[:10] + ["[True, False, False]"])
    grad_weight = _flop_counter("aten::convolution_backward", [gy, x, w], concrete[:10] + ["[False, True, False]"])
    assert (grad_input, grad_weight) == (2 * macs, 2 * macs * groups)


@pytest.mark.parametrize(("op", "dims", "a", "b"), [
    ("aten::mm", [[5, 7], [7, 3]], [5, 7], [7, 3]),
    ("aten::addmm", [[3], [5, 7], [7, 3]], [5, 7], [7, 3]),
    ("aten::bmm", [[4, 5, 7], [4, 7, 3]], [4, 5, 7], [4, 7, 3]),
    ("aten::baddbmm", [[4, 5, 3], [4, 5, 7], [4, 7, 3]], [4, 5, 7], [4, 7, 3]),
    ("aten::matmul", [[2, 1, 5, 7], [3, 7, 6]], [2, 1, 5, 7], [3, 7, 6]),
    ("aten::matmul", [[7], [7, 3]], [7], [7, 3]),
    ("aten::matmul", [[4, 5, 7], [7]], [4, 5, 7], [7]),
])
def test_gemm_flop_matches_torch_output_shape(model: duckdb.DuckDBPyConnection, op: str, dims: list[list[int]],
                                              a: list[int], b: list[int]) -> None:
    torch = pytest.importorskip("torch")
    out = torch.matmul(torch.zeros(a), torch.zeros(b))
    assert cost(model, op, dims)["flop"] == 2 * out.numel() * a[-1]


def test_linear_attention_and_bytes(model: duckdb.DuckDBPyConnection) -> None:
    got = cost(model, "aten::linear", [[4, 197, 768], [3072, 768], [3072]], types=["c10::BFloat16"])
    assert got["flop"] == 2 * 4 * 197 * 768 * 3072 and got["dtype"] == "c10::BFloat16"
    assert got["bytes"] == 2 * (4 * 197 * 768 + 3072 * 768 + 3072 + 4 * 197 * 3072)
    assert cost(model, "aten::mm", [[5, 7], [7, 3]])["bytes"] == 4 * (35 + 21 + 15)
    q, kv = [2, 16, 100, 64], [2, 4, 300, 64]  # grouped-query attention: 16 query heads, 4 key/value heads
    got = cost(model, "aten::_scaled_dot_product_efficient_attention", [q, kv, kv, [], [], [], []], types=["c10::Half"])
    assert got["flop"] == 2 * 2 * 16 * 100 * 300 * (64 + 64)
    assert got["bytes"] == 2 * (math.prod(q) + 2 * math.prod(kv) + math.prod(q))
    backward = cost(model, "aten::_scaled_dot_product_flash_attention_backward", [q, q, kv, kv, q, [2, 16, 100]])
    assert backward["flop"] == 2 * 2 * 16 * 100 * 300 * (3 * 64 + 2 * 64)
    bshd = cost(model, "aten::_flash_attention_backward", [[2, 100, 16, 64], [2, 100, 16, 64], [2, 300, 4, 64],
                                                           [2, 300, 4, 64], [2, 100, 16, 64], [2, 16, 100], [], []])
    assert bshd["flop"] == backward["flop"]


def test_notes_say_why_there_is_no_count(model: duckdb.DuckDBPyConnection) -> None:
    got = cost(model, "aten::mm", None)
    assert got["flop"] is None and "Input Dims" in got["note"] and got["dtype"] == "float"
    got = cost(model, "aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], []])
    assert got["flop"] is None and "Concrete Inputs" in got["note"]
    got = cost(model, "aten::linear", [[5, 7], []])
    assert got["flop"] is None and got["note"] == "unexpected input shapes"
    varlen = cost(model, "aten::_flash_attention_forward", [[700, 16, 64], [700, 16, 64], [700, 16, 64], [5], [5]])
    assert varlen["flop"] is None and varlen["note"] == "unexpected input shapes"
    # 2021 traces: "Input dims"
    assert costs(model, [("aten::mm", {"Input dims": [[5, 7], [7, 3]]})])[0]["flop"] == 2 * 5 * 7 * 3
