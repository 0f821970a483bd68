"""Numbers for people in tables and Markdown, raw in CSV and JSON: bytes in KiB/MiB/GiB,
FLOP and rates with SI prefixes, µs times with 3-4 significant digits and no made-up decimals."""

from __future__ import annotations

import csv
import io
import json

from conftest import REPO, invoke

from trace_report.present.tables import _fmt_cell


def test_cells_by_unit():
    assert _fmt_cell(2707847680, "bytes") == "2.52 GiB"
    assert _fmt_cell(8196000, "peak_allocated_bytes") == "7.82 MiB"
    assert _fmt_cell(512, "bytes") == "512 B"
    assert _fmt_cell(80756.0, "total_us") == "80,756"
    assert _fmt_cell(1.234567, "mean_us") == "1.235"
    assert _fmt_cell(0.000123, "mean_us") == "0.000123"
    assert _fmt_cell(624e12, "achieved_flop_per_s") == "624 TFLOP/s"
    assert _fmt_cell(3.2e9, "flop") == "3.2 GFLOP"
    assert _fmt_cell(12.3456, "pct_of_gpu_time") == "12.3"
    assert _fmt_cell(1.6e-17, "gpu_util_pct") == "<0.001"
    assert _fmt_cell(7, "count") == "7" and _fmt_cell(None, "x") == "" and _fmt_cell("n", "name") == "n"


def test_table_for_people_csv_and_json_raw():
    trace = REPO / "traces" / "h100-2026-11-25" / "baseline"
    table = invoke(["top-kernels", trace, "-n", "5"]).stdout
    rows = list(csv.DictReader(io.StringIO(invoke(["top-kernels", trace, "-n", "5", "-f", "csv"]).stdout)))
    data = json.loads(invoke(["top-kernels", trace, "-n", "5", "-f", "json"]).stdout)
    assert ".000 " not in table and ".000│" not in table.replace(" ", "")
    first = data[0]["total_us"]
    assert float(rows[0]["total_us"]) == first  # raw in CSV and JSON
    shown = f"{first:,.0f}" if first >= 1000 else f"{first:.4g}"
    assert shown in table


def test_empty_result_prints_the_note_and_no_empty_box():
    import pytest
    from conftest import TRACES

    if not TRACES.is_dir():
        pytest.skip("../shared/data is not present")
    out = invoke(["memory", TRACES / "hta_a100_ddp_nccl"])
    assert out.exit_code == 0 and out.stdout == "" and "note: no [memory] events" in out.stderr
    assert invoke(["memory", TRACES / "hta_a100_ddp_nccl", "-f", "json"]).stdout.strip() == "[]"


def test_unknown_output_suffix_is_a_usage_error(tmp_path):
    trace = REPO / "traces" / "h100-2026-11-25" / "baseline"
    out = invoke(["top-kernels", trace, "-o", tmp_path / "out.xlsx"])
    assert out.exit_code == 2 and out.stderr.strip().startswith("Error:") and ".csv, .json or .md" in out.stderr
    assert not (tmp_path / "out.xlsx").exists()
    assert invoke(["top-kernels", trace, "-o", tmp_path / "out.txt"]).exit_code == 0
    assert invoke(["top-kernels", trace, "-o", tmp_path / "out.xlsx", "-f", "csv"]).exit_code == 0


def test_list_and_struct_columns_are_json_in_json_and_csv():
    """LIST columns came out of -f json/csv as numpy reprs ("[1 2 3]")."""
    import numpy as np
    import pandas as pd

    from trace_report.present.format import Format
    from trace_report.present.tables import render

    trace = REPO / "traces" / "h100-2026-11-25" / "baseline"
    query = "SELECT [1, 2, 3] AS l, {'a': 1, 'b': [2]} AS s"
    (row,) = list(csv.DictReader(io.StringIO(invoke(["sql", trace, query, "-f", "csv"]).stdout)))
    assert json.loads(row["l"]) == [1, 2, 3] and json.loads(row["s"]) == {"a": 1, "b": [2]}
    assert json.loads(invoke(["sql", trace, query, "-f", "json"]).stdout) == [{"l": [1, 2, 3], "s": {"a": 1, "b": [2]}}]
    frame = pd.DataFrame({"l": [np.array([1, 2, 3])], "x": [1.5]})  # what pandas gives for a LIST column
    assert json.loads(render(frame, Format.json)) == [{"l": [1, 2, 3], "x": 1.5}]
    (row,) = list(csv.DictReader(io.StringIO(render(frame, Format.csv))))
    assert json.loads(row["l"]) == [1, 2, 3] and row["x"] == "1.5"
