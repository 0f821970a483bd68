"""Build traces/h100-2026-11-25/ncu-step/forward-instances.ncu.csv from the H100 report.

The report (``capture baseline --ncu --wait 0 --warmup 1 --active 1 --batch-size 16`` on an
NVIDIA H100, Nsight Compute 2025.3.1, 2026-11-25; 106 MB, not kept) profiled one whole training
step until the check's 120 s limit stopped it after 169 launches: the 130 of the forward pass
(the NVTX-filtered run in ncu-forward/ has the same 130) and 39 of the loss and backward.

This writes the forward launches in the layout of
``ncu --import R --csv --page raw --print-units base --print-metric-instances details``, with
only the columns the roofline reads, every value as the report holds it:

    python tests/formats/h100_ncu_fixture.py REPORT.ncu-rep OUT.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

FORWARD_LAUNCHES = 130
IDS = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
       "Block Size", "Grid Size", "Device", "CC"]
SCALARS = [
    ("gpu__time_duration.sum", "ns"),
    ("dram__bytes_read.sum", "byte"),
    ("dram__bytes_write.sum", "byte"),
    *((f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum", "inst")
      for p in "dfh" for op in ("fma", "add", "mul")),
    ("sm__inst_executed_pipe_tensor.sum", "inst"),
    *((f"sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.{s}"
       ".pct_of_peak_sustained_elapsed", "%") for s in ("avg", "max")),
    ("device__attribute_display_name", ""),
    ("device__attribute_compute_capability_major", ""),
    ("device__attribute_compute_capability_minor", ""),
]
INSTANCED = "sass__inst_executed_per_opcode_with_modifier_all"


def number(value: float) -> str:
    """As ncu prints base units: thousands separators, no trailing .0 for whole numbers."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def launch_row(ncu_report: object, action: object, launch: int) -> list[str]:
    def v(name: str) -> str:
        return str(int(action.metric_by_name(name).value()))

    dims = [(v(f"launch__block_dim_{x}"), v(f"launch__grid_dim_{x}")) for x in "xyz"]
    row = [str(launch), "618", "python3.12", "127.0.0.1",
           action.name(ncu_report.IAction.NameBase_DEMANGLED), v("launch__context_id"),
           v("launch__stream_id"), "(" + ", ".join(d[0] for d in dims) + ")",
           "(" + ", ".join(d[1] for d in dims) + ")", v("launch__device_id"),
           f"{v('device__attribute_compute_capability_major')}."
           f"{v('device__attribute_compute_capability_minor')}"]
    for name, _ in SCALARS:
        metric = action.metric_by_name(name)
        value = metric.value()
        row.append(value if isinstance(value, str) else number(value))
    metric = action.metric_by_name(INSTANCED)
    opcodes = metric.correlation_ids()
    pairs = [(opcodes.as_string(k), metric.as_double(k)) for k in range(metric.num_instances())]
    row.append(f"{number(sum(c for _, c in pairs))} ("
               + "; ".join(f"{name}: {number(c)}" for name, c in pairs) + ")")
    return row


def build(report: Path, out: Path) -> None:
    import ncu_report

    rng = ncu_report.load_report(str(report)).range_by_idx(0)
    rows = [launch_row(ncu_report, rng.action_by_idx(i), i) for i in range(FORWARD_LAUNCHES)]
    with open(out, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(IDS + [name for name, _ in SCALARS] + [INSTANCED])
        writer.writerow([""] * len(IDS) + [unit for _, unit in SCALARS] + ["inst"])
        writer.writerows(rows)


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
