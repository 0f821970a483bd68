"""Kernel names and tables: the shortener on real kernel names, tables that fit COLUMNS with at
most two lines a row, --full-names, sql's column order, compare --match short."""

from __future__ import annotations

import json
import re

import pytest
from conftest import KERNEL_CATS, TRACES, complete_events, folder_events, invoke

from trace_report.formats.names import demangle, name_forms, parse_kernel_name, short_kernel_name
from trace_report.present.fit import short_names

A100 = TRACES / "hta_a100_ddp_nccl"
BOX = re.compile(r"^[│┃]")  # a table body or header line


def _rows(table: str) -> list[list[str]]:
    """Body rows of a rich table: each row's lines (a new row starts where the first cell is not empty)."""
    rows: list[list[str]] = []
    body = False
    for line in table.splitlines():
        if line.startswith("┡"):
            body = True
            continue
        if not body or not line.startswith("│"):
            continue
        cells = line.split("│")[1:-1]
        if cells[0].strip() or not rows:
            rows.append([line])
        else:
            rows[-1].append(line)
    return rows


@pytest.mark.parametrize(("full", "short"), [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<…>, at::detail::Array<…> >"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_256x64_"
     "16x4_nn_align4::Params)", "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"),
    ("volta_sgemm_128x64_nt", "volta_sgemm_128x64_nt"),
])
def test_short_kernel_name_on_real_names(full, short):
    assert short_kernel_name(full) == short


def test_one_parse_gives_the_parts_every_form_renders() -> None:
    """parse_kernel_name splits a name into its function (scopes), template arguments and
    parameters; the short name and the display forms are renderings of it."""
    full = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
    parsed = parse_kernel_name(full)
    assert parsed.params == "int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>"
    assert parsed.text == full[:full.index(" >(") + 2] and parsed.balanced
    assert [c.head for c in parsed.scopes] == ["at", "native", "vectorized_elementwise_kernel"]
    assert [a.text for a in parsed.scopes[-1].args] == ["4", "at::native::CUDAFunctor_add<float>",
                                                        "at::detail::Array<char*, 3>"]
    assert short_kernel_name(full).startswith("at::native::vectorized_elementwise_kernel<4, ")
    assert name_forms(full)[-1] == "vectorized_elementwise_kernel<CUDAFunctor_add>"
    cut = parse_kernel_name("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<")
    assert not cut.balanced and cut.scopes is None and cut.params is None  # a name cut short (nsys CSV)


def test_every_a100_kernel_name_shortens_and_stays_apart(shared):
    """Every kernel name of the A100 trace: the short name is no longer than the name, has no
    argument list and no nested template; distinct names stay distinct in tables."""
    names = sorted({demangle(e["name"]) for e in folder_events("hta_a100_ddp_nccl") if e.get("cat") in KERNEL_CATS})
    shorts = [short_kernel_name(n) for n in names]
    for n, s in zip(names, shorts, strict=True):
        assert 0 < len(s) <= len(n)
        assert not s.startswith("void ") and not re.search(r"<[^<>]*<[^…]", s), s
    assert max(len(s) for s in shorts) < 200 < max(len(n) for n in names)
    labels = short_names(names)
    assert len(set(labels)) == len(names)


def test_match_key_pairs_pytorch_versions():
    a = ("void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>("
         "at::TensorIterator&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, "
         "at::native::threshold_kernel_impl<float>(at::TensorIterator&, float, float)::{lambda(float, float)#1}, "
         "at::detail::Array<char*, 3>)")
    b = a.replace("TensorIterator&", "TensorIteratorBase&")
    assert short_kernel_name(a, keep=1 << 20) == short_kernel_name(b, keep=1 << 20)
    assert short_kernel_name(a, keep=1 << 20) != short_kernel_name(a.replace("threshold", "clamp"), keep=1 << 20)


@pytest.mark.parametrize("argv", [["top-kernels", A100, "-n", "25"], ["flags", A100, "-n", "25"],
                                  ["compare", TRACES / "hta_trace_diff" / "control.json.gz",
                                   TRACES / "hta_trace_diff" / "test.json.gz", "-n", "25"]])
def test_no_table_row_taller_than_two_lines_at_120_columns(shared, monkeypatch, argv):
    monkeypatch.setenv("COLUMNS", "120")
    result = invoke(argv)
    assert result.exit_code == 0, result.output
    first = result.stdout.split("\n\n")[0]
    rows = _rows(first)
    assert len(rows) == 25
    assert max(len(r) for r in rows) <= 2
    widths = {len(line) for line in first.splitlines() if BOX.match(line)}
    if argv[0] != "compare":  # compare's 11 number columns need more than 120; its rows stay one or two lines
        assert widths == {120}


def test_columns_is_honoured_and_full_names_switches_shortening_off(shared, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    short = invoke(["top-kernels", A100, "-n", "5"])
    assert {len(line) for line in short.stdout.splitlines() if BOX.match(line)} == {160}
    assert "ncclKernel_AllReduce_RING_LL_Sum_float " in short.stdout and "ncclDevComm*" not in short.stdout
    full = invoke(["top-kernels", A100, "-n", "5", "--full-names"])
    assert "ncclDevComm*" in full.stdout.replace("\n", "")
    as_json = json.loads(invoke(["top-kernels", A100, "-n", "1", "-f", "json"]).stdout)
    assert as_json[0]["name"] == "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def test_sql_keeps_the_select_column_order(shared, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    result = invoke(["sql", A100, "select name, count(*) AS n, sum(dur_us) AS total_us from kernels group by 1 "
                                  "order by 3 desc limit 3"])
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["name", "n", "total_us"]


def test_compare_match_short_pairs_kernels_across_pytorch_versions(shared):
    """kineto_rn50_nw4_2021feb (TensorIterator&) against 2021jun (TensorIteratorBase&): the
    threshold (ReLU) kernel is 'vanished' + 'new' by exact name, one 'less'/'more' row by short name."""
    a, b = TRACES / "kineto_rn50_nw4_2021feb", TRACES / "kineto_rn50_nw4_2021jun"
    exact = json.loads(invoke(["compare", a, b, "-f", "json"]).stdout)
    short = json.loads(invoke(["compare", a, b, "--match", "short", "-f", "json"]).stdout)
    relu = [r for r in exact if "threshold_kernel_impl" in r["name"]]
    assert sorted(r["status"] for r in relu) == ["new", "vanished"]
    (paired,) = [r for r in short if "threshold_kernel_impl" in r["name"]]
    assert paired["status"] in ("more", "less", "same")
    events_a = [e for e in complete_events(next(a.glob("*.json.gz"))) if e.get("cat") in KERNEL_CATS]
    assert paired["a_count"] == sum("threshold_kernel_impl" in demangle(e["name"]) for e in events_a)
    assert len(short) < len(exact)
    assert sum(r["a_total_us"] for r in short) == pytest.approx(sum(r["a_total_us"] for r in exact))


def test_compare_regions_is_per_step_by_default_and_says_so(shared):
    a, b = TRACES / "hta_trace_diff" / "control.json.gz", TRACES / "hta_trace_diff" / "test.json.gz"
    per_step = invoke(["compare", a, b, "--by", "region", "-f", "json"])
    totals = invoke(["compare", a, b, "--by", "region", "--no-per-step", "-f", "json"])
    assert "per step (the default for regions" in per_step.stderr and "A has 6 step(s), B has 6" in per_step.stderr
    assert "totals over all steps" in totals.stderr
    ps = {r["region"]: r for r in json.loads(per_step.stdout)}
    tot = {r["region"]: r for r in json.loads(totals.stdout)}
    assert ps["forward"]["a_wall_us"] == pytest.approx(tot["forward"]["a_wall_us"] / 6)
