"""``TraceDB``: the one handle every analysis takes (``docs/architecture.md``).

A TraceDB is a DuckDB connection with the schema of ``docs/schema.md`` behind it: the
``traces`` table, the ``events`` TEMP view (Parquet pieces beside a database, or Arrow tables in
memory), the analysis views, the ncu tables when a report was loaded, and the run tables
(``runs``, ``run_traces``, ...). It is made by :func:`trace_report.open` (or the ingest); the
analyses in :mod:`trace_report.analyses` are functions ``fn(db: TraceDB, options) -> Result``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb

from trace_report.errors import UsageError
from trace_report.store.run_identity import Run, identify_runs
from trace_report.store.run_scope import scoped


@dataclass
class IngestSummary:
    """What opening or ingesting did: (trace_id, label) of new traces, (label, reason) of files
    seen and not read, warnings and notes for the user, Nsight Compute reports (label, launches),
    and the events each new trace stores (trace_id -> rows, ``traces.n_complete_events``)."""

    ingested: list[tuple[int, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ncu_reports: list[tuple[str, int]] = field(default_factory=list)
    stored_events: dict[int, int] = field(default_factory=dict)


CLOSED = "this TraceDB is closed: open the traces again with trace_report.open(...)"


class TraceDB:
    """Traces in DuckDB behind one connection.

    ``con`` is the duckdb connection itself; :meth:`sql` returns a DuckDB relation
    (``.df()``, ``.arrow()``, ``.fetchall()``); ``summary`` says what was read to make it.
    After :meth:`close` every use raises :class:`~trace_report.errors.UsageError` saying so.

    Threads: a DuckDB connection runs one call at a time and a cursor (``con.cursor()``) is a
    new connection, which does not see this one's TEMP views (``events``, the analysis views).
    So :meth:`sql` called from a thread other than the one that opened the handle runs its
    query whole under a lock and returns a relation over the fetched rows (on a cursor of its
    own); the opening thread's relations stay lazy. Analyses run from several threads at once
    need a handle each (``trace_report.open`` per thread).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, summary: IngestSummary | None = None) -> None:
        self._con: duckdb.DuckDBPyConnection | None = con
        self.summary = summary or IngestSummary()
        self._runs: list[Run] | None = None
        self._thread = threading.get_ident()
        self._lock = threading.RLock()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection; :class:`~trace_report.errors.UsageError` once closed."""
        if self._con is None:
            raise UsageError(CLOSED)
        return self._con

    @con.setter
    def con(self, value: duckdb.DuckDBPyConnection) -> None:
        self._con = value

    def runs(self) -> list[Run]:
        """The runs of these traces (:mod:`trace_report.store.run_identity`: run.json, one
        distributed job's ``distributedInfo``, rank files of one folder, else one run per file),
        ordered by first ``trace_id``; also creates the TEMP table ``trace_runs`` (``trace_id``,
        ``run``, ``run_source``). Computed once per handle."""
        if self._runs is None:
            self._runs = identify_runs(self.con)
        return self._runs

    def run(self, label: str) -> Run:
        """The run labelled ``label``; :class:`~trace_report.errors.UsageError` (exit 2) listing
        the runs when there is none."""
        for r in self.runs():
            if r.label == label:
                return r
        raise UsageError(f"no run {label!r} (runs: {', '.join(r.label for r in self.runs()) or 'none'})")

    @contextmanager
    def scope(self, trace_ids: list[int]) -> Iterator[TraceDB]:
        """This handle with ``traces`` and ``events`` narrowed to ``trace_ids`` inside the block
        (:func:`trace_report.store.run_scope.scoped`): every analysis then sees those traces alone.
        A run's traces: ``with db.scope(db.run(label).trace_ids) as part: ...``."""
        known = {int(t) for (t,) in self.con.execute("SELECT trace_id FROM traces").fetchall()}
        unknown = [t for t in trace_ids if t not in known]
        if unknown:
            raise UsageError(f"no trace with id {', '.join(map(str, unknown[:10]))} "
                             f"(trace ids: {_id_ranges(sorted(known)) or 'none'})")
        with scoped(self.con, trace_ids):
            yield self

    def sql(self, query: str, params: object = None) -> duckdb.DuckDBPyRelation:
        """Run ``query`` against the schema and return the relation (None for a statement
        without rows). From another thread than the opening one: the rows fetched whole under
        a lock, as a relation on a cursor of their own (the class docstring says why)."""
        con = self.con
        if threading.get_ident() == self._thread:
            return con.sql(query, params=params)
        with self._lock:
            rel = con.sql(query, params=params)
            table = rel.to_arrow_table() if rel is not None else None
        return con.cursor().from_arrow(table) if table is not None else None  # type: ignore[return-value]

    def scalar(self, query: str, params: object = None) -> object:
        """The first column of the first row of ``query`` (None when it returns no row)."""
        con = self.con
        with self._lock:
            row = con.execute(query, params).fetchone()
        return row[0] if row else None

    def has_table(self, name: str) -> bool:
        """Whether a table or view of that name is visible on this connection."""
        return bool(self.scalar(
            "SELECT count(*) FROM (SELECT table_name AS n FROM duckdb_tables() UNION ALL "
            "SELECT view_name FROM duckdb_views()) WHERE n = ?", [name]))

    def ranks(self) -> list[int]:
        """The ranks of the traces, ascending."""
        return [int(r) for (r,) in self.con.execute(
            "SELECT DISTINCT rank FROM traces WHERE rank IS NOT NULL ORDER BY 1").fetchall()]

    def check_rank(self, rank: int | None) -> None:
        """Raise :class:`~trace_report.errors.UsageError` (exit 2) when ``rank`` is given and no
        trace has it; the message lists the ranks there are."""
        if rank is None:
            return
        ranks = self.ranks()
        if rank not in ranks:
            raise UsageError(f"no trace of rank {rank} (ranks: {', '.join(map(str, ranks)) or 'none'})")

    def __repr__(self) -> str:
        """``<TraceDB: 2 traces, 1 run, ranks 0-1, NVIDIA A100-SXM4-80GB, 6 ProfilerSteps>``:
        what a notebook shows for the handle (table ``traces``, view ``steps``, :meth:`runs`);
        ``closed`` once closed."""
        try:
            n, lo, hi, ranks, gpus = self.con.execute(
                "SELECT count(*), min(rank), max(rank), count(DISTINCT rank), "
                "string_agg(DISTINCT device_name, ', ' ORDER BY device_name) FROM traces").fetchone()
            steps = self.scalar("SELECT count(*) FROM steps")
            runs = len(self.runs())
        except (duckdb.Error, TypeError, UsageError):
            return f"<{type(self).__name__}: closed>"
        if ranks == 0:
            rank_text = "no rank"
        elif lo == hi:
            rank_text = f"rank {lo}"
        else:
            rank_text = f"ranks {lo}-{hi}" if ranks == hi - lo + 1 else f"{ranks} ranks {lo}..{hi}"
        run_text = f"{runs} run{'s' * (runs != 1)}, "
        return (f"<{type(self).__name__}: {n} trace{'s' * (n != 1)}, {run_text}{rank_text}, "
                f"{gpus or 'no GPU'}, {steps} ProfilerStep{'s' * (steps != 1)}>")

    def close(self) -> None:
        """Close the connection; closing again does nothing."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> TraceDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _id_ranges(ids: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    out: list[str] = []
    for n in ids:
        if out and n == int(out[-1].rsplit("-", 1)[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)
