"""The Ray engine of the aggregations (``--engine ray``; docs/scaling.md): map a command's per-partition
function over a database's partitions in Ray tasks, merge partial statistics, open inputs for Ray.

Map: the partitions of the database (:func:`~trace_report.store.partitions.event_partitions`: one
trace of a ``.duckdb`` database, one ``run_id=/rank=`` folder of an exported dataset; consecutive
ones joined into at most :data:`TASKS_PER_CPU` tasks per CPU of the cluster) are each opened by a
Ray task as its own in-memory DuckDB over its Parquet files, and the command's own SQL or
per-trace code runs there (a module-level function of the command's ``ray.py``:
``top_kernels/ray.py``, ``flags/ray.py``, ``compare/ray.py``; or of ``common/`` where several
commands read the result: ``breakdown_ray.py``, ``cpu_self_time.py``). Reduce, on
the driver: counts and sums are summed, minima and maxima taken, and every mean and percentage is
computed again from the merged sums (never averaged); the same functions as the local engine then
shape the rows. So the output is the local engine's, up to the last bits of floating-point sums
taken in another order (as between two DuckDB runs on several threads).

The driver holds a :class:`~trace_report.store.tracedb.TraceDB` of the database (its small tables:
``traces``, ``event_files``) and never scans ``events``. Needs a Ray runtime
(:func:`~trace_report.ingest.engine_ray.ray_runtime`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from trace_report.errors import InputError
from trace_report.ingest.engine_ray import RayEngine, cluster_cpus, map_tasks
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.inputs import resolve
from trace_report.storage import Location, location
from trace_report.store.database import connect_existing
from trace_report.store.export import open_parquet_dataset
from trace_report.store.partitions import EventPartition, batches, event_partitions, open_partition
from trace_report.store.tracedb import TraceDB

TASKS_PER_CPU = 4
"""Partitions are joined into at most this many tasks per CPU of the cluster: enough for balance,
few enough that opening DuckDB and its views in each task stays a small part of the work."""

Task = Callable[[TraceDB, dict[str, Any]], Any]
"""What a task computes on one partition: a module-level function (Ray sends it by name)."""

# ---------------------------------------------------------------- map


def run_partition(task: Task, part: EventPartition, params: dict[str, Any]) -> Any:
    """The body of one Ray task: open the partition, run ``task`` on it."""
    with open_partition(part) as db:
        return task(db, params)


def map_partitions(db: TraceDB, task: Task, params: dict[str, Any], rank: int | None = None,
                   trace_ids: tuple[int, ...] | None = None) -> list[Any]:
    """``task(partition, params)`` for every partition of the traces of ``rank`` (all when None)
    among ``trace_ids`` (all when None), one Ray task per batch; results in partition order."""
    ids = [int(t) for (t,) in db.con.execute(
        "SELECT trace_id FROM traces WHERE $rank IS NULL OR rank = $rank ORDER BY trace_id", {"rank": rank}).fetchall()
        if trace_ids is None or int(t) in trace_ids]
    parts = batches(event_partitions(db, ids), TASKS_PER_CPU * cluster_cpus())
    what = task.__name__.removesuffix("_task")
    return map_tasks(run_partition, [(task, part, params) for part in parts], what=what) if parts else []


# ---------------------------------------------------------------- reduce


def merge_stats(partials: list[pd.DataFrame], pct: str, denominators: pd.Series | None = None) -> pd.DataFrame:
    """Partial ``rank, kind, name, count, total_us, min_us, max_us`` rows merged per (rank, kind,
    name) (a memcpy and a kernel of one name stay two rows, as in ``top_kernels.sql``; per (rank,
    name) for partials without ``kind``): sums summed, min of minima, max of maxima,
    ``mean_us = total_us / count``, and the percentage column ``pct`` of ``denominators`` (summed
    partial denominators by rank), or, without them, of the rank's summed ``total_us`` (0 % when
    that is 0, as :func:`~trace_report.analyses.common.cpu_self_time.cpu_self_time_table`)."""
    frames = [f for f in partials if len(f)]
    if not frames:
        return pd.DataFrame(columns=["rank", "kind", "name", "count", "total_us", "mean_us", "min_us", "max_us", pct])
    rows = pd.concat(frames, ignore_index=True)
    keys = ["rank", "kind", "name"] if "kind" in rows.columns else ["rank", "name"]
    out = rows.groupby(keys, dropna=False, sort=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), min_us=("min_us", "min"),
        max_us=("max_us", "max")).reset_index()
    out["mean_us"] = out["total_us"] / out["count"]
    if denominators is None:
        denom = out.groupby("rank", dropna=False)["total_us"].transform("sum")
        out[pct] = 100.0 * out["total_us"] / denom.where(denom > 0, 1.0)
    else:
        by_rank = {(None if pd.isna(k) else k): v for k, v in denominators.items()}
        out[pct] = 100.0 * out["total_us"] / out["rank"].map(lambda r: by_rank.get(None if pd.isna(r) else r))
    return out



# ---------------------------------------------------------------- opening inputs for the Ray engine


@contextmanager
def open_for_ray(paths: list[Location], *, workdir: Path | None = None) -> Iterator[TraceDB]:
    """A :class:`TraceDB` whose events are in Parquet files that Ray tasks can read: the database
    or exported dataset given, else the traces given ingested by Ray tasks into a temporary
    database in ``workdir`` (default: the system's temporary folder; on a cluster it must be a
    shared path, e.g. ``TMPDIR=/shared/tmp``), removed on exit. Needs a Ray runtime."""
    with resolve([location(p) for p in paths]) as found:
        database, dataset = found.database, found.dataset
    if database is not None:
        with TraceDB(connect_existing(database)) as db:
            yield db
        return
    if dataset is not None:
        with open_parquet_dataset(dataset) as db:
            yield db
        return
    tmp = Path(tempfile.mkdtemp(prefix="trace-report-ray-", dir=workdir))
    try:
        db_path = tmp / "traces.duckdb"
        summary = ingest_to_database([location(p) for p in paths], db_path, IngestOptions(), engine=RayEngine())
        if not summary.ingested:
            raise InputError(f"{', '.join(map(str, paths))}: no trace to analyse")
        with TraceDB(connect_existing(db_path), summary) as db:
            yield db
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
