"""The kernel-class summary: which share of GPU time is tensor-core, TF32, layout conversion, ...
per class and rank. What ``trace-report flags --summary`` shows (its declaration:
:mod:`trace_report.analyses.flags`), ``advise`` and the report's class charts read.

The rule table is the SQL view ``kernel_class_rules`` (``store/sql/views_kernel_classes.sql``):
each rule has a pattern, the class it gives, a rationale and a source. ``kernel_classes`` (view)
lists the classes of every GPU operation name per trace; ``kernel_flags.sql`` (beside this
module) counts them per (rank, trace, name, class, rule), with the GPU time of the selection.

GPU time = the summed ``dur`` (µs) of every kernel, memcpy and memset in the selection; ``pct``
columns are percentages of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pandas as pd

from trace_report.analyses.common.gpu_op_names import names_relation
from trace_report.errors import InputError, UsageError
from trace_report.store.kept_views import kept_as_table
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

# Classes always present in the summary (in this order), even at zero.
HEADLINE_CLASSES = ("tf32", "tf32_inferred", "tensor_core", "layout_conversion")
SUMMARY_COLUMNS = ["rank", "class", "count", "names", "total_us", "pct_of_gpu_time", "gpu_us"]


def rules(db: TraceDB) -> pd.DataFrame:
    """The rule table: ``version``, ``priority``, ``rule_id``, ``class``, ``pattern``, ``requires``,
    ``min_cc``, ``rationale``, ``source`` (in priority order)."""
    return db.con.execute("SELECT * FROM kernel_class_rules ORDER BY priority").df()


def known_classes(db: TraceDB, classes: tuple[str, ...] = (), rank: int | None = None) -> list[str]:
    """The known classes in rule order; raises :class:`InputError` for a class of ``classes`` that
    is not one, :class:`UsageError` for a ``rank`` no trace has."""
    known = list(dict.fromkeys(rules(db)["class"]))
    bad = [c for c in classes if c not in known]
    if bad:
        raise InputError(f"unknown class {', '.join(bad)} (classes: {', '.join(known)})")
    if rank is not None:
        ranks = [r for (r,) in db.con.execute("SELECT DISTINCT rank FROM traces ORDER BY 1").fetchall()]
        if rank not in ranks:
            raise UsageError(f"no trace of rank {rank} (ranks: {', '.join(map(str, ranks)) or 'none'})")
    return known


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


def summary_of_rows(long: pd.DataFrame, by_rank: bool,
                    known: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(the rows with a name, the per-class summary, the notes) of ``kernel_flags.sql``'s rows
    (:func:`flag_rows`); the summary's ``rank`` column only with ``by_rank``."""
    totals = long[long["name"].isna()][["rank", "gpu_us"]]
    long = long[long["name"].notna()]
    summary = _summary(long, totals, known)
    notes = []
    if totals.empty or not totals["gpu_us"].fillna(0).gt(0).any():
        notes.append("no GPU activity (kernels, memcpy, memset) in the selection: nothing to classify")
    return long, summary if by_rank else summary.drop(columns="rank"), notes


def class_summary(db: TraceDB, rank: int | None = None, by_rank: bool = False,
                  trace_ids: tuple[int, ...] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Per class (and rank with ``by_rank``) of the traces of ``rank`` (None = all) among
    ``trace_ids`` (None = all): ``count`` (GPU ops), ``names`` (distinct), ``total_us``,
    ``pct_of_gpu_time`` and ``gpu_us`` (the denominator); the classes in :data:`HEADLINE_CLASSES`
    always appear. And the notes. Raises :class:`UsageError` for an unknown rank."""
    known = known_classes(db, (), rank)
    long = flag_rows(db.con, rank, by_rank, None if trace_ids is None else list(trace_ids))
    _, summary, notes = summary_of_rows(long, by_rank, known)
    return summary, notes
