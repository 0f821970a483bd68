"""Scale benchmark of the Ray engine (docs/scaling.md): ingest and top-kernels of 8, 32
and 128 synthetic ranks with 1 and 2 Ray workers, and the local engine for reference.

The ranks are real traces replicated, each copy with its rank, correlation and External ids
shifted, written as .json.gz (as PyTorch writes them): ``--source dlrm`` (default) the 8 DLRM
ranks of ../shared (param_dlrm_kineto_v100x8, 0.8 MB decoded each: per-file costs dominate);
``--source rn50`` a V100 ResNet-50 trace (kineto_rn50_nw4_2021jun, 31 MB decoded, 71 k events:
larger than a piece, so each rank is a "large" file, cut into pieces where it is decoded).
For each configuration it reports the wall time of the ingest (the runtime already up), ranks and
decoded MB per second per worker, and the driver's share of the wall time: the time the driver
was not waiting for a task (cutting jobs, the dedup checks, the catalog, the merges), measured
around every ``result()`` of the engine. Then the same for ``top-kernels --by-rank`` over the
database (one task per trace, merged on the driver).

Usage: python benchmarks/scale.py [--ranks 8,32,128] [--workers 1,2] [--source dlrm|rn50] [--work DIR]
                                 [--json OUT]
The machine is shared: note its load average with the results (printed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent.parent / "shared/data/traces"
ARCHIVE = TRACES / "param_dlrm_kineto_v100x8/dlrm_kineto.tar.gz"
RN50 = TRACES / "kineto_rn50_nw4_2021jun/worker0.1623212756351.pt.trace.json.gz"


def source_docs(source: str) -> list[dict[str, Any]]:
    """The real traces a rank is copied from, as JSON objects with ``distributedInfo``."""
    if source == "rn50":
        with gzip.open(RN50, "rt") as fh:
            doc = json.load(fh)
        doc = doc if isinstance(doc, dict) else {"traceEvents": doc}
        return [{**doc, "distributedInfo": {"rank": 0, "world_size": 1}}]
    with tarfile.open(ARCHIVE) as tar:
        docs = [json.load(tar.extractfile(m)) for m in tar.getmembers()  # type: ignore[arg-type]
                if m.isfile() and m.name.endswith(".json")]
    return sorted(docs, key=lambda d: d["distributedInfo"]["rank"])


def make_ranks(folder: Path, n: int, source: str = "dlrm") -> int:
    """``n`` rank files (copies of the real ranks, ids shifted per copy); returns decoded bytes."""
    docs = source_docs(source)
    total = 0
    for rank in range(n):
        k, doc = divmod(rank, len(docs))[0], docs[rank % len(docs)]
        events = []
        for e in doc["traceEvents"]:
            args = dict(e.get("args") or {})
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] += 1_000_000 * k
            events.append({**e, "args": args} if args else e)
        data = json.dumps({**doc, "traceEvents": events,
                           "distributedInfo": {**doc["distributedInfo"], "rank": rank, "world_size": n}}).encode()
        total += len(data)
        with gzip.open(folder / f"rank{rank:04d}.pt.trace.json.gz", "wb", compresslevel=6) as fh:
            fh.write(data)
    return total


class Waits:
    """Seconds the driver spent blocked in ``future.result()`` (the rest of the wall time is its own)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, future: Any) -> Any:
        result = future.result

        def timed() -> Any:
            t = time.perf_counter()
            try:
                return result()
            finally:
                self.seconds += time.perf_counter() - t

        future.result = timed
        return future


def run_ray(folder: Path, work: Path, decoded: int, n: int, workers: int) -> dict[str, Any]:
    import ray

    from trace_report.analyses.top_kernels import TopKernelsOptions
    from trace_report.analyses.top_kernels.ray import top_kernels_ray
    from trace_report.ingest import engine_ray
    from trace_report.ingest.engine_ray import RayEngine
    from trace_report.ingest.pipeline import ingest_to_database
    from trace_report.store.database import connect_existing
    from trace_report.store.tracedb import TraceDB

    waits = Waits()

    class TimedEngine(RayEngine):
        def submit(self, fn: Any, /, *args: Any) -> Any:
            return waits.wrap(super().submit(fn, *args))

    db = work / f"ray-{n}-{workers}.duckdb"
    t = time.perf_counter()
    summary = ingest_to_database([folder], db, engine=TimedEngine())
    wall = time.perf_counter() - t
    assert len(summary.ingested) == n, summary.skipped[:3]
    row = {"engine": "ray", "ranks": n, "workers": workers, "ingest_s": wall,
           "ranks_per_s_per_worker": n / wall / workers, "mb_per_s_per_worker": decoded / 1e6 / wall / workers,
           "driver_share": (wall - waits.seconds) / wall}
    get, blocked = engine_ray._get, [0.0]

    def timed_get(ray_mod: Any, ref: Any, what: str) -> Any:
        t0 = time.perf_counter()
        try:
            return get(ray_mod, ref, what)
        finally:
            blocked[0] += time.perf_counter() - t0

    engine_ray._get = timed_get
    try:
        with TraceDB(connect_existing(db)) as tdb:
            t = time.perf_counter()
            frame = top_kernels_ray(tdb, TopKernelsOptions(limit=10, by_rank=True)).frame
            agg = time.perf_counter() - t
    finally:
        engine_ray._get = get
    assert frame["rank"].nunique() == n
    row.update(top_kernels_s=agg, top_kernels_driver_share=(agg - blocked[0]) / agg)
    del ray
    return row


def run_local(folder: Path, work: Path, decoded: int, n: int, workers: int) -> dict[str, Any]:
    from trace_report.ingest.engine import local_engine
    from trace_report.ingest.pipeline import ingest_to_database

    db = work / f"local-{n}-{workers}.duckdb"
    t = time.perf_counter()
    ingest_to_database([folder], db, engine=local_engine(workers))
    wall = time.perf_counter() - t
    return {"engine": "local", "ranks": n, "workers": workers, "ingest_s": wall,
            "ranks_per_s_per_worker": n / wall / workers, "mb_per_s_per_worker": decoded / 1e6 / wall / workers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="8,32,128")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--source", choices=("dlrm", "rn50"), default="dlrm")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    ranks = [int(x) for x in args.ranks.split(",")]
    workers = [int(x) for x in args.workers.split(",")]
    work = args.work or Path(tempfile.mkdtemp(prefix="trace-report-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    import ray

    rows: list[dict[str, Any]] = []
    folders = {}
    for n in ranks:
        folder = work / f"ranks{n}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        folders[n] = (folder, make_ranks(folder, n, args.source))
        print(f"built {n} ranks: {folders[n][1] / 1e6:.1f} MB decoded", file=sys.stderr)
    for w in workers:
        ray.init(num_cpus=w, include_dashboard=False, logging_level="warning", log_to_driver=False)
        try:
            for n in ranks:
                rows.append(run_ray(*folders[n][:1], work, folders[n][1], n, w))
                print(rows[-1], file=sys.stderr)
        finally:
            ray.shutdown()
    for n in ranks:
        rows.append(run_local(folders[n][0], work, folders[n][1], n, max(workers)))
        print(rows[-1], file=sys.stderr)
    meta = {"source": args.source, "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
            "python": platform.python_version(), "ray": ray.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": os.getloadavg()}
    print(json.dumps(meta))
    print("| engine | ranks | workers | ingest s | ranks/s/worker | MB/s/worker | driver share | top-kernels s | "
          "its driver share |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['ranks']} | {r['workers']} | {r['ingest_s']:.2f} | "
              f"{r['ranks_per_s_per_worker']:.2f} | {r['mb_per_s_per_worker']:.1f} | "
              f"{r.get('driver_share', float('nan')):.0%} | {r.get('top_kernels_s', float('nan')):.2f} | "
              f"{r.get('top_kernels_driver_share', float('nan')):.0%} |")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
