"""Many small ranks: ``advise`` and ``report`` on a database of N small rank traces against the
same folder opened directly, and the files kept beside the database (docs/benchmarks.md).

Each rank is a copy of one small shared trace (hta_amd_mi250: 220 events, 2 ProfilerSteps, 14
kernels) with its own ``distributedInfo`` rank, its timestamps shifted by a few us per rank (so
that every copy is distinct content) and its correlation ids offset, written as .json.gz into a
temporary folder. The folder is ingested into a database; then each command runs (as the CLI, in
this process, output to a file in the work folder) once on the database (its first run computes
and keeps the derived tables), then on the folder and on the database again (reading the kept
tables), taking turns, ``--runs`` times each. Prints the seconds of each run, the ratios of the
database's first run and of its later runs' median to the folder's median, and the files under
the database's derived folder.

Usage: python benchmarks/many_ranks.py [--ranks 2000] [--runs 1] [--work DIR] [--profile OUT]
``--profile OUT``: also a cProfile of the first run of each command on the database, written to
``OUT.<command>.prof`` (read with ``python -m pstats``).
The machine is shared: its load average is printed with the results.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared/data/traces/hta_amd_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def make_ranks(folder: Path, n: int) -> int:
    """``n`` rank files in ``folder`` (copies of :data:`SOURCE`); returns the events per rank."""
    with gzip.open(SOURCE, "rt") as fh:
        doc = json.load(fh)
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(n):
        events = []
        for e in doc["traceEvents"]:
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] + rank * 3
            args = e.get("args")
            if isinstance(args, dict) and "correlation" in args:
                e["args"] = {**args, "correlation": args["correlation"] + rank * 100_000}
            events.append(e)
        out = {**doc, "traceEvents": events, "distributedInfo": {"rank": rank, "world_size": n}}
        with gzip.open(folder / f"rank-{rank:05d}.pt.trace.json.gz", "wt", compresslevel=1) as fh:
            json.dump(out, fh)
    return len(doc["traceEvents"])


def cli(argv: list[str]) -> None:
    """One ``trace-report`` command in this process; raises on a non-zero exit."""
    from trace_report.cli.app import main

    try:
        main(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise RuntimeError(f"trace-report {' '.join(argv)}: exit {exc.code}") from None


def timed(fn: Callable[[], None], profile: Path | None = None) -> float:
    start = time.perf_counter()
    if profile is None:
        fn()
    else:
        prof = cProfile.Profile()
        prof.runcall(fn)
        prof.dump_stats(profile)
    return time.perf_counter() - start


def count_files(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder)) if folder.is_dir() else 0


def commands(work: Path) -> dict[str, Callable[[str], list[str]]]:
    return {"advise": lambda target: ["advise", target, "-f", "json", "-o", str(work / "advise.json")],
            "report": lambda target: ["report", target, "-o", str(work / "report.html")]}


def run(n: int, runs: int, work: Path, profile: str | None) -> dict[str, Any]:
    ranks, db = work / "ranks", work / "many.duckdb"
    t0 = time.perf_counter()
    per_rank = make_ranks(ranks, n)
    made = time.perf_counter() - t0
    ingest = timed(lambda: cli(["ingest", str(ranks), "-o", str(db), "-q", "--no-progress"]))
    out: dict[str, Any] = {"ranks": n, "events_per_rank": per_rank, "make_s": made, "ingest_s": ingest}
    for name, argv in commands(work).items():
        prof = Path(f"{profile}.{name}.prof") if profile else None
        times = {"database_first": timed(lambda argv=argv: cli(argv(str(db))), prof), "folder": [], "database": []}
        for _ in range(runs):
            times["folder"].append(timed(lambda argv=argv: cli(argv(str(ranks)))))
            times["database"].append(timed(lambda argv=argv: cli(argv(str(db)))))
        out[name] = times
        folder = statistics.median(times["folder"])
        print(f"{name}: database first {times['database_first']:.1f} s, then "
              f"{', '.join(f'{t:.1f}' for t in times['database'])} s; folder "
              f"{', '.join(f'{t:.1f}' for t in times['folder'])} s; first / folder "
              f"{times['database_first'] / folder:.2f}, later / folder "
              f"{statistics.median(times['database']) / folder:.2f}", flush=True)
    derived = [p for p in work.glob("*.events") if p.is_dir()]
    out["kept_files"] = sum(count_files(p / "derived") for p in derived)
    out["events_folder_files"] = sum(count_files(p) for p in derived)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--work", type=Path, help="folder for the ranks and the database (default: a temporary one)")
    parser.add_argument("--profile", help="cProfile the first database run of each command to PROFILE.<command>.prof")
    args = parser.parse_args()
    if not SOURCE.is_file():
        print(f"Error: {SOURCE} not found (../shared)", file=sys.stderr)
        return 1
    work = args.work or Path(tempfile.mkdtemp(prefix="many-ranks-"))
    try:
        print(f"{platform.node()} {os.cpu_count()} CPUs, load average {os.getloadavg()}; {args.ranks} ranks "
              f"in {work}", flush=True)
        out = run(args.ranks, args.runs, work, args.profile)
        print(json.dumps(out))
        print(f"load average after: {os.getloadavg()}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
