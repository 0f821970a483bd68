"""Read ``ncu --csv`` exports: ``--page details`` (long) and ``--page raw`` (wide).

Layouts (docs/roofline.md, and the ncu CLI documentation,
https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html):

* details: ``"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",
  "Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",
  "Metric Value"``, newer versions add ``"Rule Name","Rule Type","Rule Description",
  "Estimated Speedup Type","Estimated Speedup"``, older ones have ``"Kernel Time"`` and no
  block/grid/device columns. Metric names are display labels (``Duration``) unless
  ``--print-metric-name name`` was used; known labels are mapped to metric names
  (:data:`LABELS`, taken from the labels ncu's own section files give).
* raw: the same identification columns, then one column per metric name, a second row of
  units, then one row per launch. With ``--print-metric-instances details`` an instanced metric
  reads ``"<sum> (<id>: <value>; ...)"``: the per-opcode counts of :data:`INSTANCED` are kept
  (the tensor-core work of the roofline) as the .ncu-rep reader keeps them, other instanced
  metrics as their sum.

Lines before the header (``==PROF==`` progress, program output) are skipped; values may carry
thousands separators (``"1,215,000,000.00"``) or read ``n/a``; units auto-scale per value.
Every string kept (kernel, process and host names, sections, labels, units, text values) goes
through the secret screen of :mod:`trace_report.redact` (:func:`screen_strings`).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from trace_report import storage
from trace_report.errors import InputError
from trace_report.formats.ncu_types import (
    INSTANCED,
    NcuData,
    checked_counts,
    fill_device_names,
    split_instances,
)
from trace_report.redact import StringScreen

ID_COLUMNS = {
    "ID": "launch_id", "Process ID": "process_id", "Process Name": "process_name",
    "Host Name": "host", "Kernel Name": "kernel", "Context": "context", "Stream": "stream",
    "Block Size": "block_size", "Grid Size": "grid_size", "Device": "device",
    "CC": "compute_capability",
}
OTHER_COLUMNS = {"Kernel Time", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
                 "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                 "Estimated Speedup", "Range Name", "Workload Type"}
INT_FIELDS = {"launch_id", "process_id", "context", "stream", "device"}

_SOL = "GPU Speed Of Light Throughput"
_ROOF = "GPU Speed Of Light Roofline Chart"
_PRED = "Predicated-On {} Thread Instructions Executed Per Cycle"
_RATE = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
LABELS: dict[tuple[str, str], str] = {
    (_SOL, "Duration"): "gpu__time_duration.sum",
    (_SOL, "Elapsed Cycles"): "gpc__cycles_elapsed.max",
    (_SOL, "SM Frequency"): "gpc__cycles_elapsed.avg.per_second",
    (_SOL, "DRAM Frequency"): "dram__cycles_elapsed.avg.per_second",
    (_SOL, "SM Active Cycles"): "sm__cycles_active.avg",
    (_SOL, "Memory Throughput"): "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "DRAM Throughput"): "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "Compute (SM) Throughput"): "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "L1/TEX Cache Throughput"): "l1tex__throughput.avg.pct_of_peak_sustained_active",
    (_SOL, "L2 Cache Throughput"): "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    ("Memory Workload Analysis", "Memory Throughput"): "dram__bytes.sum.per_second",
    ("Instruction Statistics", "Executed Instructions"): "smsp__inst_executed.sum",
    ("Launch Statistics", "Grid Size"): "launch__grid_size",
    ("Launch Statistics", "Block Size"): "launch__block_size",
    ("Launch Statistics", "Threads"): "launch__thread_count",
    ("Launch Statistics", "Registers Per Thread"): "launch__registers_per_thread",
    ("Launch Statistics", "Waves Per SM"): "launch__waves_per_multiprocessor",
    ("Launch Statistics", "# SMs"): "launch__sm_count",
    (_ROOF, "SM Frequency"): "sm__cycles_elapsed.avg.per_second",
    (_ROOF, "DRAM Frequency"): "dram__cycles_elapsed.avg.per_second",
    (_ROOF, "DRAM Bandwidth"): "dram__bytes.sum.per_second",
    (_ROOF, "Theoretical DRAM Bytes Accessible"): "dram__bytes.sum.peak_sustained",
    (_ROOF, "Theoretical Predicated-On FFMA Operations"): "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2",
    (_ROOF, "Theoretical Predicated-On DFMA Operations"): "derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2",
    (_ROOF, "Predicated-On FFMA Operations Per Cycle"): "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2",
    (_ROOF, "Predicated-On DFMA Operations Per Cycle"): "derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2",
    **{(_ROOF, _PRED.format(op.upper())): _RATE.format(op) for op in ("fadd", "fmul", "dadd", "dmul")},
}
"""(section, label) -> metric name, for the labels the roofline needs (ncu 2022-2024 sections)."""

_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*__[A-Za-z0-9_.]+$")


def base_function(name: str) -> str:
    """Function name without return type, namespaces, template and parameter lists:
    ``void at::native::vectorized_elementwise_kernel<4, F>(int, F)`` ->
    ``vectorized_elementwise_kernel`` (what ncu's ``--print-kernel-base function`` shows)."""
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    head = name[:cut]
    depth, out = 0, []
    for ch in head:  # drop template argument lists
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    plain = "".join(out).strip()
    return plain.split(" ")[-1].split("::")[-1] or name


def _header_index(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        s = line.lstrip("\ufeff").strip()
        if s.startswith('"ID",') or s.startswith("ID,"):
            return i
    raise InputError("not an Nsight Compute CSV export (no \"ID\" header line)")


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        text = storage.read_text(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    lines = text.splitlines(keepends=True)
    try:
        start = _header_index(lines)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    # a byte-order mark (Excel's "CSV UTF-8"): before the quote, it would make the first cell unquoted
    reader = csv.reader(io.StringIO("".join([lines[start].lstrip("\ufeff"), *lines[start + 1:]])))
    header = [h.strip() for h in next(reader)]
    rows = [r for r in reader if r and not r[0].startswith("==") and any(c.strip() for c in r)]
    return header, rows


def _kernel_fields(cells: dict[str, str]) -> dict[str, object]:
    row: dict[str, object] = {}
    for col, key in ID_COLUMNS.items():
        value = cells.get(col)
        value = value.strip() if value is not None else None
        if key in INT_FIELDS:
            num = value.replace(",", "") if value else ""
            if num.lstrip("-").isdigit():
                row[key] = int(num)
            else:
                row[key] = None
                if key == "device" and value:
                    row["device_name"] = value  # some exports print the device's name here
        else:
            row[key] = value or None
    row["function"] = base_function(str(row["kernel"])) if row.get("kernel") else None
    row.setdefault("device_name", None)
    return row


def read_ncu_csv(path: Path) -> NcuData:
    """Parse an ncu CSV export (details or raw page) into :class:`NcuData`.

    Raises :class:`InputError` when the file is not an ncu CSV or has no launches.
    """
    header, rows = _rows(path)
    if "ID" not in header or "Kernel Name" not in header:
        raise InputError(f"{path}: not an Nsight Compute CSV export (no \"Kernel Name\" column)")
    details = "Metric Name" in header and "Metric Value" in header
    data = _details(header, rows, path) if details else _raw(header, rows, path)
    fill_device_names(data)
    data.redactions = screen_strings(data)
    return data


def screen_strings(data: NcuData) -> list[str]:
    """Replace the secrets in every string of ``data`` (launch fields, metric columns), in
    place, with :class:`~trace_report.redact.StringScreen` (each distinct string judged once);
    returns what was replaced as ``kind@ncu_kernels.<field> (N rows)`` /
    ``kind@ncu_metrics.<column> (N rows)``. The .ncu-rep reader calls it too."""
    screen = StringScreen()
    data.kernels = [screen.record(row, "ncu_kernels") for row in data.kernels]
    data.metrics = {key: screen.column(values, f"ncu_metrics.{key}") for key, values in data.metrics.items()}
    return screen.summary("rows")


def _duplicate(path: Path, lid: int) -> InputError:
    return InputError(f"{path}: launch ID {lid} appears more than once; ncu gives each profiled launch "
                      "its own ID (several exports joined into one file? give them as separate files)")


def _details(header: list[str], rows: list[list[str]], path: Path) -> NcuData:
    """The long page: a launch's rows come together (ncu prints them so), so an ID met again
    after another's rows, or with other launch fields, is a second launch under the same ID:
    :class:`InputError`, as is every other duplicate ID (:func:`_duplicate`)."""
    data = NcuData("csv-details")
    seen: dict[int, dict[str, object]] = {}
    added: set[tuple[int, str]] = set()
    current: int | None = None
    for raw in rows:
        cells = dict(zip(header, raw, strict=False))
        fields = _kernel_fields(cells)
        lid = fields["launch_id"]
        if not isinstance(lid, int):
            current = None  # a header line again: what follows is another export
            continue
        if lid in seen and (lid != current or fields != seen[lid]):
            raise _duplicate(path, lid)
        current = lid
        if lid not in seen:
            seen[lid] = fields
            data.kernels.append(fields)
        name = (cells.get("Metric Name") or "").strip()
        if not name:
            continue  # a rule-result row
        section = (cells.get("Section Name") or "").strip() or None
        if _METRIC_NAME.match(name):
            metric, label = name, None
        else:
            metric, label = LABELS.get((section or "", name), name), name
        if (lid, metric) in added:
            continue  # a label shown twice (SM Frequency in two sections)
        added.add((lid, metric))
        data.add_metric(lid, section, metric, label, cells.get("Metric Unit"), cells.get("Metric Value"))
    return data


def _raw(header: list[str], rows: list[list[str]], path: Path) -> NcuData:
    """The wide page: the header, a row of units (its ID cell empty) and one row per launch.
    Raises :class:`InputError` without the units row (ncu always prints it, auto-scaled units or
    base ones alike: without it ``usecond`` values would be read as seconds), for a row without a
    numeric ID and for an ID met twice."""
    data = NcuData("csv-raw")
    metric_cols = [i for i, h in enumerate(header)
                   if h not in ID_COLUMNS and h not in OTHER_COLUMNS and "Domain:" not in h and h]
    units: list[str] = [""] * len(header)
    if rows and not rows[0][0].strip():
        units = rows[0] + [""] * (len(header) - len(rows[0]))
        rows = rows[1:]
    elif rows and metric_cols:
        raise InputError(f"{path}: an ncu raw CSV without its units row (the line after the header, where "
                         "`ncu --csv --page raw` prints each metric's unit): its values cannot be read")
    seen: set[int] = set()
    for raw in rows:
        cells = dict(zip(header, raw, strict=False))
        fields = _kernel_fields(cells)
        lid = fields["launch_id"]
        if not isinstance(lid, int):
            raise InputError(f"{path}: row without a numeric ID in an ncu raw CSV")
        if lid in seen:
            raise _duplicate(path, lid)
        seen.add(lid)
        data.kernels.append(fields)
        for i in metric_cols:
            if i < len(raw):
                _add_cell(data, lid, header[i], units[i], raw[i])
    return data


def _add_cell(data: NcuData, lid: int, metric: str, unit: str, cell: str) -> None:
    """One raw-page cell. An instanced one (``--print-metric-instances details``) gives one row
    per opcode for the metrics of :data:`INSTANCED` (as the .ncu-rep reader stores them) and
    its aggregate for the others."""
    split = split_instances(cell)
    if split is None:
        data.add_metric(lid, None, metric, None, unit, cell)
    elif metric not in INSTANCED:
        data.add_metric(lid, None, metric, None, unit, split[0])
    else:  # counts that do not add up are dropped: the launch's tensor work is then unknown
        for name, count in checked_counts(split) or []:
            data.add_metric(lid, None, metric, None, unit, count, instance=name)
