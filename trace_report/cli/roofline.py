"""``trace-report roofline``'s own body (:func:`main`): the command, its options and its notebook
method are made from the declaration in :mod:`trace_report.analyses.roofline`.

One library call (:func:`trace_report.analyses.roofline.measured.roofline`) plus output formatting, as
every command (docs/architecture.md, Conventions).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_report.analyses.roofline.peaks import parse_si
from trace_report.cli.options import err, load, notes
from trace_report.cli.runs import PerRun, per_run, report, stacked
from trace_report.errors import InputError
from trace_report.present.format import Format
from trace_report.storage import is_url

if TYPE_CHECKING:
    import pandas as pd

    from trace_report.analyses.roofline import RooflineOptions
    from trace_report.analyses.roofline.measured import RooflineResult

__all__ = ["main", "parse_si"]


SI_COLUMNS = {"flop": "", "int_op": "", "bytes": "", "time_s": "s", "achieved_flop_per_s": "",
              "achieved_op_per_s": "", "roof_flop_per_s": ""}
"""Table columns shown with an SI prefix (the unit is in the column name; ``time_s`` values get
``s`` so that ``11.2 µs`` reads right)."""


def _display(frame: pd.DataFrame, fmt: Format) -> pd.DataFrame:
    """Table and Markdown output: the main columns, big and small numbers with SI prefixes (624 T, 11.2 µs),
    kernel names last (shortened by the table); other formats get every column in base units.
    Every format has the same columns' units: seconds, FLOP, OP, bytes."""
    from trace_report.present.format import si

    if fmt not in (Format.table, Format.markdown):
        return frame
    per_image = [c for c in frame.columns if c.endswith("_flop_per_image")]
    keep = ["run", "step", "launches", "flop", "int_op", "bytes", "time_s", "ai_op_per_byte", "achieved_op_per_s",
            "precision", "bound", "pct_of_roof", *per_image, "kernel"]
    if "int_op" in frame and not frame["int_op"].fillna(0).gt(0).any():  # no integer work: FLOP columns say it all
        keep = [{"ai_op_per_byte": "ai_flop_per_byte", "achieved_op_per_s": "achieved_flop_per_s"}.get(c, c)
                for c in keep if c != "int_op"]
    out = frame[[c for c in keep if c in frame]].copy()
    for col, unit in SI_COLUMNS.items():
        if col in out:
            out[col] = [si(v, unit) for v in out[col]]
    return out


def _peaks_display(fmt: Format) -> pd.DataFrame:
    """``--gpu list``: as a table, one readable row per GPU (peaks with SI prefixes, no sources);
    other formats get every field in base units with the sources."""
    import pandas as pd

    from trace_report.analyses.roofline.peaks import peaks_table
    from trace_report.present.format import si

    frame = pd.DataFrame(peaks_table())
    if fmt not in (Format.table, Format.markdown):
        return frame
    cols = {"key": "key", "name": "name", "fp64_flop_per_s": "fp64_flop_per_s", "fp32_flop_per_s": "fp32_flop_per_s",
            "tf32_tensor_flop_per_s": "tf32_tensor_flop_per_s", "fp16_tensor_flop_per_s": "fp16_tensor_flop_per_s",
            "int8_tensor_op_per_s": "int8_tensor_op_per_s", "dram_bytes_per_s": "dram_bytes_per_s"}
    out = frame[list(cols)].copy()
    for col in list(cols)[2:]:
        out[col] = [si(v) for v in out[col]]
    return out


def _summary(result: RooflineResult) -> None:
    from trace_report.present.format import si

    p = result.peaks
    if p is not None:
        parts = [f"FP32 {si(p.fp32_flop_per_s, 'FLOP/s')}" if p.fp32_flop_per_s else None,
                 f"INT8 tensor {si(p.int8_tensor_op_per_s, 'OP/s')}" if p.int8_tensor_op_per_s and
                 result.total_int_op else None,
                 f"DRAM {si(p.dram_bytes_per_s, 'B/s')}" if p.dram_bytes_per_s else None,
                 f"one roof {si(result.peak_flops, 'FLOP/s')}" if result.peak_flops else None]
        err.print(f"gpu: {p.name} ({', '.join(x for x in parts if x)}; sources: {' '.join(p.sources)})",
                  markup=False)
    from trace_report.present.format import si

    timed = "time_s" in result.frame and result.frame["time_s"].notna().any()
    spent = f"in {si(result.total_time_s, 's')} of kernel time" if timed else "with no GPU kernel time"
    ints = f" and {si(result.total_int_op, 'OP')} integer (int8/int4 tensor-core) operations" \
        if result.total_int_op else ""
    flop = "unknown FLOP (see the note)" if math.isnan(result.total_flop) else si(result.total_flop, "FLOP")
    err.print(f"total: {flop}{ints} {spent} ({result.source})", markup=False)
    for r in result.per_run.to_dict("records"):
        err.print(_per_run_line(result, r), markup=False)
    if result.per_run.empty and result.flop_per_sample is not None and not math.isnan(result.total_flop):
        err.print(f"all rows / batch size: {result.flop_per_sample:.6g} FLOP per sample (batch size "
                  f"{result.batch_size})", markup=False)
    notes(result.notes)


def _per_run_line(result: RooflineResult, r: dict[str, object]) -> str:
    """One summary line per run: the region's FLOP per image (median over steps), or, without a
    region, what the total divided by the batch size really is."""
    run = f"{r['run']}: " if len(result.per_run) > 1 or result.source == "ncu" else ""
    batch, steps, flop = r["batch_size"], r["steps"], float(r["flop"])  # type: ignore[arg-type]
    if math.isnan(flop):
        return f"{run}FLOP unknown: some launches' tensor-core work was not counted (see the note)"
    batch = None if _missing(batch) else int(batch)  # type: ignore[call-overload]
    if result.region:
        if _missing(r["flop_per_image"]) or batch is None:
            return f"{run}{result.region}: {r['flop_per_step']:.6g} FLOP per step ({steps} steps); " \
                   "batch size unknown (--batch-size) for FLOP per image"
        spread = "" if r["flop_per_image_min"] == r["flop_per_image_max"] else \
            f", min {r['flop_per_image_min']:.6g}, max {r['flop_per_image_max']:.6g}"
        return (f"{run}{result.region}_flop_per_image: {r['flop_per_image']:.6g} FLOP (median over {steps} "
                f"step(s) of {result.region} operators / batch size {batch}{spread})")
    if batch is None:
        from trace_report.present.format import si

        one = result.total_int_op and len(result.per_run) == 1
        ints = f" and {si(result.total_int_op, 'OP')} integer" if one else ""
        return f"{run}total {si(flop, 'FLOP')}{ints}; batch size unknown (--batch-size) for work per sample"
    if result.source == "ncu":
        return (f"{run}all kernels / batch size: {flop / batch:.6g} FLOP per sample (every kernel in the report "
                f"divided by batch size {batch}: per image of one pass only if the report holds one pass)")
    if not steps:
        return (f"{run}all estimated operators / batch size: {flop / batch:.6g} FLOP per sample (every operator "
                f"of the trace divided by batch size {batch})")
    per_step = float(r["flop_per_step"])  # type: ignore[arg-type]
    return (f"{run}all estimated operators: {flop:.6g} FLOP over {steps} profiled step(s), {per_step:.6g} per step, "
            f"{per_step / batch:.6g} per sample per step (batch size {batch}; forward + backward of a training "
            "step, not one pass: --region forward gives the forward FLOP per image)")


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def main(options: RooflineOptions, given: dict[str, Any]) -> None:
    """The command line's body of ``roofline`` (:attr:`trace_report.declare.Command.main`):
    ``--gpu list`` prints the peak table; one input is analysed run by run (each run with its own
    GPU's peaks), several inputs or Nsight Compute reports as one result with a run column; a
    summary per run on stderr, the chart of the first, then the table."""
    from trace_report.analyses.roofline.measured import batch_size_near, roofline
    from trace_report.inputs import InputKind, detect
    from trace_report.present.charts import roofline_chart, save_chart
    from trace_report.present.tables import OutputOptions, emit

    targets, fmt, limit, output, raw = (given[k] for k in ("targets", "fmt", "limit", "output", "raw"))
    if options.gpu == "list":
        listing = OutputOptions(fmt, limit, output, keep_order=True, raw=raw)
        emit(_peaks_display(listing.resolve()), listing, title="GPU peaks (FLOP/s, OP/s, bytes/s)")
        return
    if not targets:
        raise InputError("give an Nsight Compute report, traces or a database (or --gpu list)")
    several = len(targets) > 1
    batch_size = options.batch_size or (None if several or is_url(targets[0]) else batch_size_near(Path(targets[0])))
    opts = replace(options, batch_size=batch_size, by_run=several)
    local = [Path(p) for p in targets if not is_url(p)]  # a URL's kind is known once it is copied
    reports = [detect(p).kind in (InputKind.ncu_report, InputKind.ncu_csv) for p in local]
    if any(reports) and not all(reports):
        raise InputError("give either Nsight Compute reports or traces/a database, not both")
    with load(targets) as db:
        if several or db.has_table("ncu_kernels"):  # reports, or several targets: a run column (by_run)
            per = PerRun([(None, roofline(db, opts))])
        else:  # one target: each run with its own GPU's peaks
            per = per_run(db, lambda d: roofline(d, opts), run=given["run"], merge=given["merge_runs"])
    report(per)
    notes(per.notes)
    for label, result in per.results:
        if label is not None:
            err.print(f"run {label}:", markup=False)
        _summary(result)
    if given["chart"] is not None:
        save_chart(roofline_chart(per.results[0][1]), given["chart"])
        if per.several:
            notes([f"--chart: the roofline of run {per.results[0][0]} only (--run LABEL for another)"])
    resolved = OutputOptions(fmt, limit, output, raw=raw).resolve()
    emit(stacked(per, lambda r: _display(r.frame, resolved), limit),
         OutputOptions(resolved, None, output, given["full_names"], raw=raw),
         title="Roofline")
