"""Several capture runs in one database: traces tagged with the run they belong to.

``trace-report capture`` writes ``traces/<run-id>/`` with a ``run.json`` manifest (config,
environment, summary; never environment variables), ``metrics.csv`` (per epoch), ``steps.csv``
(per step), the experiment's ``results.csv`` and the traces; experiments with variants put each
variant in a sub-folder with its own ``run.json`` (``docs/capture.md``). :func:`trace_report.open` opens
any mix of run folders, experiment folders, a ``traces/`` folder of many runs, trace files, a
``.duckdb`` database or an exported Parquet dataset, and adds TEMP tables on the same connection
(so that one query joins across runs):

- ``runs``: one row per folder holding a ``run.json``; columns :data:`RUN_COLUMNS` (times in
  seconds, memory in MB; ``config`` and ``manifest`` as JSON, secret-looking keys redacted).
- ``run_traces``: ``trace_id`` -> ``run_key`` (``traces.run_id`` is the experiment's id, shared
  by its variants; ``run_key`` tells the variants apart: ``<run-id>/<variant>``).
- ``run_metrics``, ``run_steps``, ``run_results``: ``run_key`` + the rows of ``metrics.csv``,
  ``steps.csv`` and ``results.csv`` (columns as in ``docs/capture.md``).

The tables exist (empty) even when no run folder is found (docs/architecture.md, Conventions).
A run folder may be a prefix in object storage (traces read from ``s3://...``): its ``run.json``,
``run-rank<N>.json`` and CSV files are read from there when the tables are made, as a local
folder's are (one request to tell whether a trace's prefix holds a ``run.json``).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from trace_report import storage
from trace_report.errors import InputError
from trace_report.manifest import MANIFEST, RunManifest, from_dict, raw_manifest
from trace_report.redact import StringScreen
from trace_report.store.tracedb import TraceDB

if TYPE_CHECKING:
    import pandas as pd

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
    """One folder with a ``run.json``: its key, typed manifest, the stored JSON (both redacted)
    and CSV files."""

    path: storage.Location
    key: str
    manifest: RunManifest
    raw: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


# ---------------------------------------------------------------- reading run folders


def read_csv_table(folder: Path, stem: str) -> pd.DataFrame:
    """``<stem>.csv`` of a run folder, or the per-rank ``<stem>-rank<N>.csv`` files of a DDP run
    (with a ``rank`` column); an empty frame when there is none."""
    import pandas as pd  # run folders only: opening a database without them never loads pandas

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
    """A run folder's CSV file, every text cell through the secret screen of
    :mod:`trace_report.redact` (as every other stored string: docs/schema.md)."""
    import pandas as pd  # run folders only (see read_csv_table)

    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: unreadable CSV ({exc})") from exc
    screen = StringScreen()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            values = frame[column].tolist()
            screened = screen.column(values, f"{path.name}.{column}")
            if screened is not values:
                frame[column] = screened
    return frame


def _run_key(folder: Path, manifest: RunManifest) -> str:
    run_id = str(manifest.run_id or folder.name)
    return run_id if folder.name == run_id else f"{run_id}/{folder.name}"


_RUN_FILES = re.compile(r"(run|run-rank\d+)\.json|(metrics|steps|results)(-rank\d+)?\.csv")
"""The files of a run folder that its tables are made of (read from object storage, the rest is not)."""


def load_run_folder(folder: storage.Location) -> RunFolder:
    """A run folder with its manifest and its ``metrics``, ``steps`` and ``results`` tables; a
    prefix in object storage has its run files (:data:`_RUN_FILES`) copied to a temporary folder
    first. Raises :class:`InputError` when a prefix cannot be read."""
    if not storage.is_url(folder):
        return _load_local(Path(folder))
    url = str(folder).rstrip("/")
    with tempfile.TemporaryDirectory(prefix="trace-report-run-") as tmp:
        local = Path(tmp) / storage.name_of(url)
        local.mkdir()
        for obj in storage.list_prefix(url):
            name = str(obj.location)[len(url) + 1:]
            if _RUN_FILES.fullmatch(name):
                storage.download(obj.location, local / name)
        run = _load_local(local)
    run.path = url
    return run


def _load_local(folder: Path) -> RunFolder:
    raw = raw_manifest(folder)  # read once: the typed view and the stored JSON come from it
    manifest = from_dict(raw, redacted=True) if raw is not None else RunManifest(schema="")
    run = RunFolder(folder, _run_key(folder, manifest), manifest, raw or {})
    for table, stem in CSV_TABLES.items():
        run.tables[table] = read_csv_table(folder, stem)
    return run


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
    m, raw = run.manifest, run.raw
    cfg, env = m.config, m.environment
    summary = m.summary
    peak = _num(summary.peak_memory_bytes) if summary else None
    return {
        "run_key": run.key, "run_id": m.run_id or storage.name_of(run.path), "experiment": m.experiment,
        "variant": m.variant, "kind": m.kind, "path": str(run.path), "model": cfg.get("model"),
        "batch_size": cfg.get("batch_size"), "epochs": cfg.get("epochs"), "steps": cfg.get("steps"),
        "optimizer": cfg.get("optimizer"), "lr": m.learning_rate if m.learning_rate is not None else cfg.get("lr"),
        "workers": cfg.get("workers"), "amp": cfg.get("amp"), "compile": cfg.get("compile"),
        "channels_last": cfg.get("channels_last"), "seed": m.seed if m.seed is not None else cfg.get("seed"),
        "device": env.device, "device_name": env.device_name, "compute_capability": env.compute_capability,
        "torch_version": env.torch_version, "cuda_version": env.cuda_version, "host": env.host,
        "git_commit": (env.git or {}).get("commit"), "started_utc": m.started_utc, "finished_utc": m.finished_utc,
        "final_loss": _num(summary.final_loss) if summary else None,
        "final_accuracy": _num(summary.final_accuracy) if summary else None,
        "test_accuracy": _num(summary.test_accuracy) if summary else None,
        "peak_memory_mb": peak / 2**20 if peak is not None else None, "n_traces": n_traces,
        "config": json.dumps(cfg, default=str), "manifest": json.dumps(raw, default=str),
    }


def _runs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd  # run folders only (see read_csv_table)

    frame = pd.DataFrame(rows, columns=RUN_COLUMNS)
    return frame.astype({c: "object" for c in RUN_COLUMNS})


# ---------------------------------------------------------------- database side


def _trace_folders(con: duckdb.DuckDBPyConnection) -> list[tuple[int, storage.Location]]:
    rows = con.execute("SELECT trace_id, path FROM traces ORDER BY trace_id").fetchall()
    return [(int(t), _parent(str(p).split("!", 1)[0])) for t, p in rows]


def _parent(path: str) -> storage.Location:
    """The folder of a trace's path: a local folder, or the prefix of an object's URL."""
    return path.rstrip("/").rsplit("/", 1)[0] if storage.is_url(path) else Path(path).parent


def _has_manifest(folder: storage.Location) -> bool:
    """Whether ``folder`` holds a ``run.json`` (a prefix that cannot be reached holds none)."""
    if not storage.is_url(folder):
        return (Path(folder) / MANIFEST).is_file()
    try:
        storage.stat(storage.join(str(folder), MANIFEST))
    except InputError:
        return False
    return True


def _resolved(path: storage.Location) -> storage.Location:
    if storage.is_url(path):
        return str(path).rstrip("/")
    try:
        return Path(path).resolve()
    except OSError:
        return Path(path).absolute()


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
    import pandas as pd  # run folders only (see read_csv_table)

    parts = [r.tables[table].assign(run_key=r.key) for r in runs if not r.tables[table].empty]
    if not parts:
        return pd.DataFrame({"run_key": pd.Series(dtype="object")})
    frame = pd.concat(parts, ignore_index=True)
    return frame[["run_key", *[c for c in frame.columns if c != "run_key"]]]


def attach_runs(con: duckdb.DuckDBPyConnection, folders: Sequence[storage.Location]) -> list[RunFolder]:
    """Create (or replace) the TEMP tables ``runs``, ``run_traces``, ``run_metrics``,
    ``run_steps`` and ``run_results`` on ``con`` from the run folders given and those beside
    the traces in ``con``'s ``traces`` table (local folders or object-store prefixes). Returns
    the run folders, in ``runs`` order."""
    traced = _trace_folders(con)
    beside = [f for f in dict.fromkeys(f for _, f in traced) if _has_manifest(f)]  # each folder asked once
    wanted = list(dict.fromkeys([*folders, *beside]))
    if not wanted:
        _empty_run_tables(con)
        return []
    import pandas as pd  # run folders only (see read_csv_table)

    by_path: dict[storage.Location, RunFolder] = {}
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


def _empty_run_tables(con: duckdb.DuckDBPyConnection) -> None:
    """The run tables with their columns and no rows (no run folder): text columns VARCHAR,
    the others as :data:`_SQL_TYPES` says; built in SQL, without pandas."""
    cols = ", ".join(f'"{c}" {_SQL_TYPES.get(c, "VARCHAR")}' for c in RUN_COLUMNS)
    con.execute(f"CREATE OR REPLACE TEMP TABLE runs ({cols})")
    con.execute("CREATE OR REPLACE TEMP TABLE run_traces (trace_id INTEGER, run_key VARCHAR)")
    for table in CSV_TABLES:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {table} (run_key VARCHAR)")


def runs_frame(db: TraceDB) -> pd.DataFrame:
    """The ``runs`` table as pandas (without the long ``manifest`` JSON)."""
    import pandas as pd  # a notebook asked for a frame

    con = db.con
    try:
        return con.execute("SELECT * EXCLUDE (manifest) FROM runs ORDER BY run_key").df()  # type: ignore[union-attr]
    except duckdb.CatalogException:
        return pd.DataFrame(columns=[c for c in RUN_COLUMNS if c != "manifest"])
