"""ncu --csv readers: fixtures in the documented layouts (docs/roofline.md) are built here from
values read out of the real reports, auto-scaled and formatted as ncu prints them; both readers
must then give the same rows and the same roofline."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import SHARED, invoke

from trace_report.errors import InputError
from trace_report.formats.ncu import read_ncu
from trace_report.formats.ncu_csv import base_function
from trace_report.formats.ncu_types import INSTANCED, instance_counts
from trace_report.ingest.ncu import load_ncu

A100 = SHARED / "data" / "ncu" / "cutlass_fork_ncu_a100_fullset" / "report.ncu-rep"
A40 = SHARED / "data" / "ncu" / "indexspaces_ncu_a40_frb" / "profile.ncu-rep"
DETAILS_NEW = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
               "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]
DETAILS_OLD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
               "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
RAW_IDS = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
           "Grid Size", "Device", "CC"]
SCALES = {  # rep unit -> (factor to base, [(display unit, factor)] as ncu auto-scales)
    "ns": (1e-9, [("nsecond", 1e-9), ("usecond", 1e-6), ("msecond", 1e-3), ("second", 1.0)]),
    "byte": (1.0, [("byte", 1.0), ("Kbyte", 1e3), ("Mbyte", 1e6), ("Gbyte", 1e9)]),
    "byte/s": (1.0, [("byte/second", 1.0), ("Kbyte/second", 1e3), ("Mbyte/second", 1e6), ("Gbyte/second", 1e9),
                     ("Tbyte/second", 1e12)]),
    "hz": (1.0, [("hz", 1.0), ("Khz", 1e3), ("Mhz", 1e6), ("Ghz", 1e9)]),
}
SKIP = ("group:", "breakdown:", "pmsampling:")


def actions(path: Path) -> list[Any]:
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    ncu_report = pytest.importorskip("ncu_report")
    ctx = ncu_report.load_report(str(path))
    rng = ctx.range_by_idx(0)
    return [rng.action_by_idx(i) for i in range(rng.num_actions())]


def fmt_number(value: float) -> str:
    return format(value, ",.12g")  # thousands separators, as ncu prints "1,215,000,000"


def display(value: Any, unit: str, pick: tuple[str, float] | None = None) -> tuple[str, str, tuple[str, float] | None]:
    """(text, unit, scale) of a report value as ncu's CSV would show it, auto-scaled."""
    if isinstance(value, str):
        return value, unit, None
    if unit not in SCALES:
        return fmt_number(value), unit, None
    to_base, steps = SCALES[unit]
    base = value * to_base
    if pick is None:
        pick = steps[0]
        for step in steps:
            if abs(base) >= step[1]:
                pick = step
    return fmt_number(base / pick[1]), pick[0], pick


def ids(a: Any, i: int) -> dict[str, str]:
    import ncu_report

    def v(name: str) -> str:
        return str(int(a.metric_by_name(name).value()))

    dims = [(v(f"launch__block_dim_{x}"), v(f"launch__grid_dim_{x}")) for x in "xyz"]
    major = v("device__attribute_compute_capability_major")
    minor = v("device__attribute_compute_capability_minor")
    return {"ID": str(i), "Process ID": "4242", "Process Name": "app", "Host Name": "127.0.0.1",
            "Kernel Name": a.name(ncu_report.IAction.NameBase_DEMANGLED), "Kernel Time": "2024-Jan-01 00:00:00",
            "Context": v("launch__context_id"), "Stream": v("launch__stream_id"),
            "Block Size": "(" + ", ".join(d[0] for d in dims) + ")",
            "Grid Size": "(" + ", ".join(d[1] for d in dims) + ")",
            "Device": v("launch__device_id"), "CC": f"{major}.{minor}"}


def scalar_metrics(a: Any) -> dict[str, Any]:
    out = {}
    for name in a.metric_names():
        m = a.metric_by_name(name)
        if not name.startswith(SKIP) and not m.num_instances() and m.has_value():
            out[name] = (m.value(), m.unit())
    return out


def write_csv(path: Path, header: list[str], rows: list[list[str]], preamble: str = "") -> Path:
    buf = io.StringIO()
    buf.write(preamble)
    writer = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.write_text(buf.getvalue())
    return path


def instanced_metrics(a: Any) -> dict[str, Any]:
    """The per-opcode metrics as `--print-metric-instances details` prints them:
    "<sum> (<opcode>: <count>; ...)", thousands separators included."""
    out = {}
    for name in INSTANCED:
        m = a.metric_by_name(name)
        if m is None or not m.num_instances():
            continue
        ids = m.correlation_ids()
        pairs = [(ids.as_string(k), m.as_double(k)) for k in range(m.num_instances())]
        total = sum(v for _, v in pairs)
        out[name] = f"{total:,.0f} (" + "; ".join(f"{n}: {v:,.0f}" for n, v in pairs) + ")"
    return out


def raw_fixture(path: Path, rep: Path, *, instances: bool = False) -> Path:
    acts = actions(rep)
    per = [scalar_metrics(a) for a in acts]
    if instances:
        for values, a in zip(per, acts, strict=True):
            values.update({k: (text, "") for k, text in instanced_metrics(a).items()})
    names = sorted(set().union(*per))
    picks: dict[str, tuple[str, tuple[str, float] | None]] = {}
    rows = []
    for i, (a, values) in enumerate(zip(acts, per, strict=True)):
        row = [ids(a, i)[c] for c in RAW_IDS]
        for name in names:
            if name not in values:
                row.append("n/a")
                continue
            value, unit = values[name]
            if isinstance(value, str):  # an instanced cell, printed as is
                row.append(value)
                continue
            text, shown, pick = display(value, unit, picks.get(name, (None, None))[1])
            picks.setdefault(name, (shown, pick))
            row.append(text)
        rows.append(row)
    units = [""] * len(RAW_IDS) + [picks.get(n, ("", None))[0] for n in names]
    preamble = "==PROF== Connected to process 4242 (/usr/bin/app)\nprogram output line\n"
    return write_csv(path, RAW_IDS + names, [units, *rows], preamble)


def details_fixture(path: Path, rep: Path) -> Path:
    rows = []
    for i, a in enumerate(actions(rep)):
        head = ids(a, i)
        for section in a.sections():
            for m in (*section.header_metrics(), *section.body_metrics()):
                if m.name().startswith(SKIP) or m.num_instances() or not m.has_value():
                    continue
                text, unit, _ = display(m.value(), m.unit())
                label = m.label() or m.name()  # no label: print the metric name (--print-metric-name name)
                rows.append([head[c] for c in RAW_IDS] + [section.name(), label, unit, text, "", "", "", "", ""])
        rule = ["SOLBottleneck", "OPT", "Memory is more heavily utilized than Compute", "global", "42.5"]
        rows.append([head[c] for c in RAW_IDS] + ["GPU Speed Of Light Throughput", "", "", "", *rule])
    return write_csv(path, DETAILS_NEW, rows, "==PROF== Disconnected from process 4242\n")


def loaded(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    load_ncu(con, path)
    return con


KERNEL_COLS = "launch_id, kernel, function, context, stream, device, device_name, compute_capability, " \
              "block_size, grid_size"


@pytest.mark.parametrize("rep", [A100, A40], ids=["a100", "a40"])
def test_raw_page_gives_the_same_rows_as_the_report(tmp_path: Path, rep: Path) -> None:
    csv_con = loaded(raw_fixture(tmp_path / "raw.csv", rep))
    rep_con = loaded(rep)
    q = f"SELECT {KERNEL_COLS} FROM ncu_kernels ORDER BY launch_id"
    assert csv_con.execute(q).fetchall() == rep_con.execute(q).fetchall()
    assert csv_con.execute("SELECT DISTINCT format, process_id, host FROM ncu_kernels").fetchall() == [
        ("csv-raw", 4242, "127.0.0.1")]
    rep_rows = {(r[0], r[1]): r[2:] for r in rep_con.execute(
        "SELECT launch_id, metric, unit, value, text FROM ncu_metrics WHERE instance IS NULL").fetchall()}
    csv_rows = csv_con.execute("SELECT launch_id, metric, unit, value, text FROM ncu_metrics").fetchall()
    assert len(csv_rows) > 2000
    for lid, name, unit, value, text in csv_rows:
        r_unit, r_value, r_text = rep_rows[(lid, name)]
        assert (unit, text) == (r_unit, r_text), name
        assert value == (None if r_value is None else pytest.approx(r_value, rel=1e-9, abs=1e-300)), name
    n_rep = sum(1 for (lid, _), v in rep_rows.items() if v[1] is not None or v[2] is not None)
    assert len(csv_rows) == n_rep


def roofline_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    con.execute("SELECT 1").fetchall()
    return con.execute("SELECT launch_id, flop_fp64, flop_fp32, bytes, time_s FROM roofline "
                       "ORDER BY launch_id").fetchall()


@pytest.mark.parametrize("page", ["raw", "details"])
@pytest.mark.parametrize("rep", [A100, A40], ids=["a100", "a40"])
def test_csv_roofline_equals_report_roofline(tmp_path: Path, rep: Path, page: str) -> None:
    build = raw_fixture if page == "raw" else details_fixture
    csv_con = loaded(build(tmp_path / f"{page}.csv", rep))
    rep_con = loaded(rep)
    got, want = roofline_rows(csv_con), roofline_rows(rep_con)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-6)
    assert any(w[2] for w in want)  # some launch has FP32 work


def tensor_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute("SELECT launch_id, tensor_flop, int_ops, flop, tensor_uncounted FROM roofline "
                       "ORDER BY launch_id").fetchall()


@pytest.mark.parametrize("rep", [A100, A40], ids=["a100", "a40"])
def test_csv_with_metric_instances_counts_tensor_work_as_the_report_does(tmp_path: Path, rep: Path) -> None:
    with_instances = loaded(raw_fixture(tmp_path / "inst.csv", rep, instances=True))  # skips without rep
    rep_con = loaded(rep)
    want = tensor_rows(rep_con)
    assert any(w[1] or w[2] for w in want)  # A40: HMMA.16816.F16 FLOP; A100: IMMA int8 OP
    for got, w in zip(tensor_rows(with_instances), want, strict=True):
        assert [g if g is None or isinstance(g, bool) else pytest.approx(g, rel=1e-9) for g in got] == list(w)
    q = ("SELECT launch_id, metric, instance, value FROM ncu_metrics WHERE instance IS NOT NULL "
         "ORDER BY ALL")
    assert with_instances.execute(q).fetchall() == rep_con.execute(q).fetchall()
    sums_only = loaded(raw_fixture(tmp_path / "sums.csv", rep))  # an export without instances
    for got, w in zip(tensor_rows(sums_only), want, strict=True):
        if w[1]:  # floating-point tensor work: unknown without per-opcode counts, never 0
            assert got[1] is None and got[3] is None and got[4] is True


def test_details_page_maps_labels_to_metric_names(tmp_path: Path) -> None:
    con = loaded(details_fixture(tmp_path / "details.csv", A100))
    rows = con.execute("SELECT section, label, unit, value FROM ncu_metrics WHERE launch_id = 0 "
                       "AND metric = 'gpu__time_duration.sum'").fetchall()
    assert rows == [("GPU Speed Of Light Throughput", "Duration", "second", pytest.approx(11168e-9))]
    labels = dict(con.execute("SELECT metric, label FROM ncu_metrics WHERE launch_id = 2").fetchall())
    assert labels["dram__bytes.sum.per_second"] in ("Memory Throughput", "DRAM Bandwidth")
    assert labels["sm__cycles_elapsed.avg.per_second"] == "SM Frequency"
    assert labels["derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"] == \
        "Predicated-On FFMA Operations Per Cycle"
    assert con.execute("SELECT count(*) FROM ncu_metrics WHERE metric = '' OR metric IS NULL").fetchall() == [(0,)]


def test_old_details_layout_with_kernel_time_and_metric_names(tmp_path: Path) -> None:
    """ncu 2019-2021 (nv-nsight-cu-cli): "Kernel Time", no block/grid/device/CC columns, and
    --metrics gives metric names in a "Command line profiler metrics" section."""
    a = actions(A100)[2]
    head = ids(a, 0)
    ffma = a.metric_by_name("sass__thread_inst_executed_true_per_opcode")
    n_ffma = next(ffma.as_uint64(k) for k in range(ffma.num_instances())
                  if ffma.correlation_ids().as_string(k) == "FFMA")
    values = [("gpu__time_duration.sum", "usecond", a.metric_by_name("gpu__time_duration.sum").value() / 1e3),
              ("dram__bytes_read.sum", "Mbyte", a.metric_by_name("dram__bytes_read.sum").value() / 1e6),
              ("dram__bytes_write.sum", "byte", a.metric_by_name("dram__bytes_write.sum").value()),
              ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", n_ffma),
              ("sm__cycles_elapsed.avg.per_second", "cycle/nsecond",
               a.metric_by_name("sm__cycles_elapsed.avg.per_second").value() / 1e9),
              ("l1tex__t_sector_hit_rate.pct", "%", "n/a")]
    rows = [[head[c] for c in DETAILS_OLD[:8]] + ["Command line profiler metrics", n, u,
                                                   v if isinstance(v, str) else fmt_number(v)] for n, u, v in values]
    con = loaded(write_csv(tmp_path / "old.csv", DETAILS_OLD, rows))
    kernel = con.execute("SELECT launch_id, function, block_size, device, compute_capability "
                         "FROM ncu_kernels").fetchall()
    assert kernel == [(0, "Kernel", None, None, None)]
    got = con.execute("SELECT flop_fp32, bytes, time_s FROM roofline").fetchall()[0]
    assert got == pytest.approx((2 * 1179648, 1522944.0, 25984e-9), rel=1e-9)
    assert con.execute("SELECT count(*) FROM ncu_metrics WHERE metric = 'l1tex__t_sector_hit_rate.pct'"
                       ).fetchall() == [(0,)]  # n/a is not a value


@pytest.mark.parametrize(("name", "base"), [
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>>(int, T2)",
     "vectorized_elementwise_kernel"),
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("julia_frb_5885(CuDeviceArray<Int32, (int)1, (int)1>)", "julia_frb_5885"),
    ("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<int>>(T1::Params)", "Kernel"),
])
def test_base_function(name: str, base: str) -> None:
    assert base_function(name) == base


def test_bad_csv_raises_input_error(tmp_path: Path) -> None:
    cases = {
        "notes.csv": "a,b,c\n1,2,3\n",
        "prof_only.csv": "==PROF== Connected to process 1\n==PROF== Disconnected\n",
        "no_kernel.csv": '"ID","Foo"\n"0","1"\n',
        "raw_bad_id.csv": '"ID","Kernel Name","gpu__time_duration.sum"\n"","","nsecond"\n"x","k","1"\n',
        "empty.csv": "",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InputError, match=name):
            read_ncu(path)
    header_only = tmp_path / "header_only.csv"
    header_only.write_text(",".join(f'"{c}"' for c in DETAILS_NEW) + "\n")
    with pytest.raises(InputError, match="no profiled kernel launches"):
        load_ncu(duckdb.connect(), header_only)


@pytest.mark.parametrize(("cell", "expected"), [
    ("4,718,604 (HMMA.1688.F32.TF32: 4,718,592; IMAD: 12)", [("HMMA.1688.F32.TF32", 4718592.0), ("IMAD", 12.0)]),
    ("5 (HGMMA.64x128x8.F32.TF32: 5)", [("HGMMA.64x128x8.F32.TF32", 5.0)]),
    ("3 (HMMA.16816.F32: 1, IMAD: 2)", None),   # another separator: never read as one opcode
    ("9 (HMMA.16816.F32: 1; IMAD: 2)", None),   # does not add up to its aggregate
    ("3 (HMMA.16816.F32: n/a; IMAD: 2)", None),  # not a count
    ("(64, 1, 1)", None), ("1,234", None),
])
def test_instance_counts_are_read_only_when_they_add_up(cell, expected):
    assert instance_counts(cell) == expected


# ---------------------------------------------------------------- units row, duplicate IDs, BOM

RAW_UNITS = [""] * len(RAW_IDS) + ["usecond", "Kbyte"]


def raw_launch(i: int, kernel: str = "k") -> list[str]:
    return [str(i), "42", "app", "host", kernel, "1", "7", "(128, 1, 1)", "(64, 1, 1)", "0", "8.0",
            f"{11.5 + i}", "1,024"]


def small_raw(path: Path, rows: list[list[str]]) -> Path:
    return write_csv(path, RAW_IDS + ["gpu__time_duration.sum", "dram__bytes.sum"], rows)


def details_rows(i: int, kernel: str = "k") -> list[list[str]]:
    head = raw_launch(i, kernel)[:len(RAW_IDS)]
    return [head + [_SOL_SECTION, "Duration", "usecond", f"{11.5 + i}", "", "", "", "", ""],
            head + [_SOL_SECTION, "DRAM Frequency", "cycle/nsecond", "1.21", "", "", "", "", ""]]


_SOL_SECTION = "GPU Speed Of Light Throughput"


def test_raw_page_without_its_units_row_is_refused(tmp_path: Path) -> None:
    """Values read without units were taken as base units: 11.5 usecond as 11.5 s."""
    with_units = read_ncu(small_raw(tmp_path / "ok.csv", [RAW_UNITS, raw_launch(0), raw_launch(1)]))
    assert with_units.metrics["value"][with_units.metrics["metric"].index("gpu__time_duration.sum")] == \
        pytest.approx(11.5e-6)
    path = small_raw(tmp_path / "no_units.csv", [raw_launch(0), raw_launch(1)])
    with pytest.raises(InputError, match="without its units row"):
        read_ncu(path)


@pytest.mark.parametrize("layout", ["raw", "details", "details-joined"])
def test_duplicate_launch_ids_are_an_error(tmp_path: Path, layout: str) -> None:
    if layout == "raw":
        path = small_raw(tmp_path / "dup.csv", [RAW_UNITS, raw_launch(0), raw_launch(1), raw_launch(0, "other")])
    elif layout == "details":  # launch 0's rows again after launch 1's
        path = write_csv(tmp_path / "dup.csv", DETAILS_NEW, [*details_rows(0), *details_rows(1), *details_rows(0)])
    else:  # two exports joined: the header again, then launch 0 of another kernel right after launch 0
        path = write_csv(tmp_path / "dup.csv", DETAILS_NEW, [*details_rows(0), DETAILS_NEW, *details_rows(0, "k2")])
    with pytest.raises(InputError, match="launch ID 0 appears more than once"):
        read_ncu(path)
    result = invoke(["ingest", path, "-o", tmp_path / "n.duckdb"])
    assert result.exit_code == 1 and result.stderr.strip().splitlines() == [
        f"Error: {path}: launch ID 0 appears more than once; ncu gives each profiled launch its own ID "
        "(several exports joined into one file? give them as separate files)"]
    assert not (tmp_path / "n.duckdb").exists()


@pytest.mark.parametrize("layout", ["raw", "details"])
def test_a_byte_order_mark_is_accepted(tmp_path: Path, layout: str) -> None:
    if layout == "raw":
        plain = small_raw(tmp_path / "plain.csv", [RAW_UNITS, raw_launch(0), raw_launch(1)])
    else:
        plain = write_csv(tmp_path / "plain.csv", DETAILS_NEW, [*details_rows(0), *details_rows(1)])
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    q = "SELECT launch_id, kernel, metric, unit, value FROM ncu_kernels JOIN ncu_metrics USING (launch_id) ORDER BY ALL"
    want = loaded(plain).execute(q).fetchall()
    assert len(want) == 4 and loaded(bom).execute(q).fetchall() == want
