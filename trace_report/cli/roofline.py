"""``trace-report roofline``: rooflines from Nsight Compute reports, databases or traces.

One library call (:func:`trace_report.analyses.roofline.measured.roofline`) plus output formatting, as
every command (docs/architecture.md, Conventions).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import FormatOpt, LimitOpt, OutputOpt, err, load, notes
from trace_report.cli.registry import app
from trace_report.errors import InputError
from trace_report.present.format import Format

if TYPE_CHECKING:
    import pandas as pd

    from trace_report.analyses.roofline.measured import RooflineResult

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def parse_si(text: str | None, what: str) -> float | None:
    """``'19.5T'`` -> 1.95e13, ``'1555e9'`` -> 1.555e12; None stays None."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([kKMGTP]?)\s*(?:FLOP/s|B/s|flop/s|b/s)?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{what}: expected a positive number such as 19.5T or 1.555e12, got {text!r}")
    return float(m.group(1)) * _SI[m.group(2)]


def _display(frame: pd.DataFrame, fmt: Format) -> pd.DataFrame:
    """Table output: the main columns, time in µs, kernel names shortened and last; other
    formats get every column."""
    from trace_report.analyses.roofline.measured import DISPLAY_NAME_CHARS

    if fmt is not Format.table:
        return frame
    keep = ["launches", "flop", "bytes", "time_us", "ai_flop_per_byte", "achieved_flop_per_s", "precision",
            "bound", "pct_of_roof", "kernel"]
    out = frame.assign(time_us=frame["time_s"] * 1e6)
    out = out[[c for c in keep if c in out]].copy()
    width = DISPLAY_NAME_CHARS // 2
    out["kernel"] = [k if len(str(k)) <= width else str(k)[: width - 1] + "…" for k in out["kernel"]]
    return out


def _summary(result: RooflineResult) -> None:
    p = result.peaks
    if p is not None:
        parts = [f"FP32 {p.fp32_flop_per_s / 1e12:.4g} TFLOP/s" if p.fp32_flop_per_s else None,
                 f"DRAM {p.dram_bytes_per_s / 1e9:.4g} GB/s" if p.dram_bytes_per_s else None,
                 f"one roof {result.peak_flops / 1e12:.4g} TFLOP/s" if result.peak_flops else None]
        err.print(f"gpu: {p.name} ({', '.join(x for x in parts if x)}; sources: {' '.join(p.sources)})",
                  markup=False)
    err.print(f"total: {result.total_flop:.6g} FLOP in {result.total_time_s:.6g} s of kernel time "
              f"({result.source})", markup=False)
    if result.flop_per_sample is not None:
        err.print(f"per sample: {result.flop_per_sample:.6g} FLOP (batch size {result.batch_size})", markup=False)
    notes(result.notes)


@app.command("roofline")
def roofline_cmd(
    targets: Annotated[list[Path] | None, typer.Argument(
        help="Nsight Compute reports (.ncu-rep, ncu --csv exports), or traces / one .duckdb database "
             "(then FLOPs are estimated from operator shapes).")] = None,
    gpu: Annotated[str | None, typer.Option(
        help="GPU whose peaks to use (key or device name, e.g. a100-sxm4-80gb); 'list' prints the table.")] = None,
    chart: Annotated[Path | None, typer.Option(help="Write the roofline chart (.html offline, .png, .svg).")] = None,
    peak_flops: Annotated[str | None, typer.Option(
        help="Peak FLOP/s for every precision, e.g. 19.5T (overrides the table).")] = None,
    peak_bw: Annotated[str | None, typer.Option(help="Peak DRAM bytes/s, e.g. 1.555T (overrides the table).")] = None,
    batch_size: Annotated[int | None, typer.Option(
        min=1, help="Samples per step, for FLOP per sample (default: config.batch_size of run.json).")] = None,
    by_name: Annotated[bool, typer.Option("--by-name", help="One row per kernel name instead of per launch.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Roofline per kernel: FLOP, DRAM bytes, arithmetic intensity, achieved FLOP/s, bound.

    Example: trace-report roofline report.ncu-rep --gpu a100-sxm4-80gb --chart roofline.png
    """
    import pandas as pd

    from trace_report.analyses.roofline.measured import RooflineOptions, batch_size_near, roofline
    from trace_report.analyses.roofline.peaks import peaks_table
    from trace_report.inputs import InputKind, detect
    from trace_report.present.charts import roofline_chart, save_chart
    from trace_report.present.tables import OutputOptions, emit

    if gpu == "list":
        emit(pd.DataFrame(peaks_table()), OutputOptions(fmt, limit, output), title="GPU peaks")
        return
    if not targets:
        raise InputError("give an Nsight Compute report, traces or a database (or --gpu list)")
    opts = RooflineOptions(gpu=gpu, peak_flops=parse_si(peak_flops, "--peak-flops"),
                           peak_bw=parse_si(peak_bw, "--peak-bw"),
                           batch_size=batch_size or batch_size_near(targets[0]), by_name=by_name)
    reports = [detect(p).kind in (InputKind.ncu_report, InputKind.ncu_csv) for p in targets]
    if any(reports) and not all(reports):
        raise InputError("give either Nsight Compute reports or traces/a database, not both")
    with load(targets) as db:
        result = roofline(db, opts)
    if chart is not None:
        save_chart(roofline_chart(result), chart)
    _summary(result)
    resolved = OutputOptions(fmt, limit, output).resolve()
    emit(_display(result.frame, resolved), OutputOptions(resolved, limit, output), title="Roofline")
