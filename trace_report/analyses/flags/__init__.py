"""Kernel classes and flags: which GPU time is tensor-core, TF32, layout conversion, ...

``trace-report flags``; the rules and the computation: :mod:`.compute`.

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method and
docs/cli.md are made from it (:mod:`trace_report.declare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import BY_RANK, LIMIT, RANK, Command, Opt, computed


@dataclass(frozen=True)
class FlagsOptions:
    """``rank``: only that rank; ``by_rank``: one ranking and summary per rank; ``classes``: keep
    names having any of these classes (empty = every flagged name); ``limit``: rows per rank;
    ``trace_ids``: only these traces (one run of several; the denominator is theirs);
    ``explain`` / ``summary``: the table shown (:func:`~.compute.flags_table`)."""

    rank: Annotated[int | None, RANK] = None
    by_rank: Annotated[bool, BY_RANK] = False
    classes: Annotated[tuple[str, ...], Opt("Only names with this class (repeatable): tf32, tensor_core, ...",
                                            ("--class", "-c"))] = ()
    explain: Annotated[bool, Opt("Show the rule and source behind each class.", ("--explain",))] = False
    summary: Annotated[bool, Opt("Print only the per-class summary.", ("--summary",))] = False
    limit: Annotated[int | None, LIMIT] = None
    trace_ids: Annotated[tuple[int, ...] | None, Opt("Only these traces (one run of several).", cli=False)] = None


COMMAND = Command(
    name="flags",
    options=FlagsOptions,
    compute="compute:flags_table",
    title="Flagged kernels",
    help="Flag GPU kernels by class (TF32, tensor core, BF16/FP16, layout conversion, GEMM, conv, NCCL,\n"
         "...) with count and time, then the TF32, tensor-core and layout-conversion shares of GPU time.",
    examples=("trace-report flags traces/run-42 --class tf32 --explain",
              "trace-report flags runs.duckdb --summary --engine ray"),
    full_names=True,
    ray="ray:flags_table_ray",
    write="trace_report.present.writers:flags_output",
    titles=(("explain", "Kernel class rules"), ("summary", "Share of GPU time")),
)

__getattr__ = computed(__name__, (
    "EXPLAIN_COLUMNS", "FLAG_COLUMNS", "FlagsResult", "HEADLINE_CLASSES", "RULES_VERSION", "SUMMARY_COLUMNS",
    "check_options", "classify", "flag_rows", "flags", "flags_from_rows", "flags_summary", "flags_table", "rules"))
