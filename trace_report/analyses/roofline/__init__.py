"""Roofline: measured (Nsight Compute) and estimated (FLOP and bytes of operator shapes) against device peaks.

``trace-report roofline`` (the computation: :mod:`.measured`, :mod:`.estimate`; the peak table:
:mod:`.peaks`). The declaration below is the command's only one: the CLI command, the
``TraceDB`` method and docs/cli.md are made from it (:mod:`trace_report.declare`); the command
line's own body (the peaks listing, a summary per run) is :func:`trace_report.cli.roofline.main`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import Chart, Command, Inputs, Opt, computed


@dataclass(frozen=True)
class RooflineOptions:
    """``gpu``: peak-table key or device name overriding the recorded device; ``peak_flops``
    (FLOP/s, one roof for every precision) and ``peak_bw`` (byte/s) override the table;
    ``batch_size`` (samples per step) overrides each run's ``config.batch_size``; ``by_name``
    aggregates launches per kernel (or operator) name; ``region`` (``forward``, ...) keeps the
    estimated operators inside that region of each ProfilerStep and gives FLOP per image of it;
    ``by_run`` adds a ``run`` column (the run's model and key, else the trace or report file)."""

    gpu: Annotated[str | None, Opt(
        "GPU whose peaks to use (key or device name, e.g. a100-sxm4-80gb; words that fit several GPUs, such as "
        "a100, are an error listing them); 'list' prints the table.")] = None
    peak_flops: Annotated[float | None, Opt("Peak FLOP/s for every precision, e.g. 19.5T (overrides the table).",
                                            parse="peaks:parse_si")] = None
    peak_bw: Annotated[float | None, Opt("Peak DRAM bytes/s, e.g. 1.555T (overrides the table).",
                                         parse="peaks:parse_si")] = None
    batch_size: Annotated[int | None, Opt(
        "Samples per step, for FLOP per sample (default: config.batch_size of run.json).", min=1)] = None
    by_name: Annotated[bool, Opt("One row per kernel name instead of per launch.", ("--by-name",))] = False
    region: Annotated[str | None, Opt(
        "Estimates only: keep the operators inside this region of each ProfilerStep (forward, loss, backward, "
        "optimizer_step) and print its FLOP per image.")] = None
    by_run: Annotated[bool, Opt("A run column (the run's model and key, else the trace or report file); the "
                                "command line sets it for several inputs.", cli=False)] = False


COMMAND = Command(
    name="roofline",
    options=RooflineOptions,
    compute="measured:roofline",
    title="Roofline",
    help="Roofline per kernel: FLOP, DRAM bytes, arithmetic intensity, achieved FLOP/s, bound.\n\n"
         "Several runs (or reports) get a run column and one colour per run on the chart.",
    examples=("trace-report roofline report.ncu-rep --gpu a100-sxm4-80gb --chart roofline.png",),
    full_names=True,
    inputs=Inputs("Nsight Compute reports (.ncu-rep, ncu --csv exports), or traces / one .duckdb database (then "
                  "FLOPs are estimated from operator shapes); local paths or s3://, gs://, abfs:// URLs.",
                  optional=True),
    chart=Chart(None, "Write the roofline chart (.html offline, .png, .svg).", "roofline", after="gpu"),
    main="trace_report.cli.roofline:main",
)

__getattr__ = computed(__name__, ("RooflineResult", "batch_size_near", "roofline"), module="measured")
