"""Ingest Chrome/Kineto trace files (``docs/schema.md``).

Pipeline: find trace files -> cut each file's ``traceEvents`` into pieces -> decode and
normalise each piece into Arrow (in worker processes when the input is large) -> write it as a
Parquet file beside the database (or keep it in memory) -> one ``traces`` row per file.
A plain ``.json`` file is cut by byte ranges that workers read themselves, so it is never
held whole; a ``.json.gz`` file is decompressed in one stream whose pieces are decoded in
parallel, at most ``INFLIGHT`` pieces at a time, each piece's bytes dropped once its Parquet
piece is written (only a piece cut inside an event is kept, to merge with the next one); small
files are decoded one file per worker. Jobs, their decoding and the order of pieces are in
:mod:`trace_report.ingest.decoding`; this module plans them and writes the catalog.

The jobs run on an engine (:mod:`trace_report.ingest.engine`: decoding threads or processes by default,
or Ray tasks); whatever the engine, this module (the driver) writes the ``traces`` rows and
``event_files``, under the database lock, through an atomic copy of the database. Into a new
database the jobs are submitted before DuckDB is imported (:mod:`trace_report.ingest.start`:
ids 1..N, nothing to skip), so that loading it, its connection and schema overlap them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa

from trace_report import arrowcalls as ac
from trace_report import storage
from trace_report.errors import InputError, TraceFormatError
from trace_report.formats.kineto import PIECE_BYTES, TraceEnvelope
from trace_report.formats.kineto_metadata import RunContext, device_for, trace_facts
from trace_report.formats.nsys import read_nsys_sqlite
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.ingest.catalog import Catalog
from trace_report.ingest.decoding import JobResult, decode_file
from trace_report.ingest.digests import sha256_file
from trace_report.ingest.engine import Engine, JobFuture
from trace_report.ingest.files import check_unchanged, source_decoded_size, stored_size
from trace_report.ingest.ncu import load_ncu
from trace_report.ingest.normalize import PieceStats, count_duplicates, describe, implausible_events
from trace_report.ingest.start import (
    IngestOptions,
    Prestart,
    Started,
    begin_ingest,
    local_engine_for,
    piece_bytes_for,
    submit_files,
)
from trace_report.ingest.versions import Versions
from trace_report.inputs import InputKind, Resolution, Source
from trace_report.manifest import manifest_for_trace
from trace_report.pathtext import printable
from trace_report.storage import Location
from trace_report.store.database import atomic_database, clean_leftovers, create_schema
from trace_report.store.memory import MemoryStore
from trace_report.store.pieces import ParquetStore, read_piece, write_parquet
from trace_report.store.step_numbers import STEP_MAX
from trace_report.store.tracedb import IngestSummary
from trace_report.store.views import create_views

__all__ = ["IngestOptions", "decode_file", "finish_ingest", "ingest_sources", "ingest_to_database", "open_in_memory"]

class Ingest:
    """One ingest: sources -> jobs -> ``traces`` rows and event files/tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection, opts: IngestOptions,
                 store: ParquetStore | MemoryStore, piece_bytes: int = PIECE_BYTES,
                 early: Prestart | None = None) -> None:
        self.con = con
        self.early = early
        self.opts = opts
        self.piece_bytes = piece_bytes
        self.store = store
        self.summary = IngestSummary()
        self.catalog = Catalog(con, store)
        self.versions = Versions(self.catalog, self.summary, opts.force, opts.append_versions)
        self.next_id = self.catalog.last_trace_id() + 1
        self.total = 0
        self.done = 0

    def run(self, sources: list[Source], pool: Engine | None) -> None:
        ncu_kinds = (InputKind.ncu_report, InputKind.ncu_csv)
        for src in (s for s in sources if s.kind in ncu_kinds):
            self.summary.ncu_reports.append((src.label, load_ncu(self.con, src.path, src.label, self.summary.warnings)))
        sources = [s for s in sources if s.kind not in ncu_kinds]
        todo = []
        for src in sources:
            if self.versions.unchanged(src):
                self.summary.skipped.append((src.label, "already ingested"))
            else:
                todo.append(src)
        self.total = sum(stored_size(s) for s in todo)
        ids = {}
        for src in todo:
            ids[src] = self.next_id
            self.next_id += 1
        if self.early is None:
            futures = submit_files(todo, ids, pool, self.opts, self.piece_bytes, self.store)
        elif self.early.ids == ids:
            futures = self.early.futures
        else:  # prestart() runs only for a new database: its ids are these by construction
            raise RuntimeError("jobs submitted before the database opened carry other trace ids")
        for src in todo:
            try:
                self._source(src, ids[src], futures, pool)
            except InputError as exc:
                raise _named(_changed_or(exc, src), src) from exc
            self.done += stored_size(src)
            if self.opts.progress:
                self.opts.progress(self.done, self.total)
        self.catalog.flush()

    def _source(self, src: Source, trace_id: int, futures: dict[Source, tuple[Location | None, JobFuture]],
                pool: Engine | None) -> None:
        if src.kind is InputKind.nsys_sqlite:
            self._nsys_file(trace_id, src)
        elif self.early is not None and src is self.early.driven:
            envelope, results = self.early.decoded.result()
            self._finish(trace_id, src, envelope, [(job.out, r) for job, r in results])
        elif src in futures:
            out, future = futures[src]
            result = future.result()
            if result.error is not None:
                raise result.error
            parts = result.parts if result.parts is not None else [(out, result)]
            if result.files is not None:  # a task elsewhere wrote these pieces: stored here by name
                parts = self._received(parts, result.files)
            self._finish(trace_id, src, result.envelope or TraceEnvelope(), parts, result.duplicates)
        else:
            self._one_file(trace_id, src, pool)

    def _received(self, parts: list[tuple[Location | None, JobResult]],
                  files: dict[str, bytes]) -> list[tuple[Location | None, JobResult]]:
        """The pieces a ``url`` job returned as bytes, written into this database's pieces folder."""
        assert isinstance(self.store, ParquetStore)
        out: list[tuple[Location | None, JobResult]] = []
        for path, r in parts:
            name = None if path is None else storage.name_of(path)
            out.append((None if name is None else self.store.put(name, files.pop(name)), r))
        return out

    def _one_file(self, trace_id: int, src: Source, pool: Engine | None) -> None:
        progress = self.opts.progress
        envelope, results = decode_file(
            src.location, src.label, trace_id, piece_bytes=self.piece_bytes, pool=pool,
            store=self.store if isinstance(self.store, ParquetStore) else None,
            on_piece=(lambda pos: progress(self.done + pos, self.total)) if progress else None,
            max_ratio=self.opts.max_ratio,
        )
        self._finish(trace_id, src, envelope, [(job.out, r) for job, r in results])

    def _nsys_file(self, trace_id: int, src: Source) -> None:
        """An nsys SQLite export: its kernels, runtime calls, memory ops and NVTX ranges."""
        facts, table = read_nsys_sqlite(src.path)
        n = table.num_rows
        full = pa.Table.from_arrays(
            [pa.array([trace_id] * n, pa.int32()), pa.array(range(n), pa.int64()),
             *[table.column(f.name) for f in EVENTS_SCHEMA if f.name not in ("trace_id", "event_id")]],
            schema=EVENTS_SCHEMA,
        )
        sha = sha256_file(src.path)
        reason = self.versions.skip_reason(src.label, sha)
        if reason:
            self.summary.skipped.append((src.label, reason))
            return
        self.versions.replace_previous(src.label)
        if isinstance(self.store, ParquetStore):
            out = self.store.path_for(trace_id, 0)
            write_parquet(full, out)
            self.catalog.add_files(trace_id, [(out, n)])
        else:
            self.store.add([full])
        _, _, size, mtime_ns = check_unchanged(src)
        self.catalog.add_trace(
            [trace_id, src.label, printable(src.run_dir.name) if src.run_dir else None, facts["rank"] or 0,
             facts["rank_source"] or "default", facts["world_size"], facts["host"], facts["device_name"],
             facts["compute_capability"], facts["torch_version"], facts["schema_version"], facts["n_events"],
             facts["n_complete_events"], facts["n_kernels"], sha, size, mtime_ns,
             facts["metadata"], facts["redacted_keys"]],
        )
        if facts["redacted_keys"]:  # as for Kineto traces: what the screen replaced is said
            keys = list(facts["redacted_keys"])
            self.summary.warnings.append(f"{src.label}: redacted {len(keys)} secret-looking value(s): "
                                         f"{', '.join(keys[:5])}")
        self.summary.ingested.append((trace_id, src.label))
        self.summary.stored_events[trace_id] = n

    def _finish(self, trace_id: int, src: Source, env: TraceEnvelope,
                parts: list[tuple[Location | None, JobResult]], duplicates: int | None = None) -> None:
        stats = PieceStats()
        for _, r in parts:
            stats.add(r.stats)
        if stats.n_events == 0:
            raise TraceFormatError(f"{src.label}: the trace has no events")
        if stats.n_missing_time and not stats.rows:  # one bad event is dropped; a trace of nothing else fails
            raise TraceFormatError(f"{src.label}: {stats.n_missing_time} complete events have no 'ts' or no 'dur'")
        if stats.n_not_objects:
            raise TraceFormatError(f"{src.label}: traceEvents holds {stats.n_not_objects} entries that are not "
                                   "event objects")
        reason = self.versions.skip_reason(src.label, env.sha256)
        if reason:
            self._discard(parts)
            self.summary.skipped.append((src.label, reason))
            return
        self.versions.replace_previous(src.label)
        self._check_numbers(src, stats, parts, duplicates)
        if isinstance(self.store, ParquetStore):
            self.catalog.add_files(trace_id, [(p, r.stats.rows) for p, r in parts if p is not None])
        else:
            self.store.add([r.table for _, r in parts if r.table is not None])
        self.catalog.add_kernel_names(stats.mangled)
        self._trace_row(trace_id, src, env, stats)
        self.summary.ingested.append((trace_id, src.label))
        self.summary.stored_events[trace_id] = stats.rows

    def _check_numbers(self, src: Source, stats: PieceStats, parts: list[tuple[Location | None, JobResult]],
                       duplicates: int | None = None) -> None:
        """Drop events longer than the rest of the trace or far outside its span
        (:func:`~trace_report.ingest.normalize.implausible_events`); note what was dropped and the duplicates
        (``duplicates``: as counted by the job, used unless events were dropped here)."""
        if stats.n_missing_time:  # decode dropped them (normalize.finalize): one event does not fail the trace
            self.summary.warnings.append(f"{src.label}: dropped {stats.n_missing_time} complete event(s) with no "
                                         "number in 'ts' or 'dur' (absent, null or not a number)")
        if stats.n_bad_utf8:
            self.summary.warnings.append(f"{src.label}: replaced {stats.n_bad_utf8} invalid UTF-8 sequence(s) "
                                        "with U+FFFD")
        overlong = implausible_events(stats)
        if overlong:
            drop = pa.array([r.event_id for r in overlong], pa.int64())
            for path, result in parts:
                _drop_rows(path, result, drop)
            stats.rows -= len(overlong)
        n_bad = stats.n_bad_numbers + len(overlong)
        if n_bad:
            example = describe(stats.bad_example) if stats.bad_example else describe(overlong[0])
            self.summary.notes.append(
                f"{src.label}: excluded {n_bad} event(s) with a negative, non-finite or absurd duration "
                f"(longer than the rest of the trace or over 1e12 us) or time stamp (over a day and ten "
                f"times the trace's length away from its other events), e.g. {example}")
        if stats.n_unread_steps:
            self.summary.warnings.append(
                f"{src.label}: {stats.n_unread_steps} ProfilerStep event(s) without a step number from 0 to "
                f"{STEP_MAX} are not steps, e.g. {str(stats.unread_step)[:80]!r}")
        n_dup = duplicates if duplicates is not None and not overlong else \
            count_duplicates(lambda columns: _part_tables(parts, columns), None if overlong else stats.dup_keys or None)
        if n_dup:
            self.summary.notes.append(
                f"{src.label}: {n_dup} event(s) are exact duplicates of another (same cat, name, pid, tid, "
                "ts, dur, args); kept")

    def _discard(self, parts: list[tuple[Location | None, JobResult]]) -> None:
        if isinstance(self.store, ParquetStore):
            for path, _ in parts:
                if path is not None:
                    self.store.forget(path)

    def _trace_row(self, trace_id: int, src: Source, env: TraceEnvelope, stats: PieceStats) -> None:
        run = run_context(src)
        facts, warning = trace_facts(env.metadata, src.label, run)
        if warning:
            self.summary.warnings.append(warning)
        if facts.redacted_keys:
            self.summary.warnings.append(
                f"{src.label}: redacted {len(facts.redacted_keys)} secret-looking metadata "
                f"value(s): {', '.join(facts.redacted_keys[:5])}"
            )
        in_events = [f"{key} ({n} events)" for key, n in sorted(stats.redactions.items())]
        if in_events:
            self.summary.warnings.append(f"{src.label}: redacted secrets in events: {', '.join(in_events[:5])}")
        device = stats.kernel_devices.most_common(1)[0][0] if stats.kernel_devices else None
        device_name, cc = device_for(env.metadata, device)
        if device_name is None:
            device_name, cc = run.device_name, run.compute_capability
        _, _, size, mtime_ns = check_unchanged(src)
        self.catalog.add_trace(
            [trace_id, src.label, facts.run_id, facts.rank, facts.rank_source, facts.world_size,
             facts.host, device_name, cc, facts.torch_version, facts.schema_version, stats.n_events,
             stats.rows, stats.n_kernels, env.sha256, size, mtime_ns,
             facts.metadata_json, facts.redacted_keys + in_events],
        )


def _changed_or(exc: InputError, src: Source) -> InputError:
    """``exc``, or the refusal of a file or object that changed while it was read, which explains
    it (an object replaced under its stream reads as a truncated or damaged one)."""
    try:
        check_unchanged(src)
    except InputError as changed:
        return changed
    return exc


def _named(exc: InputError, src: Source) -> InputError:
    """``exc`` with a tar member's temporary path replaced by its label (``archive!member``)."""
    text, tmp = str(exc), str(src.path)
    if src.label == tmp or tmp not in text:
        return exc
    return type(exc)(text.replace(tmp, src.label))


def _part_tables(parts: list[tuple[Location | None, JobResult]], columns: list[str]) -> Iterator[pa.Table]:
    for path, result in parts:
        if result.table is not None:
            yield result.table.select(columns)
        elif path is not None:
            yield read_piece(path, columns)


def _drop_rows(path: Location | None, result: JobResult, event_ids: pa.Array) -> None:
    """Remove rows by ``event_id`` from one part (its Arrow table, or its Parquet file rewritten)."""
    table = result.table if result.table is not None else (read_piece(path) if path is not None else None)
    if table is None:
        return
    keep = ac.invert(ac.is_in(table.column("event_id"), event_ids))
    if ac.all(keep).as_py():
        return
    table = ac.filter(table, keep)
    result.stats.rows = table.num_rows
    if result.table is not None:
        result.table = table
    elif path is not None:
        write_parquet(table, path)


def run_context(src: Source) -> RunContext:
    """What the capture's ``run.json`` (or ``run-rank<N>.json``) beside a trace says of it."""
    if src.run_dir is None:
        return RunContext()
    folder, m = manifest_for_trace(src.path)
    if m is None or folder is None:
        return RunContext()
    env = m.environment
    return RunContext(
        run_id=m.run_id or printable(folder.name), rank=m.distributed.rank if m.distributed else 0,
        world_size=m.distributed.world_size if m.distributed else 1, torch_version=env.torch_version,
        host=env.host, device_name=env.device_name, compute_capability=env.compute_capability,
    )


def ingest_sources(con: duckdb.DuckDBPyConnection, found: Resolution, store: ParquetStore | MemoryStore,
                   options: IngestOptions | None = None, engine: Engine | None = None,
                   early: Prestart | None = None) -> IngestSummary:
    """Ingest resolved sources (:func:`trace_report.inputs.resolve`) into ``con`` (schema
    created) and ``store``.

    ``engine`` runs the decoding jobs (:mod:`trace_report.ingest.engine`; it is shut down,
    outstanding jobs cancelled, on return); by default :func:`~trace_report.ingest.engine.local_engine`
    of ``options.workers`` (threads) when the input is large, else the calling thread.

    ``early``: jobs :func:`prestart` submitted for a new database (its pool is then the engine).

    Unchanged files already in the database (same path, size and mtime, or same SHA-256)
    are skipped. Raises :class:`~trace_report.errors.InputError` (or its subclass
    ``TraceFormatError``) for unreadable traces; the caller decides what happens to what was
    written (``ingest_to_database`` discards it all).
    """
    opts = options or IngestOptions()
    total = sum(source_decoded_size(s) for s in found.sources)
    piece_bytes = opts.piece_bytes or piece_bytes_for(total)
    pool = (early.pool if early is not None else engine if engine is not None
            else local_engine_for(total, opts, len(found.sources), piece_bytes))
    job = Ingest(con, opts, store, piece_bytes, early)
    job.summary.skipped.extend(found.skipped)
    job.summary.notes.extend(found.notes)
    try:
        job.run(found.sources, pool)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return job.summary


def ingest_to_database(paths: list[Location], db_path: Path, options: IngestOptions | None = None,
                       engine: Engine | None = None) -> IngestSummary:
    """Ingest the inputs in ``paths`` into the database file ``db_path`` (created if absent),
    all or nothing, decoding on ``engine`` (see :func:`ingest_sources`):
    :func:`~trace_report.ingest.start.begin_ingest`, then :func:`finish_ingest`.

    The database is written through a temporary copy that replaces it only on success; event
    files written by a failed ingest are removed, so an existing database is left as it was.
    Raises :class:`~trace_report.errors.InputError` for unusable inputs (a database or dataset
    among them included) and :class:`~trace_report.errors.DatabaseError` for the database.
    """
    with begin_ingest(paths, db_path, clean_leftovers, options, engine) as started:
        return finish_ingest(started, options, engine)


def finish_ingest(started: Started, options: IngestOptions | None = None,
                  engine: Engine | None = None) -> IngestSummary:
    """Open (a temporary copy of) the database of an ingest :func:`~trace_report.ingest.start.begin_ingest`
    began, ingest its sources, and replace the database; call it inside ``begin_ingest``'s
    ``with``, which removes the pieces on an exception and commits them otherwise."""
    with atomic_database(started.db_path) as con:
        summary = ingest_sources(con, started.found, started.store, options, engine, started.early)
    summary.notes[:0] = started.notes
    return summary


def open_in_memory(
    found: Resolution, options: IngestOptions | None = None
) -> tuple[duckdb.DuckDBPyConnection, IngestSummary]:
    """An in-memory database with the resolved sources (the ``events`` view over Arrow)."""
    con = duckdb.connect(":memory:")
    try:
        create_schema(con, with_views=False)
        store = MemoryStore()
        summary = ingest_sources(con, found, store, options)
        store.publish(con)
        create_views(con)
    except BaseException:
        con.close()
        raise
    return con, summary
