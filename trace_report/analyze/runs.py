"""Several capture runs in one database: traces tagged with the run they belong to.

``trace-report capture`` writes ``traces/<run-id>/`` with a ``run.json`` manifest (config,
environment, summary; never environment variables), ``metrics.csv`` (per epoch), ``steps.csv``
(per step), the experiment's ``results.csv`` and the traces; experiments with variants put each
variant in a sub-folder with its own ``run.json`` (``docs/capture.md``). :func:`open_runs` opens
any mix of run folders, experiment folders, a ``traces/`` folder of many runs, trace files, a
``.duckdb`` database or an exported Parquet dataset, and adds TEMP tables on the same connection
(so that one query joins across runs):

- ``runs``: one row per folder holding a ``run.json``; columns :data:`RUN_COLUMNS` (times in
  seconds, memory in MB; ``config`` and ``manifest`` as JSON, secret-looking keys redacted).
- ``run_traces``: ``trace_id`` -> ``run_key`` (``traces.run_id`` is the experiment's id, shared
  by its variants; ``run_key`` tells the variants apart: ``<run-id>/<variant>``).
- ``run_metrics``, ``run_steps``, ``run_results``: ``run_key`` + the rows of ``metrics.csv``,
  ``steps.csv`` and ``results.csv`` (columns as in ``docs/capture.md``).

The tables exist (empty) even when no run folder is found (DESIGN section 8.7).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd

from trace_report.analyze.metadata import redact
from trace_report.analyze.sources import NOT_TRACES, is_archive_name, is_database_path, is_trace_name
from trace_report.errors import InputError

if TYPE_CHECKING:
    from trace_report.api import TraceDB

PathArg = str | PathLike[str]
MANIFEST = "run.json"
RUN_COLUMNS = ["run_key", "run_id", "experiment", "variant", "kind", "path", "model", "batch_size", "epochs",
               "steps", "optimizer", "lr", "workers", "amp", "compile", "channels_last", "seed", "device",
               "device_name", "compute_capability", "torch_version", "cuda_version", "host", "git_commit",
               "started_utc", "finished_utc", "final_loss", "final_accuracy", "test_accuracy", "peak_memory_mb",
               "n_traces", "config", "manifest"]
_SQL_TYPES = {"batch_size": "INTEGER", "epochs": "INTEGER", "steps": "INTEGER", "workers": "INTEGER",
              "seed": "BIGINT", "n_traces": "INTEGER", "lr": "DOUBLE", "final_loss": "DOUBLE",
              "final_accuracy": "DOUBLE", "test_accuracy": "DOUBLE", "peak_memory_mb": "DOUBLE",
              "amp": "BOOLEAN", "compile": "BOOLEAN", "channels_last": "BOOLEAN", "config": "JSON",
              "manifest": "JSON"}
CSV_TABLES = {"run_metrics": "metrics", "run_steps": "steps", "run_results": "results"}


@dataclass
class RunFolder:
    """One folder with a ``run.json``: its key, manifest (redacted) and CSV files."""

    path: Path
    key: str
    manifest: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``experiment`` for a multi-variant (or DDP) experiment manifest, else ``run``."""
        return "experiment" if str(self.manifest.get("schema", "")).startswith("trace-report/experiment") else "run"


# ---------------------------------------------------------------- reading run folders


def read_manifest(folder: Path) -> dict[str, Any]:
    """``run.json`` of ``folder`` with secret-looking keys redacted ({} when unreadable)."""
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return redact(data)[0] if isinstance(data, dict) else {}


def read_csv_table(folder: Path, stem: str) -> pd.DataFrame:
    """``<stem>.csv`` of a run folder, or the per-rank ``<stem>-rank<N>.csv`` files of a DDP run
    (with a ``rank`` column); an empty frame when there is none."""
    single = folder / f"{stem}.csv"
    if single.is_file():
        return _read_csv(single)
    frames = []
    for path in sorted(folder.glob(f"{stem}-rank*.csv")):
        frame = _read_csv(path)
        frame.insert(0, "rank", int(path.stem.rsplit("rank", 1)[1]))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: unreadable CSV ({exc})") from exc


def _run_key(folder: Path, manifest: dict[str, Any]) -> str:
    run_id = str(manifest.get("run_id") or folder.name)
    return run_id if folder.name == run_id else f"{run_id}/{folder.name}"


def load_run_folder(folder: Path) -> RunFolder:
    """A run folder with its manifest and its ``metrics``, ``steps`` and ``results`` tables."""
    manifest = read_manifest(folder)
    run = RunFolder(folder, _run_key(folder, manifest), manifest)
    for table, stem in CSV_TABLES.items():
        run.tables[table] = read_csv_table(folder, stem)
    return run


def find_run_folders(paths: Sequence[Path]) -> list[Path]:
    """Folders holding a ``run.json`` in or above the given paths (files: their folder;
    directories: searched recursively, hidden folders skipped), in a stable order."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for manifest in sorted(path.rglob(MANIFEST)):
                if not any(part.startswith(".") for part in manifest.relative_to(path).parts[:-1]):
                    found[manifest.parent] = None
        elif (path.parent / MANIFEST).is_file():
            found[path.parent] = None
    return list(found)


# ---------------------------------------------------------------- runs table rows


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def run_row(run: RunFolder, n_traces: int) -> dict[str, Any]:
    """The ``runs`` row of a folder (see :data:`RUN_COLUMNS`)."""
    m = run.manifest
    cfg = m.get("config") if isinstance(m.get("config"), dict) else {}
    env = m.get("environment") if isinstance(m.get("environment"), dict) else {}
    summary = m.get("summary") if isinstance(m.get("summary"), dict) else {}
    git = env.get("git") if isinstance(env.get("git"), dict) else {}
    peak = _num(summary.get("peak_memory_bytes"))
    return {
        "run_key": run.key, "run_id": m.get("run_id") or run.path.name, "experiment": m.get("experiment"),
        "variant": m.get("variant"), "kind": run.kind, "path": str(run.path), "model": cfg.get("model"),
        "batch_size": cfg.get("batch_size"), "epochs": cfg.get("epochs"), "steps": cfg.get("steps"),
        "optimizer": cfg.get("optimizer"), "lr": m.get("learning_rate", cfg.get("lr")), "workers": cfg.get("workers"),
        "amp": cfg.get("amp"), "compile": cfg.get("compile"), "channels_last": cfg.get("channels_last"),
        "seed": m.get("seed", cfg.get("seed")), "device": env.get("device"), "device_name": env.get("device_name"),
        "compute_capability": env.get("compute_capability"), "torch_version": env.get("torch_version"),
        "cuda_version": env.get("cuda_version"), "host": env.get("host"), "git_commit": git.get("commit"),
        "started_utc": m.get("started_utc"), "finished_utc": m.get("finished_utc"),
        "final_loss": _num(summary.get("final_loss")), "final_accuracy": _num(summary.get("final_accuracy")),
        "test_accuracy": _num(summary.get("test_accuracy")),
        "peak_memory_mb": peak / 2**20 if peak is not None else None, "n_traces": n_traces,
        "config": json.dumps(cfg, default=str), "manifest": json.dumps(m, default=str),
    }


def _runs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=RUN_COLUMNS)
    return frame.astype({c: "object" for c in RUN_COLUMNS})


# ---------------------------------------------------------------- database side


def _trace_folders(con: duckdb.DuckDBPyConnection) -> list[tuple[int, Path]]:
    rows = con.execute("SELECT trace_id, path FROM traces ORDER BY trace_id").fetchall()
    return [(int(t), Path(str(p).split("!", 1)[0]).parent) for t, p in rows]


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _register(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame, types: dict[str, str]) -> None:
    """``CREATE OR REPLACE TEMP TABLE name`` from ``frame`` with the given column types."""
    tmp = f"_{name}_frame"
    con.register(tmp, frame)
    try:
        cols = ", ".join(f'CAST("{c}" AS {types[c]}) AS "{c}"' if c in types else f'"{c}"' for c in frame.columns)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {cols} FROM {tmp}")
    finally:
        con.unregister(tmp)


def _csv_frame(runs: list[RunFolder], table: str) -> pd.DataFrame:
    parts = [r.tables[table].assign(run_key=r.key) for r in runs if not r.tables[table].empty]
    if not parts:
        return pd.DataFrame({"run_key": pd.Series(dtype="object")})
    frame = pd.concat(parts, ignore_index=True)
    return frame[["run_key", *[c for c in frame.columns if c != "run_key"]]]


def attach_runs(con: duckdb.DuckDBPyConnection, folders: Sequence[Path]) -> list[RunFolder]:
    """Create (or replace) the TEMP tables ``runs``, ``run_traces``, ``run_metrics``,
    ``run_steps`` and ``run_results`` on ``con`` from the run folders given and those beside
    the traces in ``con``'s ``traces`` table. Returns the run folders, in ``runs`` order."""
    traced = _trace_folders(con)
    wanted = list(dict.fromkeys([*folders, *(f for _, f in traced if (f / MANIFEST).is_file())]))
    by_path: dict[Path, RunFolder] = {}
    for folder in wanted:
        by_path.setdefault(_resolved(folder), load_run_folder(folder))
    runs = list(by_path.values())
    links = [(t, by_path[_resolved(f)].key) for t, f in traced if _resolved(f) in by_path]
    counts = pd.Series([k for _, k in links], dtype="object").value_counts()
    rows = [run_row(r, int(counts.get(r.key, 0))) for r in runs]
    _register(con, "runs", _runs_frame(rows), _SQL_TYPES)
    _register(con, "run_traces", pd.DataFrame(links, columns=["trace_id", "run_key"]).astype(
        {"trace_id": "int64", "run_key": "object"}), {"trace_id": "INTEGER", "run_key": "VARCHAR"})
    for table in CSV_TABLES:
        _register(con, table, _csv_frame(runs, table), {"run_key": "VARCHAR"})
    return runs


def _has_traces(path: Path) -> bool:
    """Whether ``path`` is (or holds) something the trace ingest reads."""
    if not path.is_dir():
        return True  # files and archives: let the ingest judge (and report errors)
    return any(p.is_file() and (is_trace_name(p.name) or is_archive_name(p.name)) and p.name.lower() not in NOT_TRACES
               for p in path.rglob("*"))


def open_runs(
    paths: PathArg | Sequence[PathArg],
    *,
    read_only: bool = True,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TraceDB:
    """Open runs, traces, a database or a Parquet dataset, with the run tables attached.

    ``paths``: run folders (``traces/<run-id>``), experiment folders, a folder of many runs,
    trace files, directories of ranks, tar archives; or one ``.duckdb`` database (opened
    ``read_only`` unless asked otherwise; its ``runs`` come from the folders its traces were
    ingested from, when they still exist); or one directory written by ``trace-report export``.
    Run folders without traces (captured with ``--no-profile``) still give ``runs`` rows.
    Raises :class:`~trace_report.errors.InputError` for missing paths or nothing to open.
    """
    from trace_report.analyze.db import connect_existing, create_schema
    from trace_report.analyze.export import is_parquet_dataset, open_parquet_dataset
    from trace_report.analyze.ingest import IngestOptions, open_in_memory
    from trace_report.api import TraceDB

    items = [Path(paths)] if isinstance(paths, (str, PathLike)) else [Path(p) for p in paths]
    if not items:
        raise InputError("no trace paths given")
    for p in items:
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
    if len(items) == 1 and is_parquet_dataset(items[0]):
        return open_parquet_dataset(items[0])  # carries its own run tables
    if len(items) == 1 and is_database_path(items[0]):
        db = TraceDB(connect_existing(items[0], read_only=read_only))
    elif any(is_database_path(p) or is_parquet_dataset(p) for p in items):
        raise InputError("give either one database (or exported dataset) or trace files and runs, not both")
    else:
        inputs = [p for p in items if _has_traces(p)]
        folders = find_run_folders(items)
        if not inputs and not folders:
            raise InputError(f"{items[0]}: no trace files and no run.json in {', '.join(map(str, items))}")
        if inputs:
            con, report = open_in_memory(inputs, IngestOptions(workers=workers, progress=progress))
            db = TraceDB(con, report)
        else:
            con = duckdb.connect(":memory:")
            create_schema(con, with_views=True)
            db = TraceDB(con)
        attach_runs(db.con, folders)
        return db
    attach_runs(db.con, [])
    return db


# ---------------------------------------------------------------- jupysql


class MagicCursor:
    """A DB-API cursor over one connection that reads each result whole at ``execute``.

    DuckDB 2 refuses new work on a connection while a result is only partly fetched, and
    jupysql fetches ``displaylimit`` rows and stops; so results are materialised (Arrow) here
    and the connection is left free for ``db.sql(...)`` and the analyses.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._table: Any = None
        self._pos = 0
        self.description: list[tuple[Any, ...]] | None = None

    def execute(self, query: str, parameters: object = None) -> MagicCursor:
        rel = self._con.sql(query, params=parameters)
        self._table = rel.to_arrow_table() if rel is not None else None
        self.description = rel.description if rel is not None else None
        self._pos = 0
        return self

    @property
    def rowcount(self) -> int:
        return -1 if self._table is None else self._table.num_rows

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        if self._table is None:
            return []
        part = self._table.slice(self._pos, size)
        self._pos += part.num_rows
        return list(zip(*(col.to_pylist() for col in part.columns), strict=True))  # keeps duplicate names

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.fetchmany(self._table.num_rows - self._pos) if self._table is not None else []

    def df(self) -> pd.DataFrame:
        return self._table.to_pandas() if self._table is not None else pd.DataFrame()

    def pl(self) -> Any:
        import polars as pl  # only when asked for

        return pl.from_arrow(self._table)

    def close(self) -> None:
        self._table = None


class MagicConnection:
    """What to hand jupysql's ``%sql`` so that it queries *this* connection.

    jupysql runs every query on ``connection.cursor()``; a DuckDB cursor is a new connection to
    the same database, which does not see this connection's TEMP views (``events``,
    ``kernels``, ``regions``...) nor the run tables. This adapter's :meth:`cursor` is a
    :class:`MagicCursor` on the connection itself; ``close`` does nothing (the TraceDB owns
    the connection)::

        %load_ext sql
        conn = magic_connection(db)
        %sql conn
        %sql SELECT name, sum(dur_us) AS total_us FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 5
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def cursor(self) -> MagicCursor:
        return MagicCursor(self._con)

    def commit(self) -> None:
        """Nothing to commit: DuckDB runs each statement in its own transaction."""

    def close(self) -> None:
        """Leave the connection open: it belongs to the TraceDB."""

    def df(self) -> pd.DataFrame:  # jupysql recognises a DuckDB connection by ``df`` and ``pl``
        return self._con.df()

    def pl(self) -> Any:
        return self._con.pl()


def magic_connection(db: object) -> MagicConnection:
    """A :class:`MagicConnection` for a :class:`~trace_report.api.TraceDB` or a duckdb connection."""
    return MagicConnection(db.con if hasattr(db, "con") else db)  # type: ignore[arg-type]


def runs_frame(db: object) -> pd.DataFrame:
    """The ``runs`` table as pandas (without the long ``manifest`` JSON)."""
    con = db.con if hasattr(db, "con") else db
    try:
        return con.execute("SELECT * EXCLUDE (manifest) FROM runs ORDER BY run_key").df()  # type: ignore[union-attr]
    except duckdb.CatalogException:
        return pd.DataFrame(columns=[c for c in RUN_COLUMNS if c != "manifest"])
