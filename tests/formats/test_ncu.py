"""Nsight Compute readers: units, the .ncu-rep reader on the real reports, and checks of our
numbers against values ncu itself computed (rules, derived metrics, per-opcode counters)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from conftest import SHARED

from trace_report.analyses.roofline.peaks import match_gpu
from trace_report.errors import InputError
from trace_report.formats.ncu import read_ncu
from trace_report.formats.ncu_types import normalize_unit, parse_value
from trace_report.ingest.ncu import load_ncu

A100 = SHARED / "data" / "ncu" / "cutlass_fork_ncu_a100_fullset" / "report.ncu-rep"
A40 = SHARED / "data" / "ncu" / "indexspaces_ncu_a40_frb" / "profile.ncu-rep"


def report(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    pytest.importorskip("ncu_report")
    return path


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    load_ncu(c, report(A100))
    load_ncu(c, report(A40))
    return c


def metric(con: duckdb.DuckDBPyConnection, report_id: int, launch_id: int, name: str,
           instance: str | None = None) -> float:
    rows = con.execute(
        "SELECT value FROM ncu_metrics WHERE report_id = ? AND launch_id = ? AND metric = ? "
        "AND instance IS NOT DISTINCT FROM ?", [report_id, launch_id, name, instance]).fetchall()
    assert rows, (name, instance)
    return rows[0][0]


@pytest.mark.parametrize(("unit", "factor", "base"), [
    ("Kbyte", 1e3, "byte"), ("Mbyte", 1e6, "byte"), ("Gbyte", 1e9, "byte"), ("KB", 1e3, "byte"),
    ("byte", 1.0, "byte"), ("nsecond", 1e-9, "second"), ("usecond", 1e-6, "second"),
    ("msecond", 1e-3, "second"), ("ns", 1e-9, "second"), ("us", 1e-6, "second"), ("second", 1.0, "second"),
    ("Gbyte/second", 1e9, "byte/second"), ("Tbyte/second", 1e12, "byte/second"), ("byte/s", 1.0, "byte/second"),
    ("Mbyte/s", 1e6, "byte/second"), ("cycle/nsecond", 1e9, "hz"), ("cycle/usecond", 1e6, "hz"),
    ("Ghz", 1e9, "hz"), ("Mhz", 1e6, "hz"), ("hz", 1.0, "hz"), ("%", 1.0, "%"), ("inst/cycle", 1.0, "inst/cycle"),
    ("Kinst", 1e3, "inst"), ("", 1.0, ""), ("register/thread", 1.0, "register/thread"),
])
def test_units_normalised_to_base(unit: str, factor: float, base: str) -> None:
    got_factor, got_base = normalize_unit(unit)
    assert got_base == base
    assert got_factor == pytest.approx(factor)


@pytest.mark.parametrize(("text", "expected"), [
    ("1,215,000,000.00", (1.215e9, None)), ("2,816", (2816.0, None)), ("11.17", (11.17, None)),
    ("-1.5e3", (-1500.0, None)), ("0", (0.0, None)), ("n/a", (None, None)), ("", (None, None)),
    ("NVIDIA A40", (None, "NVIDIA A40")), ("(128, 1, 1)", (None, "(128, 1, 1)")),
])
def test_values_parsed(text: str, expected: tuple[float | None, str | None]) -> None:
    assert parse_value(text) == expected


def test_rep_launches_and_devices(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute(
        "SELECT report_id, launch_id, function, device_name, compute_capability, block_size, grid_size, "
        "stream, format FROM ncu_kernels ORDER BY report_id, launch_id").fetchall()
    assert len(rows) == 8
    a100 = [r for r in rows if r[0] == 0]
    a40 = [r for r in rows if r[0] == 1]
    assert [r[2] for r in a100] == ["Kernel"] * 3
    assert {r[3] for r in a100} == {"NVIDIA A100 80GB PCIe"} and {r[4] for r in a100} == {"8.0"}
    assert [r[6] for r in a100] == ["(24, 4, 1)", "(24, 4, 1)", "(96, 1, 1)"]
    assert [r[2] for r in a40] == ["julia__5_11155", "julia__5_11236", "julia__5_11236", "julia__5_11155",
                                   "julia_frb_5885"]
    assert {r[3] for r in a40} == {"NVIDIA A40"} and {r[4] for r in a40} == {"8.6"}
    assert a40[4][5] == "(32, 24, 1)" and a40[4][7] == 14
    assert {r[8] for r in rows} == {"ncu-rep"}


def test_durations_in_seconds(con: duckdb.DuckDBPyConnection) -> None:
    # the report stores gpu__time_duration.sum in ns: 11168 ns, 4283936 ns
    assert metric(con, 0, 0, "gpu__time_duration.sum") == pytest.approx(11168e-9)
    assert metric(con, 1, 4, "gpu__time_duration.sum") == pytest.approx(4283936e-9)
    unit = con.execute("SELECT DISTINCT unit FROM ncu_metrics WHERE metric = 'gpu__time_duration.sum'").fetchall()
    assert unit == [("second",)]


def test_dram_bytes_counter_equals_rate_times_duration(con: duckdb.DuckDBPyConnection) -> None:
    launches = con.execute("SELECT report_id, launch_id FROM ncu_kernels").fetchall()
    for rid, lid in launches:
        counted = metric(con, rid, lid, "dram__bytes_read.sum") + metric(con, rid, lid, "dram__bytes_write.sum")
        rate = metric(con, rid, lid, "dram__bytes.sum.per_second") * metric(con, rid, lid, "gpu__time_duration.sum")
        assert counted == pytest.approx(rate, rel=1e-6)


def test_fp32_rates_agree_with_source_counter_opcodes(con: duckdb.DuckDBPyConnection) -> None:
    """Roofline-section rates x cycles vs the Source Counters per-opcode thread counts: two
    separate ncu collections of the same instructions."""
    cases = [(0, 2, "ffma", "FFMA", 1179648), (1, 4, "ffma", "FFMA", 2338560), (1, 4, "fadd", "FADD", 669312),
             (1, 4, "fmul", "FMUL", 834624)]
    for rid, lid, op, opcode, expected in cases:
        rate = metric(con, rid, lid, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")
        cycles = metric(con, rid, lid, "sm__cycles_elapsed.avg.per_second") * metric(con, rid, lid,
                                                                                  "gpu__time_duration.sum")
        assert rate * cycles == pytest.approx(expected, rel=1e-9)
        assert metric(con, rid, lid, "sass__thread_inst_executed_true_per_opcode", opcode) == expected


def test_ncu_rule_counts_match_opcode_counts(con: duckdb.DuckDBPyConnection) -> None:
    """ncu's FPInstructions rule (evaluated when the report was made) states the warp-level FP32
    instruction counts; our stored per-opcode counts must say the same."""
    import ncu_report

    ctx = ncu_report.load_report(str(report(A40)))
    action = ctx.range_by_idx(0).action_by_idx(4)
    message = next(r["rule_message"]["message"] for r in action.rule_results_as_dicts()
                   if r["rule_identifier"] == "FPInstructions")
    fused, nonfused = map(int, re.search(r"executes (\d+) fused and (\d+) non-fused FP32", message).groups())
    ops = "sass__inst_executed_per_opcode"
    assert metric(con, 1, 4, ops, "FFMA") == fused == 100800
    assert metric(con, 1, 4, ops, "FADD") + metric(con, 1, 4, ops, "FMUL") == nonfused == 80640


def test_ncu_derived_ffma_x2_is_twice_the_rate(con: duckdb.DuckDBPyConnection) -> None:
    x2 = metric(con, 1, 4, "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2")
    rate = metric(con, 1, 4, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed")
    assert x2 == pytest.approx(2 * rate, rel=1e-9)


@pytest.mark.parametrize(("rid", "key"), [(0, "a100-pcie-80gb"), (1, "a40")])
def test_peak_table_agrees_with_ncu_theoretical_peaks(con: duckdb.DuckDBPyConnection, rid: int, key: str) -> None:
    """ncu's roofline section stores the theoretical peaks per cycle; times the maximum clocks
    they must give the datasheet figures of our table."""
    peaks = match_gpu(con.execute("SELECT any_value(device_name) FROM ncu_kernels WHERE report_id = ?",
                                  [rid]).fetchall()[0][0])
    assert peaks is not None and peaks.key == key
    sm_hz = metric(con, rid, 0, "device__attribute_max_gpu_frequency_khz") * 1e3
    mem_hz = metric(con, rid, 0, "device__attribute_max_mem_frequency_khz") * 1e3
    fp32 = metric(con, rid, 0, "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2") * sm_hz
    fp64 = metric(con, rid, 0, "derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2") * sm_hz
    bw = metric(con, rid, 0, "dram__bytes.sum.peak_sustained") * mem_hz
    assert fp32 == pytest.approx(peaks.fp32_flop_per_s, rel=0.01)
    assert fp64 == pytest.approx(peaks.fp64_flop_per_s, rel=0.01)
    assert bw == pytest.approx(peaks.dram_bytes_per_s, rel=0.01)


def test_tensor_instructions_with_shapes(con: duckdb.DuckDBPyConnection) -> None:
    rows = dict(con.execute(
        "SELECT instance, value FROM ncu_metrics WHERE report_id = 1 AND launch_id = 4 "
        "AND metric = 'sass__inst_executed_per_opcode_with_modifier_all' AND instance LIKE 'HMMA%'").fetchall())
    assert rows == {"HMMA.1688.F16": 24966144, "HMMA.16816.F16": 24966144}
    # the fused two-GEMM kernel runs both GEMMs of the two unfused launches
    imma = "sass__inst_executed_per_opcode_with_modifier_all"
    fused = metric(con, 0, 2, imma, "IMMA.16832.S8.S8.SAT")
    assert fused == metric(con, 0, 0, imma, "IMMA.16832.S8.S8.SAT") + metric(con, 0, 1, imma, "IMMA.16832.S8.S8.SAT")


def test_loading_twice_adds_nothing(con: duckdb.DuckDBPyConnection) -> None:
    before = con.execute("SELECT count(*) FROM ncu_metrics").fetchall()
    assert load_ncu(con, A100) == 3
    assert con.execute("SELECT count(*) FROM ncu_metrics").fetchall() == before


def test_bad_reports_raise_input_error(tmp_path: Path) -> None:
    report(A100)
    bad = tmp_path / "text.ncu-rep"
    bad.write_text("hello\n")
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(A100.read_bytes()[:5000])
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    binary = tmp_path / "noise.bin"
    binary.write_bytes(bytes(range(256)) * 10)
    for path in (bad, cut, empty, binary, tmp_path / "missing.ncu-rep"):
        with pytest.raises(InputError, match=re.escape(path.name)):
            read_ncu(path)
    with pytest.raises(InputError):
        load_ncu(duckdb.connect(), bad)
