"""Analyses over several runs: one set of rows per run, with a ``run`` column, never summed.

The input of a command may hold unrelated traces (a folder of traces from five GPU models, two
demo captures). :meth:`TraceDB.runs <trace_report.store.tracedb.TraceDB.runs>` says which traces
belong together (:mod:`trace_report.store.run_identity`); :func:`per_run` runs the analysis on
each run alone (:meth:`TraceDB.scope`) and :func:`stacked` puts the tables one after the other
with the run's label as the first column. With one run the rows are those of the analysis as
it is (no ``run`` column). ``merge`` (``--merge-runs``) analyses everything as one run (the note
says what was merged); ``run`` (``--run LABEL``) analyses that run alone. The command line and the
notebook methods both go through these functions, so both keep runs apart the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from trace_report.errors import UsageError
from trace_report.store.rows import Rows

if TYPE_CHECKING:
    from trace_report.store.tracedb import TraceDB

R = TypeVar("R")


@dataclass
class PerRun(Generic[R]):
    """The result of each run (``label`` None: one run, or merged, or chosen with ``--run``)
    and the notes about the runs themselves (what was merged, duplicate ranks)."""

    results: list[tuple[str | None, R]]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def several(self) -> bool:
        return len(self.results) > 1 or (len(self.results) == 1 and self.results[0][0] is not None)


def per_run(db: TraceDB, fn: Callable[[TraceDB], R], *, run: str | None = None, merge: bool = False) -> PerRun[R]:
    """``fn(db)`` on each run of ``db`` alone (:meth:`TraceDB.scope`), or once when there is one
    run, ``merge`` is set, or ``run`` names one.

    A :class:`~trace_report.errors.UsageError` of one run (``--rank 3`` where that run has no
    rank 3) skips that run with a note; raised when every run gives one."""
    runs = db.runs()
    warnings = [w for r in runs for w in r.warnings]
    if run is not None:
        chosen = db.run(run)
        with db.scope(chosen.trace_ids):
            return PerRun([(None, fn(db))], warnings=warnings)
    if merge or len(runs) <= 1:
        merged = ([f"--merge-runs: {len(runs)} runs analysed as one: {', '.join(r.label for r in runs)}"]
                  if merge and len(runs) > 1 else [])
        return PerRun([(None, fn(db))], notes=merged, warnings=warnings)
    results: list[tuple[str | None, R]] = []
    skipped: list[tuple[str, UsageError]] = []
    for r in runs:
        with db.scope(r.trace_ids):
            try:
                results.append((r.label, fn(db)))
            except UsageError as exc:
                skipped.append((r.label, exc))
    if not results:
        raise skipped[0][1]
    notes = [f"{len(runs)} runs, analysed apart (a run column; --merge-runs to sum them, --run LABEL for one)"]
    notes += [f"run {label}: skipped ({exc})" for label, exc in skipped]
    return PerRun(results, notes=notes, warnings=warnings)


def on_run(db: TraceDB, fn: Callable[[TraceDB], R], run: str | None = None) -> R:
    """``fn(db)`` on the whole input, or on the run ``run`` alone: a command that reads its input
    as one (``slice``). Raises :class:`~trace_report.errors.UsageError` for an unknown ``run``."""
    if run is None:
        return fn(db)
    with db.scope(db.run(run).trace_ids):
        return fn(db)


@contextmanager
def side_run(db: TraceDB, side: str, run: str | None = None, merge: bool = False) -> Iterator[TraceDB]:
    """``db``, one side (``A``, ``B``) of a command that compares two inputs, narrowed to the run
    ``run`` for the block (:meth:`TraceDB.scope`); without ``run``, a side holding several runs
    needs ``merge`` (analysed as one). Raises :class:`~trace_report.errors.UsageError` for an
    unknown run, or listing the runs when there are several and neither is given."""
    if run is not None:
        with db.scope(db.run(run).trace_ids):
            yield db
        return
    runs = db.runs()
    if len(runs) > 1 and not merge:
        shown = ", ".join(r.label for r in runs[:12]) + (", ..." if len(runs) > 12 else "")
        raise UsageError(f"{side} holds {len(runs)} runs ({shown}): choose one with --run-{side.lower()} LABEL, "
                         "or compare them merged with --merge-runs")
    yield db


def stacked(per: PerRun[Any], table: Callable[[Any], Any], limit: int | None = None) -> Any:
    """The tables ``table(result)`` of every run one after the other, with a first column ``run``
    when there are several (a :class:`~trace_report.store.rows.Rows` or a pandas DataFrame,
    whichever ``table`` gives); ``limit``: at most that many rows of each run."""
    tables = [(label, table(result)) for label, result in per.results]
    if limit is not None:
        tables = [(label, t.head(limit)) for label, t in tables]
    if not per.several:
        return tables[0][1]
    first = tables[0][1]
    if isinstance(first, Rows):  # runs may differ in columns (a CPU-only run: pct_of_cpu_self_time)
        typed: dict[str, str] = {}
        for _, rows in tables:
            for name, typ in zip(rows.columns, rows.types, strict=True):
                typed.setdefault(name, typ)
        columns = list(typed)
        data = []
        for label, rows in tables:
            where = [rows.columns.index(c) if c in rows.columns else None for c in columns]
            data += [(label, *(None if i is None else row[i] for i in where)) for row in rows.data]
        return Rows(["run", *columns], ["VARCHAR", *typed.values()], data)
    import pandas as pd  # the analysis gave a DataFrame: pandas is loaded already

    frames = [t.assign(run=label)[["run", *[c for c in t.columns if c != "run"]]] for label, t in tables]
    frames = [f for f in frames if not f.empty] or frames[:1]
    return pd.concat(frames, ignore_index=True)


def run_notes(per: PerRun[Any], notes_of: Callable[[Any], list[str]]) -> list[str]:
    """The notes of every run: a note every run gives once, the others as ``run LABEL: note``;
    the notes about the runs first."""
    lists = [(label, notes_of(result)) for label, result in per.results]
    if not per.several:
        return per.notes + lists[0][1]
    common = [n for n in lists[0][1] if all(n in notes for _, notes in lists)]
    out = list(per.notes) + common
    for label, notes in lists:
        out += [f"run {label}: {n}" for n in notes if n not in common]
    return out


@dataclass
class Table:
    """What an analysis gave over every run: ``frame`` (the runs' rows stacked, with a ``run``
    column when there are several), ``notes`` (:func:`run_notes`) and ``warnings`` about the
    runs themselves (duplicate ranks)."""

    frame: Any
    notes: list[str]
    warnings: list[str]


def tabulate(db: TraceDB, analysis: Callable[[TraceDB], Any], *, run: str | None = None, merge: bool = False,
             limit: int | None = None) -> Table:
    """The one funnel of a table command, shared by the command line and the notebook methods:
    ``analysis(db)`` (a result with ``.frame`` and ``.notes``) on each run (:func:`per_run`),
    the frames stacked (:func:`stacked`, at most ``limit`` rows a run) and the notes joined
    (:func:`run_notes`). Raises :class:`~trace_report.errors.UsageError` for an unknown ``run``."""
    per = per_run(db, analysis, run=run, merge=merge)
    return Table(stacked(per, lambda r: r.frame, limit), run_notes(per, lambda r: r.notes), list(per.warnings))
