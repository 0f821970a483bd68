"""Decoding threads against forked decoding processes, by worker count.

The ingest decodes in threads where the compiled scanner is installed (``ThreadEngine``: the scan
runs without the GIL; measured on 2 cores, docs/benchmarks.md) and in forked processes otherwise
(``LocalEngine``). On 16 cores the threads' curve flattens past 4 workers; what still holds the
GIL per piece (building Arrow arrays, normalising, the Python around each piece) may be why. This
runs the same input through both engines at each worker count, each run in a process of its own
(``ingest_to_database`` with the engine given: decoding, Parquet and catalog; no breakdown kept),
taking turns, and prints wall, CPU and peak RSS of the process tree (``shapes.measure``), medians.

Usage: python benchmarks/engines.py TRACE... [--workers 1,4,8,16] [--runs 3] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: the benchmarks package beside it
    sys.path.insert(0, str(HERE.parent))

from benchmarks.cpu_report import parse_workers  # noqa: E402
from benchmarks.shapes import Run, measure, median  # noqa: E402

SNIPPET = """
import sys
from pathlib import Path
from trace_report.sysutil import decoding_settings, skip_pandas_probe, tune_allocator
tune_allocator(); decoding_settings(); skip_pandas_probe()  # as `trace-report ingest` sets them
from trace_report.ingest.engine import LocalEngine, ThreadEngine
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
kind, n, db, *paths = sys.argv[1:]
n = int(n)
pool = None if n == 1 else (ThreadEngine if kind == "threads" else LocalEngine)(n)
ingest_to_database([Path(p) for p in paths], Path(db), IngestOptions(workers=n), engine=pool)
"""


def run_once(kind: str, workers: int, paths: list[Path], db: Path) -> Run:
    shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
    db.unlink(missing_ok=True)
    return measure([sys.executable, "-c", SNIPPET, kind, str(workers), str(db), *map(str, paths)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--workers", type=parse_workers, default=[1, 4, 8, 16])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=HERE / "out")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    db = args.work / "engines.duckdb"
    runs: dict[tuple[str, int], list[Run]] = {}
    for _ in range(args.runs):
        for n in args.workers:
            for kind in (("threads",) if n == 1 else ("threads", "processes")):
                runs.setdefault((kind, n), []).append(run_once(kind, n, args.paths, db))
    base = median(runs[("threads", args.workers[0])]).wall_s
    print(f"{', '.join(p.name for p in args.paths)}: {os.cpu_count()} cores, median of {args.runs}\n")
    print("| engine | workers | wall | CPU | peak RSS | speed-up |\n|---|---|---|---|---|---|")
    for (kind, n), rs in runs.items():
        m = median(rs)
        print(f"| {kind} | {n} | {m.wall_s:.2f} s | {m.cpu_s:.2f} s | {m.peak_gb:.2f} GB | {base / m.wall_s:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
