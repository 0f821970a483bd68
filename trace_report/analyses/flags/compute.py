"""The computation of ``flags`` (its declaration: the package's ``__init__``). Kernel classes
and flags: which GPU time is tensor-core, TF32, layout conversion, ...

The rule table is the SQL view ``kernel_class_rules`` (``sql/views_kernel_classes.sql``,
:data:`RULES_VERSION`): each rule has a pattern, the class it gives, a rationale and a source.
``kernel_classes`` (view) lists the classes of every GPU operation name per trace; this module
ranks the flagged names and summarises the shares of GPU time (docs/analysis.md).

GPU time = the summed ``dur`` (µs) of every kernel, memcpy and memset in the selection; ``pct``
columns are percentages of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb
import pandas as pd

from trace_report.analyses.common.gpu_op_names import names_relation
from trace_report.analyses.flags import FlagsOptions
from trace_report.errors import InputError, UsageError
from trace_report.store.kept_views import kept_as_table
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

RULES_VERSION = "1"
# Classes always present in the summary (in this order), even at zero.
HEADLINE_CLASSES = ("tf32", "tf32_inferred", "tensor_core", "layout_conversion")
FLAG_COLUMNS = ["rank", "name", "classes", "count", "total_us", "pct_of_gpu_time"]
SUMMARY_COLUMNS = ["rank", "class", "count", "names", "total_us", "pct_of_gpu_time", "gpu_us"]
EXPLAIN_COLUMNS = ["class", "rule_id", "pattern", "requires", "min_cc", "rationale", "source", "names", "count",
                   "total_us"]


@dataclass
class FlagsResult:
    """``frame``: one row per flagged name; ``summary``: per class; ``explain``: per matched rule."""

    frame: pd.DataFrame
    summary: pd.DataFrame
    explain: pd.DataFrame
    notes: list[str] = field(default_factory=list)



def rules(db: TraceDB) -> pd.DataFrame:
    """The rule table: ``version``, ``priority``, ``rule_id``, ``class``, ``pattern``, ``requires``,
    ``min_cc``, ``rationale``, ``source`` (in priority order)."""
    return db.con.execute("SELECT * FROM kernel_class_rules ORDER BY priority").df()


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
    """The known classes in rule order; raises for an unknown class or rank in ``opts``."""
    known = list(dict.fromkeys(rules(db)["class"]))
    bad = [c for c in opts.classes if c not in known]
    if bad:
        raise InputError(f"unknown class {', '.join(bad)} (classes: {', '.join(known)})")
    if opts.rank is not None:
        ranks = [r for (r,) in db.con.execute("SELECT DISTINCT rank FROM traces ORDER BY 1").fetchall()]
        if opts.rank not in ranks:
            raise UsageError(f"no trace of rank {opts.rank} (ranks: {', '.join(map(str, ranks)) or 'none'})")
    return known


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


def _summary(long: pd.DataFrame, totals: pd.DataFrame, known: list[str]) -> pd.DataFrame:
    """Per rank of ``totals`` (its rows' order) and class (:data:`HEADLINE_CLASSES`, then the other
    known classes present, in ``known``'s order): one merge of the (rank, class) grid with the
    aggregates, not a frame per rank (a cost per rank that dominated ``advise`` on many ranks)."""
    per = long.drop_duplicates(["rank", "trace_id", "name", "class"])
    agg = per.groupby(["rank", "class"], dropna=False).agg(
        count=("count", "sum"), names=("name", "nunique"), total_us=("total_us", "sum")).reset_index()
    present = [c for c in known if c in set(agg["class"])]
    classes = list(dict.fromkeys([*HEADLINE_CLASSES, *present]))
    if totals.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    n = len(classes)
    ranks = totals["rank"].repeat(n).to_numpy()
    grid = pd.DataFrame({"rank": ranks.astype("int64") if ranks.dtype.kind in "iu" else ranks,
                         "class": classes * len(totals), "gpu_us": totals["gpu_us"].repeat(n).to_numpy()})
    out = grid.merge(agg, on=["rank", "class"], how="left")  # rows in the grid's order; NaN ranks match
    out["count"] = out["count"].fillna(0).astype("int64")
    out["names"] = out["names"].fillna(0).astype("int64")
    out["total_us"] = out["total_us"].fillna(0.0)
    gpu = out["gpu_us"]
    out["pct_of_gpu_time"] = (100.0 * out["total_us"] / gpu).where(gpu.notna() & (gpu != 0), float("nan"))
    return out[SUMMARY_COLUMNS]


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


def flag_rows(con: duckdb.DuckDBPyConnection, rank: int | None, by_rank: bool,
              trace_ids: list[int] | None) -> pd.DataFrame:
    """``kernel_flags.sql``'s rows for the traces of ``rank`` (None = all) among ``trace_ids``
    (None = all): per (rank, trace, name, class, rule) ``count`` and ``total_us``, and the GPU
    time of the selection (``gpu_us``; rows without a name). Read from the ``gpu_op_names`` rows
    kept beside the database where it keeps them (:mod:`trace_report.analyses.common.gpu_op_names`)."""
    ids = [t for (t,) in con.execute(
        "SELECT trace_id FROM traces WHERE ($rank IS NULL OR rank = $rank) "
        "AND ($ids IS NULL OR list_contains($ids, trace_id)) ORDER BY trace_id",
        {"rank": rank, "ids": trace_ids}).fetchall()]
    with names_relation(con, ids) as names, classes_relation(con, names) as classes:
        return con.execute(sql_text("kernel_flags.sql", __package__), {"names": names, "classes": classes, "rank": rank,
                                                          "by_rank": by_rank, "trace_ids": trace_ids}).df()


CLASSES_TABLE = "trace_report_flag_classes"
"""The TEMP table :func:`classes_relation` makes for one query where the ``kernel_classes`` view is
not kept as a table."""


@contextmanager
def classes_relation(con: duckdb.DuckDBPyConnection, names: str) -> Iterator[str]:
    """The name of a relation holding ``kernel_classes_of(names)``' rows (``names``: a relation of
    ``gpu_op_names``' rows) for the length of the block: the ``kernel_classes`` view where a command
    keeps it as a table (advise, the report: :data:`~trace_report.store.kept_views.SHARED_VIEWS`), whose
    rows are those of every trace's names (``gpu_op_names``, kept or not, are one trace's GPU
    operations); else a TEMP table of ``kernel_classes_of(names)``, dropped at the end.

    Why: planning the classifying macro (every rule's regular expression, the vetoes) costs DuckDB
    the same whatever the number of names; a report asked for the classes three times (its flags twice,
    advise's CUDA-core GEMMs once) and ``advise`` twice, now planned once."""
    if kept_as_table(con, "kernel_classes"):
        yield "kernel_classes"
        return
    con.execute(f"CREATE OR REPLACE TEMP TABLE {CLASSES_TABLE} AS SELECT * FROM kernel_classes_of($names)",
                {"names": names})
    try:
        yield CLASSES_TABLE
    finally:
        con.execute(f"DROP TABLE IF EXISTS {CLASSES_TABLE}")


def flags_from_rows(db: TraceDB, long: pd.DataFrame, opts: FlagsOptions, known: list[str]) -> FlagsResult:
    """The :class:`FlagsResult` of ``kernel_flags.sql``'s rows (``db`` gives the rule table)."""
    long, summary, notes = _summary_of_rows(long, opts, known)
    frame = _rows(long, opts, {c: i for i, c in enumerate(known)})
    shown = set(opts.classes) or {c for cs in frame["classes"] for c in cs}
    if not opts.by_rank:
        frame = frame.drop(columns="rank")
    return FlagsResult(frame, summary, _explain(long, db, shown), notes)


def flags_summary(db: TraceDB, options: FlagsOptions | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``flags(db, options).summary`` and ``.notes`` alone (the same rows, from the same
    ``kernel_flags.sql`` rows), without the per-name table and the rules used: what ``advise`` and
    the report's class charts read. Errors as :func:`flags`."""
    opts = options or FlagsOptions()
    known, long = _checked_rows(db, opts)
    _, summary, notes = _summary_of_rows(long, opts, known)
    return summary, notes


def _summary_of_rows(long: pd.DataFrame, opts: FlagsOptions,
                     known: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(the rows with a name, the per-class summary, the notes) of ``kernel_flags.sql``'s rows."""
    totals = long[long["name"].isna()][["rank", "gpu_us"]]
    long = long[long["name"].notna()]
    summary = _summary(long, totals, known)
    notes = []
    if totals.empty or not totals["gpu_us"].fillna(0).gt(0).any():
        notes.append("no GPU activity (kernels, memcpy, memset) in the selection: nothing to classify")
    return long, summary if opts.by_rank else summary.drop(columns="rank"), notes
