"""Ingest benchmark on the trace shapes users have, each row against HTA in the same run.

Rows (inputs built once into benchmarks/out/ from real traces in ../shared by
make_big_trace.py, timestamps and ids shifted per copy):

  a. the 1.13 GB V100 ResNet-50 trace (kineto_rn50_nw4_2021jun x40), plain and .json.gz;
  b. an event-dense ~225 MB trace (param_linear_kineto_2080ti x11, ~200 B/event), plain and gz;
  c. a 16-rank folder of ~30 MB traces, each .json.gz (rn50 x1 per rank, distributedInfo set);
  d. a scaling curve: rn50 plain at ~100 MB, 1 GB (row a) and ~5 GB; HTA by default only up to
     2 GB of JSON (``--hta-max-gb``): on the 5 GB row it takes most of an hour a run and most of
     a 24 GB machine, so ``--only d-5GB --repeat 1 --hta-repeat 1 --hta-max-gb 6``.

Each run is a separate process; wall time, peak RSS summed over the process tree (sampled every
20 ms, psutil; the tree itself looked up every :data:`CHILDREN_EVERY` samples) and CPU time (user +
system of the process
and of the children it waited for, i.e. our decoding workers) are taken; the median of
``--repeat`` runs is reported with ratios. Our runs and HTA's take turns (ours, HTA, ours,
...), so that a drift of the machine's speed weighs on both alike. Then the query time alone of
top-kernels, breakdown and flags on the database of row a (an analysis call in an open process:
the first call on the database as ingested and the best of the next three; then the breakdown's
first call with its kept per-trace tables removed, computed from the events),
the whole commands, and ``breakdown`` straight on a raw trace against ingest + breakdown on the
database.

Then, per row (``--no-profile`` skips it): MB of JSON per CPU-second of the
whole ingest (MB decoded for gzip, over the median CPU time of the process tree) against the
compiled scanner alone over the same bytes (``benchmarks/scan_floor.py``: no columns built, and
with its columns), and the CPU seconds per stage of one more ingest of the row run in a profiling
process (``benchmarks/profile_ingest.py``: inflate, scan, normalising, Parquet, catalog, derived
tables, start-up). Last (``--no-workers`` skips it), the row ``--workers-row`` (default
a-plain; quick: d-100MB) ingested with each ``--workers N`` of ``--workers`` (default 1,2,4,8,16;
quick: 1,2): wall and CPU time, MB per second of each, peak memory, speed-up over the first
count (on a machine of fewer cores than N, N workers cannot run side by side: the table says so).

Prints Markdown tables ready for docs/benchmarks.md (machine, date, versions, load average).

Usage: python benchmarks/shapes.py [--quick] [--repeat 3] [--only a,b,...] [--skip-hta] [--hta-max-gb 2] [--work DIR]
                                   [--no-profile] [--workers 1,2,4,8,16 | --no-workers] [--workers-row a-plain]
  --quick: small inputs (dense x2, 4 ranks, 100 MB), 1 repeat, HTA on the smallest row only (< 5 min).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: the benchmarks package beside it
    sys.path.insert(0, str(HERE.parent))

from benchmarks.cpu_report import (  # noqa: E402
    RowRate,
    WorkerPoint,
    parse_workers,
    rate_table,
    stage_table,
    workers_table,
)

SHARED = HERE.parent.parent / "shared" / "data" / "traces"
RN50 = SHARED / "kineto_rn50_nw4_2021jun" / "worker0.1623212756351.pt.trace.json.gz"
DENSE = SHARED / "param_linear_kineto_2080ti" / "linear_kineto.json.gz"
HTA_MAX_GB = 2.0
CHILDREN_EVERY = 5
"""Samples between two looks for child processes: finding them reads /proc of every process on
the machine, a share of a core at every sample taken from the program measured; decoding workers
and HTA's pool live for seconds, so a look every few samples finds them all."""

HTA_SNIPPET = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
"""

QUERY_SNIPPET = """
import shutil, sys, time
import trace_report as tr
db = tr.open(sys.argv[1])  # as ingested (no --precompute): the first call computes and keeps the tables
for name, call in [("top-kernels", lambda: db.top_kernels(limit=20)), ("breakdown", lambda: db.breakdown()),
                   ("flags", lambda: db.flags())]:
    t = time.perf_counter()
    call()
    first = time.perf_counter() - t
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    print(name, f"{first:.4f}", f"{best:.4f}")
db.close()
shutil.rmtree(sys.argv[1] + ".events/derived", ignore_errors=True)  # nothing kept: the first call computes
with tr.open(sys.argv[1]) as db:
    t = time.perf_counter()
    db.breakdown()  # and keeps the rows again
    print("breakdown-computed", f"{time.perf_counter() - t:.4f}", "nan")
"""


@dataclass
class Run:
    wall_s: float
    peak_gb: float
    cpu_s: float


@dataclass
class Row:
    key: str
    label: str
    paths: list[Path]
    hta: bool = True
    ours: list[Run] = field(default_factory=list)
    theirs: list[Run] = field(default_factory=list)
    floor: dict[str, float] = field(default_factory=dict)
    """:class:`benchmarks.scan_floor.Floor` as a dict (``mb``, ``scan_only_s``, ``scan_events_s``)."""
    stages: dict[str, float] = field(default_factory=dict)
    """CPU seconds per stage of one profiled ingest (:mod:`benchmarks.profile_ingest`)."""


def measure(cmd: list[str]) -> Run:
    """Wall seconds, peak RSS (GB, summed over the process tree) and CPU seconds of ``cmd``.

    The wall time ends when the process is reaped (``os.wait4``), not at the next RSS sample
    (which added 0-20 ms); the RSS of the tree is sampled every 20 ms in a thread, and the peak
    is the larger of the highest sample and the process's own peak as the kernel counted it
    (``ru_maxrss`` from ``wait4``: exact for a single process, which samples can miss)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode cached, as users run
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    stop = threading.Event()
    sampled = [0]
    sampler = threading.Thread(target=_sample_rss, args=(proc.pid, stop, sampled), daemon=True)
    sampler.start()
    stderr = proc.stderr.read() if proc.stderr else b""  # until the process closes it (at exit)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed: {stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = max(sampled[0], usage.ru_maxrss * 1024)  # ru_maxrss: KiB on Linux
    return Run(wall, peak / 1e9, cpu)


def _sample_rss(pid: int, stop: threading.Event, peak: list[int]) -> None:
    """Highest RSS summed over ``pid`` and its descendants, sampled every 20 ms into ``peak[0]``."""
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    procs = [root]
    samples = 0
    while not stop.is_set():
        try:
            if samples % CHILDREN_EVERY == 0:
                procs = [root, *root.children(recursive=True)]
            peak[0] = max(peak[0], sum(p.memory_info().rss for p in procs if p.is_running()))
        except psutil.Error:
            pass
        samples += 1
        stop.wait(0.02)


def median(runs: list[Run]) -> Run:
    by_wall = sorted(runs, key=lambda r: r.wall_s)
    mid = by_wall[len(by_wall) // 2]
    return Run(mid.wall_s, max(r.peak_gb for r in runs), sorted(r.cpu_s for r in runs)[len(runs) // 2])


def make(source: Path, out: Path, copies: int, rank: int | None = None, world: int = 1) -> Path:
    """Build ``out`` once (make_big_trace.py); return it."""
    if not out.is_file():
        cmd = [sys.executable, str(HERE / "make_big_trace.py"), str(source), str(out), "--copies", str(copies)]
        if rank is not None:
            cmd += ["--rank", str(rank), "--world-size", str(world)]
        subprocess.run(cmd, check=True)
    return out


def gz_of(plain: Path) -> Path:
    out = plain.with_name(plain.name + ".gz")
    if not out.is_file():
        part = out.with_name(out.name + ".part")
        subprocess.run(f"gzip -6 -c '{plain}' > '{part}'", shell=True, check=True)
        part.rename(out)
    return out


def rank_folder(work: Path, ranks: int, copies: int) -> Path:
    folder = work / f"ranks{ranks}x{copies}"
    folder.mkdir(exist_ok=True)
    for r in range(ranks):
        make(RN50, folder / f"rank-{r}.json.gz", copies, rank=r, world=ranks)
    return folder


def inputs(args: argparse.Namespace, only: str | None = None) -> list[Row]:
    """The rows ``only`` names (default ``args.only``; empty: every row), their inputs built."""
    w = args.work
    rows: list[Row] = []
    only = args.only if only is None else only
    want = set(only.split(",")) if only else None

    def add(key: str, label: str, build: object, hta: bool = True) -> None:
        if want is None or key.split("-")[0] in want or key in want:
            paths = build() if callable(build) else build
            rows.append(Row(key, label, paths if isinstance(paths, list) else [paths], hta))

    if args.quick:
        add("b-plain", "event-dense, plain (quick: x2)", lambda: make(DENSE, w / "densex2.json", 2))
        add("b-gz", "event-dense, .json.gz (quick: x2)", lambda: gz_of(make(DENSE, w / "densex2.json", 2)), False)
        add("c", "4-rank folder of .json.gz (quick)", lambda: rank_folder(w, 4, 1), False)
        add("d-100MB", "scaling: rn50 ~100 MB plain", lambda: make(RN50, w / "rn50x4.json", 4), False)
        return rows
    add("a-plain", "V100 rn50 1.13 GB, plain", lambda: make(RN50, w / "rn50x40.json", 40))
    add("a-gz", "V100 rn50 1.13 GB, .json.gz", lambda: gz_of(make(RN50, w / "rn50x40.json", 40)))
    add("b-plain", "event-dense ~225 MB, plain", lambda: make(DENSE, w / "densex11.json", 11))
    add("b-gz", "event-dense ~225 MB, .json.gz", lambda: gz_of(make(DENSE, w / "densex11.json", 11)))
    add("c", "16-rank folder, ~30 MB .json.gz each", lambda: rank_folder(w, 16, 1))
    add("d-100MB", "scaling: rn50 ~100 MB plain", lambda: make(RN50, w / "rn50x4.json", 4))
    add("d-5GB", "scaling: rn50 ~5 GB plain", lambda: make(RN50, w / "rn50x180.json", 180))
    return rows


def decoded_mb(paths: list[Path]) -> float:
    """MB of JSON in ``paths`` (gzip counted decompressed)."""
    total = 0
    for f in (f for p in paths for f in (sorted(p.iterdir()) if p.is_dir() else [p])):
        with (gzip.open(f, "rb") if f.name.endswith(".gz") else open(f, "rb")) as fh:
            while chunk := fh.read(1 << 24):
                total += len(chunk)
    return total / 1e6


def size_of(paths: list[Path]) -> int:
    files = [f for p in paths for f in (sorted(p.iterdir()) if p.is_dir() else [p])]
    return sum(f.stat().st_size for f in files)


def hta_dir_for(row: Row, work: Path) -> Path:
    """A folder HTA can read: the rank folder itself, or a folder with a link to the one trace."""
    if row.paths[0].is_dir():
        return row.paths[0]
    folder = work / f"hta-{row.key}"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    trace = row.paths[0]
    (folder / ("rank-0.json.gz" if trace.name.endswith(".gz") else "rank-0.json")).symlink_to(trace.resolve())
    return folder


def bench_row(row: Row, args: argparse.Namespace, cli: str) -> None:
    db = args.work / f"{row.key}.duckdb"
    hta = row.hta and not args.skip_hta and size_of(row.paths) <= args.hta_max_gb * 1e9
    folder = hta_dir_for(row, args.work) if hta else None
    # Ours and HTA take turns, so that both sample the same minutes of a VM whose speed drifts by
    # 10-20% within minutes (run one after the other, the ratio carried that drift).
    for i in range(max(args.repeat, args.hta_repeat if hta else 0)):
        if i < args.repeat:
            shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
            db.unlink(missing_ok=True)
            row.ours.append(measure([cli, "ingest", *map(str, row.paths), "-o", str(db), "--no-progress"]))
        if hta and i < args.hta_repeat:
            row.theirs.append(measure([sys.executable, "-c", HTA_SNIPPET, str(folder)]))
    o = median(row.ours)
    line = f"{row.key}: ours {o.wall_s:.2f} s {o.peak_gb:.2f} GB cpu {o.cpu_s:.1f} s"
    if row.theirs:
        t = median(row.theirs)
        line += (f" | HTA {t.wall_s:.1f} s {t.peak_gb:.2f} GB | {t.wall_s / o.wall_s:.1f}x, "
                 f"{o.peak_gb / t.peak_gb:.2f} mem")
    print(line, file=sys.stderr, flush=True)


def profile_row(row: Row, work: Path) -> None:
    """The scanner alone over the row's bytes and one profiled ingest of it, each in a process
    of its own (after the timed runs: neither disturbs them)."""
    paths = [str(p) for p in row.paths]
    out = subprocess.run([sys.executable, str(HERE / "scan_floor.py"), *paths, "--json"], capture_output=True,
                         text=True, check=True)
    row.floor = json.loads(out.stdout)
    out = subprocess.run([sys.executable, str(HERE / "profile_ingest.py"), *paths, "--json", "--work", str(work)],
                         capture_output=True, text=True, check=True)
    row.stages = json.loads(out.stdout)["stages"]


def worker_curve(row: Row, counts: list[int], args: argparse.Namespace, cli: str) -> list[WorkerPoint]:
    """The row ingested with ``--workers N`` for each N (``args.repeat`` runs each, in turns:
    1, 2, 4, 1, 2, 4, ...), medians per count."""
    db = args.work / "workers.duckdb"
    runs: dict[int, list[Run]] = {n: [] for n in counts}
    for _ in range(args.repeat):
        for n in counts:
            shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
            db.unlink(missing_ok=True)
            runs[n].append(measure([cli, "ingest", *map(str, row.paths), "-o", str(db), "--no-progress",
                                    "--workers", str(n)]))
        print(f"workers {row.key}: " + ", ".join(f"{n}: {runs[n][-1].wall_s:.2f} s" for n in counts),
              file=sys.stderr, flush=True)
    return [WorkerPoint(n, median(runs[n]).wall_s, median(runs[n]).cpu_s, median(runs[n]).peak_gb) for n in counts]


def queries(db: Path, cli: str) -> list[tuple[str, float, float, float]]:
    """(command, first call, later calls, whole command wall) on ``db``: the query time alone of the
    first call in an open process on the database as ingested and the best of the next 3, then
    the median of 3 whole commands; last, the breakdown's first call with nothing kept (computed
    from the events, what a first query costs on a database ingested without ``--precompute``)."""
    out = subprocess.run([sys.executable, "-c", QUERY_SNIPPET, str(db)], capture_output=True, text=True, check=True)
    alone = {name: (float(a), float(b)) for name, a, b in (line.split() for line in out.stdout.splitlines())}
    rows = []
    for name in ("top-kernels", "breakdown", "flags"):
        whole = median([measure([cli, name, str(db), "-f", "csv"]) for _ in range(3)]).wall_s
        rows.append((name, *alone[name], whole))
    rows.append(("breakdown, nothing kept (computed)", *alone["breakdown-computed"], float("nan")))
    return rows


def raw_vs_ingest(trace: Path, work: Path, cli: str) -> tuple[Run, Run, Run]:
    db = work / "raw-vs-ingest.duckdb"
    shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
    db.unlink(missing_ok=True)
    raw = measure([cli, "breakdown", str(trace), "-f", "csv"])
    ingest = measure([cli, "ingest", str(trace), "-o", str(db), "--no-progress"])
    query = measure([cli, "breakdown", str(db), "-f", "csv"])
    return raw, ingest, query


def versions() -> str:
    names = ["duckdb", "msgspec", "pyarrow", "traceinsight"]
    found = []
    for n in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{n} {metadata.version(n)}")
    return f"Python {platform.python_version()}, " + ", ".join(found)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "-"


def cost_tables(rows: list[Row]) -> list[str]:
    """The MB per CPU-second table and the stage table of the profiled rows."""
    done = [r for r in rows if r.floor and r.stages]
    if not done:
        return []
    rates = [RowRate(r.key, decoded_mb(r.paths), median(r.ours).cpu_s, median(r.ours).wall_s,
                     r.floor["scan_only_s"], r.floor["scan_events_s"], r.floor["mb"]) for r in done]
    return ["", "MB of JSON per CPU-second (median ingest CPU; the scanner alone over the same pieces, one "
            "thread):", "", rate_table(rates), "",
            "CPU seconds per stage, one profiled ingest per row (`benchmarks/profile_ingest.py`):", "",
            stage_table({r.key: r.stages for r in done})]


def report(rows: list[Row], qrows: list[tuple[str, float, float, float]], raw: tuple[Run, Run, Run] | None,
           loads: tuple[tuple[float, ...], tuple[float, ...]], args: argparse.Namespace,
           curve: tuple[Row, list[WorkerPoint]] | None = None) -> str:
    mem = psutil.virtual_memory().total / 2**30
    lines = [
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {mem:.0f} GiB; {versions()}. "
        f"Date: {dt.date.today()}. Load average before {loads[0][0]:.2f}/{loads[0][1]:.2f}, "
        f"after {loads[1][0]:.2f}/{loads[1][1]:.2f} (1/5 min). Median of {args.repeat} (HTA: {args.hta_repeat}).",
        "",
        "| row | input | size on disk | ours wall | ours peak RSS | ours CPU | HTA wall | HTA peak RSS | speed-up "
        "| memory vs HTA |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o = median(r.ours)
        t = median(r.theirs) if r.theirs else None
        lines.append(
            f"| {r.key} | {r.label} | {size_of(r.paths) / 1e6:,.0f} MB | {o.wall_s:.2f} s | {o.peak_gb:.2f} GB "
            f"| {o.cpu_s:.1f} s | " + (f"{t.wall_s:.1f} s | {t.peak_gb:.2f} GB | **{ratio(t.wall_s, o.wall_s)}** "
                                        f"| **{o.peak_gb / t.peak_gb:.2f}** |" if t else "skipped | | | |"))
    lines += cost_tables(rows)
    if curve:
        lines += ["", workers_table(curve[0].key, decoded_mb(curve[0].paths), curve[1], os.cpu_count() or 1)]
    if qrows:
        lines += ["", "| command on the database of row " + ("d-100MB" if args.quick else "a-plain")
                  + " | query alone, first call | later calls | whole command |", "|---|---|---|---|"]
        lines += [f"| {n} | {a:.3f} s | " + ("" if b != b else f"{b:.3f} s") + " | "
                  + ("" if w != w else f"{w:.2f} s") + " |" for n, a, b, w in qrows]
    if raw:
        lines += ["", "| breakdown | wall |", "|---|---|",
                  f"| straight on the raw trace | {raw[0].wall_s:.2f} s |",
                  f"| ingest + breakdown on the database | {raw[1].wall_s:.2f} + {raw[2].wall_s:.2f} = "
                  f"{raw[1].wall_s + raw[2].wall_s:.2f} s |"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, 1 repeat, HTA on the smallest only")
    parser.add_argument("--repeat", type=int, default=None, help="runs of our ingest per row (default 3; quick 1)")
    parser.add_argument("--hta-repeat", type=int, default=None, help="runs of HTA per row (default 3; quick 1)")
    parser.add_argument("--only", default="", help="comma-separated row keys or letters (a,b,c,d or b-gz ...)")
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--hta-max-gb", type=float, default=HTA_MAX_GB,
                        help="no HTA on rows of more JSON than this (default 2: HTA took 27 min and 21 GB "
                             "on the 5 GB row)")
    parser.add_argument("--no-queries", action="store_true")
    parser.add_argument("--no-profile", action="store_true",
                        help="no scanner-alone pass and no profiled ingest per row")
    parser.add_argument("--workers", type=parse_workers, default=None,
                        help="worker counts of the curve of --workers-row (default 1,2,4,8,16; quick: 1,2)")
    parser.add_argument("--no-workers", action="store_true", help="no curve by worker count")
    parser.add_argument("--workers-row", default=None, help="the row of the curve (default a-plain; quick: d-100MB)")
    parser.add_argument("--work", type=Path, default=HERE / "out")
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.hta_repeat = args.hta_repeat or (1 if args.quick else 3)
    if args.workers is None and not args.no_workers:
        args.workers = [1, 2] if args.quick else [1, 2, 4, 8, 16]
    if not RN50.is_file() or not DENSE.is_file():
        print(f"source traces under {SHARED} are absent (../shared)", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    beside = Path(sys.executable).with_name("trace-report")  # this interpreter's own, before any on PATH
    cli = str(beside) if beside.is_file() else shutil.which("trace-report")
    load_before = os.getloadavg()
    rows = inputs(args)
    for row in rows:
        bench_row(row, args, cli)
    if not args.no_profile:
        for row in rows:
            profile_row(row, args.work)
    curve = None
    if args.workers and not args.no_workers:
        key = args.workers_row or ("d-100MB" if args.quick else "a-plain")
        found = [r for r in rows if r.key == key] or inputs(args, key)
        if not found:
            print(f"no row {key!r} for --workers-row", file=sys.stderr)
            return 1
        curve = (found[0], worker_curve(found[0], args.workers, args, cli))
    qrows: list[tuple[str, float, float, float]] = []
    raw = None
    if not args.no_queries:
        qdb = args.work / ("d-100MB.duckdb" if args.quick else "a-plain.duckdb")
        if qdb.is_file():
            qrows = queries(qdb, cli)
        dense = args.work / ("densex2.json" if args.quick else "densex11.json")
        if dense.is_file():
            raw = raw_vs_ingest(dense, args.work, cli)
    print(report(rows, qrows, raw, (load_before, os.getloadavg()), args, curve))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
