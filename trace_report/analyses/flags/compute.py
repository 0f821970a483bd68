"""The computation of ``flags`` (its declaration: the package's ``__init__``). Kernel classes
and flags: which GPU time is tensor-core, TF32, layout conversion, ...

The rule table is the SQL view ``kernel_class_rules`` (``sql/views_kernel_classes.sql``,
:data:`RULES_VERSION`): each rule has a pattern, the class it gives, a rationale and a source.
``kernel_classes`` (view) lists the classes of every GPU operation name per trace; this module
ranks the flagged names and lists the rules used; the shares of GPU time per class (the summary,
which ``advise`` reads too) are :mod:`trace_report.analyses.common.kernel_classes`' (docs/analysis.md).

GPU time = the summed ``dur`` (µs) of every kernel, memcpy and memset in the selection; ``pct``
columns are percentages of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from trace_report.analyses.common.kernel_classes import (  # noqa: F401  (the names flags' callers import from here)
    CLASSES_TABLE,
    HEADLINE_CLASSES,
    SUMMARY_COLUMNS,
    classes_relation,
    flag_rows,
    known_classes,
    rules,
    summary_of_rows,
)
from trace_report.analyses.flags import FlagsOptions
from trace_report.store.tracedb import TraceDB

RULES_VERSION = "1"
FLAG_COLUMNS = ["rank", "name", "classes", "count", "total_us", "pct_of_gpu_time"]
EXPLAIN_COLUMNS = ["class", "rule_id", "pattern", "requires", "min_cc", "rationale", "source", "names", "count",
                   "total_us"]


@dataclass
class FlagsResult:
    """``frame``: one row per flagged name; ``summary``: per class; ``explain``: per matched rule."""

    frame: pd.DataFrame
    summary: pd.DataFrame
    explain: pd.DataFrame
    notes: list[str] = field(default_factory=list)



def classify(db: TraceDB, names: list[str], compute_capability: float | None = None) -> pd.DataFrame:
    """Classes of arbitrary names with the same rules (macro ``kernel_class_matches``): columns
    ``name``, ``classes`` (list, rule order), ``rules`` (rule ids), for a GPU of that compute
    capability (None = unknown: rules with ``min_cc`` do not apply)."""
    con = db.con
    order = {c: i for i, c in enumerate(dict.fromkeys(rules(db)["class"]))}
    rows = con.execute("SELECT n, kernel_class_matches(n, $cc) FROM unnest($names) AS t(n)",
                       {"names": list(names), "cc": compute_capability}).fetchall()
    out = pd.DataFrame({
        "name": [n for n, _ in rows],
        "classes": [sorted({x["class"] for x in m or []}, key=order.get) for _, m in rows],
        "rules": [[x["rule_id"] for x in m or []] for _, m in rows],
    })
    return out[["name", "classes", "rules"]]


def check_options(db: TraceDB, opts: FlagsOptions) -> list[str]:
    """The known classes in rule order; raises for an unknown class or rank in ``opts``
    (:func:`~trace_report.analyses.common.kernel_classes.known_classes`)."""
    return known_classes(db, opts.classes, opts.rank)


def _rows(long: pd.DataFrame, opts: FlagsOptions, order: dict[str, int]) -> pd.DataFrame:
    per = long.drop_duplicates(["rank", "trace_id", "name", "class"])
    g = per.groupby(["rank", "name"], dropna=False, sort=False)
    names = g.agg(classes=("class", lambda c: sorted(set(c), key=order.get))).reset_index()
    counts = per.drop_duplicates(["rank", "trace_id", "name"]).groupby(["rank", "name"], dropna=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), gpu_us=("gpu_us", "first")).reset_index()
    out = names.merge(counts, on=["rank", "name"])
    if opts.classes:
        # a boolean mask even with no rows (an empty object Series would select columns, not rows)
        out = out.loc[out["classes"].map(lambda cs: any(c in opts.classes for c in cs)).astype(bool)]
    out["pct_of_gpu_time"] = 100.0 * out["total_us"] / out["gpu_us"]
    out = out.sort_values(["rank", "total_us", "name"], ascending=[True, False, True], na_position="first")
    if opts.limit is not None:
        out = out.groupby("rank", dropna=False, sort=False).head(opts.limit)
    out["count"] = out["count"].astype("int64")
    return out[FLAG_COLUMNS].reset_index(drop=True)


def _explain(long: pd.DataFrame, db: TraceDB, shown: set[str]) -> pd.DataFrame:
    table = rules(db)
    per = long.drop_duplicates(["rank", "trace_id", "name", "rule_id"])
    used = per.groupby("rule_id").agg(names=("name", "nunique"), count=("count", "sum"),
                                      total_us=("total_us", "sum")).reset_index()
    out = table.merge(used, on="rule_id")
    out = out[out["class"].isin(shown)] if shown else out
    return out.sort_values("priority")[EXPLAIN_COLUMNS].reset_index(drop=True)


def flags_table(db: TraceDB, options: FlagsOptions) -> FlagsResult:
    """:func:`flags` as the command shows it (the declaration's compute): ``frame`` is the rule
    table with ``explain``, the per-class summary with ``summary``, else the flagged names."""
    return shown(flags(db, options), options)


def shown(result: FlagsResult, options: FlagsOptions) -> FlagsResult:
    """``result`` with ``frame`` the table the options ask for (:func:`flags_table`)."""
    frame = result.explain if options.explain else result.summary if options.summary else result.frame
    return FlagsResult(frame, result.summary, result.explain, result.notes)


def flags(db: TraceDB, options: FlagsOptions | None = None) -> FlagsResult:
    """Flagged GPU operation names with their classes, a per-class summary and the rules used.

    ``frame``: ``rank`` (only with ``by_rank``), ``name``, ``classes`` (list), ``count``,
    ``total_us`` (summed ``dur``), ``pct_of_gpu_time`` (view ``gpu_time``). ``summary``: per class
    ``count`` (GPU ops), ``names`` (distinct), ``total_us``, ``pct_of_gpu_time`` and ``gpu_us`` (the denominator); the
    classes in :data:`HEADLINE_CLASSES` always appear. ``explain``: every rule that matched, with
    its pattern, rationale and source. Raises :class:`InputError` for an unknown class or rank.
    """
    opts = options or FlagsOptions()
    known, long = _checked_rows(db, opts)
    return flags_from_rows(db, long, opts, known)


def _checked_rows(db: TraceDB, opts: FlagsOptions) -> tuple[list[str], pd.DataFrame]:
    """The known classes (:func:`check_options`: errors for an unknown class or rank) and the
    :func:`flag_rows` of ``opts``."""
    known = check_options(db, opts)
    return known, flag_rows(db.con, opts.rank, opts.by_rank, None if opts.trace_ids is None else list(opts.trace_ids))


def flags_from_rows(db: TraceDB, long: pd.DataFrame, opts: FlagsOptions, known: list[str]) -> FlagsResult:
    """The :class:`FlagsResult` of ``kernel_flags.sql``'s rows (``db`` gives the rule table)."""
    long, summary, notes = summary_of_rows(long, opts.by_rank, known)
    frame = _rows(long, opts, {c: i for i, c in enumerate(known)})
    shown = set(opts.classes) or {c for cs in frame["classes"] for c in cs}
    if not opts.by_rank:
        frame = frame.drop(columns="rank")
    return FlagsResult(frame, summary, _explain(long, db, shown), notes)


def flags_summary(db: TraceDB, options: FlagsOptions | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``flags(db, options).summary`` and ``.notes`` alone (the same rows, from the same
    ``kernel_flags.sql`` rows), without the per-name table and the rules used: what the report's
    class charts read (``advise`` reads
    :func:`~trace_report.analyses.common.kernel_classes.class_summary`). Errors as :func:`flags`."""
    opts = options or FlagsOptions()
    known, long = _checked_rows(db, opts)
    _, summary, notes = summary_of_rows(long, opts.by_rank, known)
    return summary, notes
