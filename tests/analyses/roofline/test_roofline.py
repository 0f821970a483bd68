"""Roofline: peak table, measured rooflines from the real ncu reports (expected values computed
here from the stored metrics), chart output, and the CLI command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import SHARED, invoke

from trace_report.analyses.roofline.measured import RooflineOptions, apply_roofs, batch_size_near, roofline
from trace_report.analyses.roofline.peaks import PEAKS, match_gpu, peaks_table, resolve_peaks
from trace_report.cli.roofline import parse_si
from trace_report.errors import InputError
from trace_report.ingest.ncu import load_ncu
from trace_report.present.charts import chart_points, roofline_chart, save_chart
from trace_report.store.database import create_schema
from trace_report.store.tracedb import TraceDB

A100 = SHARED / "data" / "ncu" / "cutlass_fork_ncu_a100_fullset" / "report.ncu-rep"
A40 = SHARED / "data" / "ncu" / "indexspaces_ncu_a40_frb" / "profile.ncu-rep"
REQUIRED = {"a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie",
            "h200", "v100-sxm2", "v100-pcie", "a40", "a10", "t4", "l4", "rtx3060", "rtx4090"}


def rep(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    pytest.importorskip("ncu_report")
    return path


def ncu_con(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    load_ncu(con, rep(path))
    return con


def value(con: duckdb.DuckDBPyConnection, lid: int, name: str, instance: str | None = None) -> float:
    return con.execute("SELECT sum(value) FROM ncu_metrics WHERE launch_id = ? AND metric = ? "
                       "AND instance IS NOT DISTINCT FROM ?", [lid, name, instance]).fetchall()[0][0]


# ------------------------------------------------------------------ peaks


def test_peak_table_covers_the_gpus_with_sources() -> None:
    keys = {p.key for p in PEAKS}
    assert keys >= REQUIRED
    for p in PEAKS:
        assert p.sources and all(s.startswith("https://") for s in p.sources), p.key
        assert p.fp32_flop_per_s and p.fp64_flop_per_s and p.dram_bytes_per_s, p.key
        assert p.fp16_tensor_flop_per_s, p.key
        assert p.fp64_flop_per_s <= p.fp32_flop_per_s
        assert (p.tf32_tensor_flop_per_s is None) == (p.key.startswith(("v100", "t4", "mi250"))), p.key
    assert len(peaks_table()) == len(PEAKS)


@pytest.mark.parametrize(("device", "key"), [
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"), ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A40", "a40"), ("NVIDIA A10", "a10"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H200", "h200"), ("Tesla V100-SXM2-32GB", "v100-sxm2"),
    ("Tesla V100-DGXS-32GB", "v100-sxm2"), ("Tesla V100-PCIE-32GB", "v100-pcie"), ("Tesla T4", "t4"),
    ("NVIDIA L4", "l4"), ("NVIDIA GeForce RTX 3060", "rtx3060"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
    ("a100-sxm4-80gb", "a100-sxm4-80gb"), ("AMD Instinct MI300X", "mi300x"), ("AMD Instinct MI300X VF", "mi300x"),
    ("AMD Instinct MI250X", "mi250x-gcd"), ("AMD Instinct MI250", "mi250-gcd"),
])
def test_device_names_match_peak_rows(device: str, key: str) -> None:
    match = match_gpu(device)
    assert match is not None and match.key == key


@pytest.mark.parametrize("device", ["NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 2080 Ti", "NVIDIA B200",
                                    "AMD Radeon Graphics", "", None])
def test_unknown_devices_do_not_match(device: str | None) -> None:
    assert match_gpu(device) is None


@pytest.mark.parametrize(("key", "package"), [
    # AMD datasheets (MI200: amd-instinct-mi200-datasheet.pdf; MI300X: amd-instinct-mi300x-data-sheet.pdf),
    # TFLOP/s: FP64 vector, FP32 vector, FP64 matrix, FP16 matrix (dense), TB/s HBM; one GCD of two on MI250(X)
    ("mi250x-gcd", (47.9, 47.9, 95.7, 383.0, 3.2768, 2)),
    ("mi250-gcd", (45.3, 45.3, 90.5, 362.1, 3.2768, 2)),
    ("mi300x", (81.7, 163.4, 163.4, 1307.4, 5.3, 1)),
])
def test_amd_rows_are_the_datasheet_figures_per_device(key: str, package: tuple[float, ...]) -> None:
    fp64, fp32, fp64_matrix, fp16_matrix, tb_s, devices = package
    p = next(p for p in PEAKS if p.key == key)
    got = (p.fp64_flop_per_s, p.fp32_flop_per_s, p.fp64_tensor_flop_per_s, p.fp16_tensor_flop_per_s)
    assert got == pytest.approx(tuple(v * 1e12 / devices for v in (fp64, fp32, fp64_matrix, fp16_matrix)))
    assert p.dram_bytes_per_s == pytest.approx(tb_s * 1e12 / devices)
    assert any("amd.com" in s for s in p.sources)


def test_resolve_peaks_overrides() -> None:
    assert resolve_peaks("NVIDIA A40", gpu="h100-sxm").key == "h100-sxm"
    assert resolve_peaks("NVIDIA A40", peak_bw=1e12).dram_bytes_per_s == 1e12
    assert resolve_peaks("unknown", peak_flops=1e13).key == "custom"
    assert resolve_peaks("unknown") is None
    with pytest.raises(InputError, match="unknown GPU"):
        resolve_peaks("NVIDIA A40", gpu="gtx480")


# ------------------------------------------------------------------ measured rooflines


def test_a40_frb_kernel_roofline_from_the_report_metrics() -> None:
    con = ncu_con(A40)
    row = roofline(TraceDB(con)).frame.set_index("launch_id").loc[4]
    t = value(con, 4, "gpu__time_duration.sum")
    cycles = value(con, 4, "sm__cycles_elapsed.avg.per_second") * t
    rate = {op: value(con, 4, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")
            for op in ("fadd", "fmul")}
    ffma_x2 = value(con, 4, "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2")  # ncu's 2*FFMA
    fp32 = (ffma_x2 + rate["fadd"] + rate["fmul"]) * cycles  # ncu SOLFPRoofline achieved work x time
    ops = "sass__thread_inst_executed_true_per_opcode"
    fp16 = 2 * value(con, 4, ops, "HFMA2") + value(con, 4, ops, "HADD2") + value(con, 4, ops, "HMUL2")
    mma = "sass__inst_executed_per_opcode_with_modifier_all"
    tensor = (2 * 16 * 8 * 16 * value(con, 4, mma, "HMMA.16816.F16")
              + 2 * 16 * 8 * 8 * value(con, 4, mma, "HMMA.1688.F16"))
    dram = value(con, 4, "dram__bytes_read.sum") + value(con, 4, "dram__bytes_write.sum")
    flop = fp32 + fp16 + tensor
    assert row["flop_fp32"] == pytest.approx(fp32, rel=1e-9) == 6181056
    assert row["flop_fp16"] == pytest.approx(fp16) and row["tensor_flop"] == pytest.approx(tensor)
    assert row["flop_fp64"] == 0
    assert (row["flop"], row["bytes"], row["time_s"]) == pytest.approx((flop, dram, t))
    assert row["ai_flop_per_byte"] == pytest.approx(flop / dram)
    assert row["achieved_flop_per_s"] == pytest.approx(flop / t)
    assert row["precision"] == "fp16_tensor"
    ridge = 149.7e12 / 696e9  # A40 datasheet: FP16 tensor 149.7 TFLOP/s dense, 696 GB/s
    assert row["ridge_ai"] == pytest.approx(ridge)
    assert row["bound"] == "memory"  # 82.6 FLOP/byte < 215 FLOP/byte
    assert row["pct_of_roof"] == pytest.approx(100 * (flop / t) / (696e9 * flop / dram))


def test_a100_int8_gemms_are_reported_as_tensor_ops() -> None:
    con = ncu_con(A100)
    frame = roofline(TraceDB(con)).frame.set_index("launch_id")
    imma = "sass__inst_executed_per_opcode_with_modifier_all"
    for lid in (0, 1, 2):
        expected = 2 * 16 * 8 * 32 * value(con, lid, imma, "IMMA.16832.S8.S8.SAT")
        assert frame.loc[lid, "int_op"] == pytest.approx(expected)
        assert frame.loc[lid, "precision"] == "int8_tensor"
        assert frame.loc[lid, "roof_flop_per_s"] == 624e12
    assert frame.loc[2, "flop_fp32"] == 2 * 1179648
    assert frame.loc[0, "int_op"] == 2 * 3072 * 384 * 384  # an M=3072, N=K=384 int8 GEMM
    assert set(frame["bound"]) == {"compute"}


def test_sql_view_and_python_roofs_agree() -> None:
    for path in (A100, A40):
        result = roofline(TraceDB(ncu_con(path)))
        frame = result.frame
        con = duckdb.connect()
        create_schema(con, with_views=True)
        redo = apply_roofs(con, frame.drop(columns=["roof_flop_per_s", "ridge_ai", "bound", "pct_of_roof"]),
                           result.peaks)
        def labels(col: pd.Series) -> list[str | None]:
            return [b if isinstance(b, str) else None for b in col]

        assert labels(redo["bound"]) == labels(frame["bound"])
        assert redo["pct_of_roof"].fillna(-1).tolist() == pytest.approx(frame["pct_of_roof"].fillna(-1).tolist())


def test_overrides_and_aggregation() -> None:
    con = ncu_con(A40)
    base = roofline(TraceDB(con)).frame.set_index("launch_id").loc[4]
    other = roofline(TraceDB(con), RooflineOptions(gpu="h100-sxm")).frame.set_index("launch_id").loc[4]
    assert other["roof_flop_per_s"] == 989.5e12 and other["ridge_ai"] == pytest.approx(989.5e12 / 3350e9)
    custom_opts = RooflineOptions(peak_flops=50e12, peak_bw=500e9)
    custom = roofline(TraceDB(con), custom_opts).frame.set_index("launch_id").loc[4]
    assert custom["roof_flop_per_s"] == 50e12 and custom["ridge_ai"] == pytest.approx(100.0)
    memory_roof = 500e9 * base["ai_flop_per_byte"]
    assert custom["pct_of_roof"] == pytest.approx(100 * base["achieved_flop_per_s"] / memory_roof)
    by_name = roofline(TraceDB(con), RooflineOptions(by_name=True, batch_size=4))
    assert by_name.frame["launches"].sum() == 5 and len(by_name.frame) == 3
    assert by_name.total_flop == pytest.approx(base["flop"])
    assert by_name.flop_per_sample == pytest.approx(base["flop"] / 4)


def test_read_only_database_with_ncu_tables(tmp_path: Path) -> None:
    db = tmp_path / "ncu.duckdb"
    with duckdb.connect(str(db)) as con:
        load_ncu(con, rep(A40))
    with duckdb.connect(str(db), read_only=True) as con:
        assert len(roofline(TraceDB(con)).frame) == 5


def test_nothing_to_build_a_roofline_from() -> None:
    with pytest.raises(InputError, match="no Nsight Compute results"):
        roofline(TraceDB(duckdb.connect()))


# ------------------------------------------------------------------ chart


def test_chart_layers_and_points() -> None:
    result = roofline(TraceDB(ncu_con(A100)))
    pts = chart_points(result.frame)
    assert set(pts["precision"]) == {"FP32", "INT8 tensor (OP/s)"} and len(pts) == 4
    spec = roofline_chart(result).to_dict()
    # ceilings, ridge points, ridge labels, kernels, kernel labels (one layer per label offset)
    assert len(spec["layer"]) >= 5 and all(layer["mark"]["type"] == "text" for layer in spec["layer"][4:])
    assert spec["layer"][3]["encoding"]["x"]["scale"]["type"] == "log"
    assert spec["layer"][3]["encoding"]["y"]["scale"]["type"] == "log"
    assert sorted(pts["label"]) == [f"cutlass::Kernel‹cutlass::gemm::… #{i}" for i in (0, 1, 2, 2)]
    assert "A100 PCIe 80GB" in spec["title"]
    roofs = {d["roof"] for d in spec["datasets"][spec["layer"][0]["data"]["name"]]}
    assert roofs == {"FP32", "INT8 tensor", "DRAM bandwidth"}


def test_chart_files_offline_and_escaped(tmp_path: Path) -> None:
    result = roofline(TraceDB(ncu_con(A40)))
    result.frame.loc[result.frame["launch_id"] == 4, "kernel"] = "<script>alert(1)</script>"
    html = tmp_path / "r.html"
    save_chart(roofline_chart(result), html)
    text = html.read_text()
    assert "<script>alert(1)" not in text and "alert(1)" in text
    assert "cdn.jsdelivr.net" not in text and "vegaEmbed" in text
    svg = tmp_path / "r.svg"
    save_chart(roofline_chart(result), svg)
    assert svg.read_text().lstrip().startswith("<svg")
    with pytest.raises(InputError, match="must end in"):
        save_chart(roofline_chart(result), tmp_path / "r.pdf")


# ------------------------------------------------------------------ CLI




def test_cli_json_and_png(tmp_path: Path) -> None:
    png = tmp_path / "roof.png"
    res = invoke(["roofline", str(rep(A100)), "-f", "json", "--chart", str(png),
                                   "--batch-size", "2"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["launch_id"] for r in rows] == [0, 1, 2]
    assert {"kernel", "flop", "bytes", "time_s", "ai_flop_per_byte", "achieved_flop_per_s", "bound",
            "pct_of_roof", "flop_fp32", "tensor_flop"} <= set(rows[0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # every kernel of the report / batch size, said as such (not "per image" of a pass)
    assert "all kernels / batch size: 1.17965e+06 FLOP per sample (every kernel in the report" in res.stderr
    assert "NVIDIA A100 PCIe 80GB" in res.stderr


def test_cli_gpu_list_and_errors(tmp_path: Path) -> None:
    res = invoke(["roofline", "--gpu", "list", "-f", "csv"])
    assert res.exit_code == 0 and "a100-pcie-80gb" in res.stdout
    for args, message in [(["roofline", str(tmp_path / "missing.ncu-rep")], "no such file"),
                          (["roofline"], "give an Nsight Compute report"),
                          (["roofline", str(rep(A40)), "--peak-bw", "fast"], "--peak-bw"),
                          (["roofline", str(A40), "--gpu", "gtx480"], "unknown GPU")]:
        res = invoke(args)
        assert res.stderr.startswith("Error:") and message in res.stderr, args


def test_parse_si() -> None:
    assert parse_si("19.5T", "x") == pytest.approx(19.5e12)
    assert parse_si("1.555e12", "x") == 1.555e12
    assert parse_si("696G", "x") == pytest.approx(696e9)
    assert parse_si(None, "x") is None
    with pytest.raises(InputError):
        parse_si("-1", "x")


def test_batch_size_from_run_json(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"config": {"batch_size": 64}}))
    report = tmp_path / "report.ncu-rep"
    assert batch_size_near(report) == 64
    assert batch_size_near(tmp_path) == 64
    (tmp_path / "run.json").write_text("not json")
    assert batch_size_near(report) is None
    assert math.isclose(64, 64)


def test_cli_region_on_a_report_says_how_to_get_one_pass() -> None:
    """An ncu report has no ProfilerStep regions, and `capture --ncu` brackets whole steps: --region
    is refused with the recipe for a forward-only report, in one Error line."""
    res = invoke(["roofline", str(rep(A100)), "--region", "forward"])
    assert res.exit_code != 0 and res.stderr.startswith("Error: --region applies to estimates from traces")
    assert "--nvtx --nvtx-include forward/" in res.stderr and "Traceback" not in res.output


# ------------------------------------------------------------------ output


def test_integer_ops_are_shown_and_counted() -> None:
    """The int8 CUTLASS GEMMs: 0 FLOP on launches 0 and 1, but int_op (IMMA, 2*m*n*k per warp
    instruction) is their work; ai_op_per_byte and achieved_op_per_s count it; the total says so."""
    con = ncu_con(A100)
    result = roofline(TraceDB(con))
    frame = result.frame.set_index("launch_id")
    imma = "sass__inst_executed_per_opcode_with_modifier_all"
    for lid in (0, 1, 2):
        work = frame.loc[lid, "flop"] + 2 * 16 * 8 * 32 * value(con, lid, imma, "IMMA.16832.S8.S8.SAT")
        assert frame.loc[lid, "ai_op_per_byte"] == pytest.approx(work / frame.loc[lid, "bytes"])
        assert frame.loc[lid, "achieved_op_per_s"] == pytest.approx(work / frame.loc[lid, "time_s"])
    assert frame.loc[0, "flop"] == 0 and frame.loc[0, "int_op"] > 0
    assert result.total_int_op == pytest.approx(frame["int_op"].sum()) and result.total_int_op > 3.6e9
    res = invoke(["roofline", str(A100)])
    assert "3.62 GOP integer (int8/int4 tensor-core) operations" in res.stderr
    assert "INT8 tensor 624 TOP/s" in res.stderr


def test_table_has_si_prefixes_and_the_units_of_csv() -> None:
    rep(A100)
    table = invoke(["roofline", str(A100), "-f", "markdown"])
    csv_rows = invoke(["roofline", str(A100), "-f", "csv"]).stdout.splitlines()
    head = table.stdout.splitlines()[0]
    assert "time_s" in head and "time_us" not in head and "time_s" in csv_rows[0].split(",")
    assert "int_op" in head and "ai_op_per_byte" in head
    assert "11.2 µs" in table.stdout and "906 M" in table.stdout and "81.1 T" in table.stdout
    assert "000,000" not in table.stdout
    listing = invoke(["roofline", "--gpu", "list", "-f", "markdown"]).stdout
    a100 = next(line for line in listing.splitlines() if line.startswith("| a100-pcie-80gb"))
    assert "| 624 T |" in a100 and "| 1.94 T |" in a100 and "https://" not in listing
    assert "624000000000000" in invoke(["roofline", "--gpu", "list", "-f", "csv"]).stdout


@pytest.mark.parametrize(("gpu", "fits"), [("a100", 4), ("v100", 2), ("h100", 2)])
def test_ambiguous_gpu_is_an_error_listing_the_choices(gpu: str, fits: int) -> None:
    res = invoke(["roofline", str(rep(A100)), "--gpu", gpu])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"Error: --gpu '{gpu}' fits {fits} GPUs:")
    assert all(p.key in res.stderr for p in PEAKS if gpu in p.key.split("-"))
    one = invoke(["roofline", str(A100), "--gpu", "a100 pcie 80gb", "-f", "json"])
    assert one.exit_code == 0 and json.loads(one.stdout)[0]["gpu"] == "NVIDIA A100 PCIe 80GB"


def test_chart_labels_are_short_names_apart_and_legend_inside() -> None:
    from trace_report.present.charts.roofline import HEIGHT, WIDTH, place_labels

    result = roofline(TraceDB(ncu_con(A100)))
    spec = roofline_chart(result).to_dict()
    texts = [layer for layer in spec["layer"] if layer["mark"].get("type") == "text"
             and layer["encoding"]["text"]["field"] == "label"]
    labels = [row["label"] for layer in texts for row in spec["datasets"][layer["data"]["name"]]]
    assert labels and all(lab.startswith("cutlass::Kernel‹") and "Kernel #" not in lab for lab in labels)
    pts = chart_points(result.frame)
    placed = place_labels(pts, (0.01, 1e6), (1e9, 1e16), WIDTH, HEIGHT)
    boxes = list(placed["box"])
    for i, a in enumerate(boxes):
        assert a[0] >= 0 and a[2] <= WIDTH and a[1] >= 0 and a[3] <= HEIGHT
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
    legends = [enc["legend"] for layer in spec["layer"] for enc in layer.get("encoding", {}).values()
               if isinstance(enc, dict) and enc.get("legend")]
    assert legends and all(leg["orient"] == "top-left" for leg in legends)
