"""Ingest benchmark: trace-report against HTA on one ~1 GB trace, in the same run.

Builds (once) a ~1.1 GB trace by replicating a real V100 ResNet-50 trace from ../shared 40x
(timestamps and correlation ids shifted per copy, see make_big_trace.py), then measures wall
time and peak RSS (summed over the process and its workers, sampled every 20 ms) of:
  * ``trace-report ingest BIG.json -o DB``,
  * HTA's ``TraceAnalysis`` loading the same file (traceinsight, default json backend),
and prints both ratios, plus the time of ``top-kernels`` on the database (the query alone,
and the whole command). With ``--gz`` both tools read the same trace gzip-compressed
(``BIG.json.gz``, built once from BIG.json), the streamed path of the ingest. Results go in
docs/benchmarks.md by hand, with the machine and date.

Usage: python benchmarks/ingest.py [--copies 40] [--work DIR] [--skip-hta] [--gz]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import shapes  # benchmarks/shapes.py, beside this script

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared/data/traces/kineto_rn50_nw4_2021jun/worker0.1623212756351.pt.trace.json.gz"

HTA_SNIPPET = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
"""

TOP_SNIPPET = """
import sys, time
import trace_report as tr
db = tr.open(sys.argv[1])
t = time.perf_counter()
frame = db.top_kernels(limit=20)
print(f"{time.perf_counter() - t:.3f}")
"""


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB summed over the process tree) of running ``cmd``
    (``shapes.measure``, the one sampler of both benchmarks)."""
    run = shapes.measure(cmd)
    return run.wall_s, run.peak_gb


def gzip_file(plain: Path, out: Path) -> None:
    """``out`` = ``plain`` gzip-compressed (level 6, as ``gzip`` and Kineto's ``use_gzip``)."""
    part = out.with_suffix(".part")
    with open(plain, "rb") as src, gzip.open(part, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 8 << 20)
    part.rename(out)


def decoded(path: Path) -> str:
    """The decompressed size of a gzip file as its trailer records it (modulo 4 GiB)."""
    with open(path, "rb") as fh:
        fh.seek(-4, 2)
        return f"{int.from_bytes(fh.read(4), 'little') / 1e9:.2f} GB decoded"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--work", type=Path, default=HERE / "out")
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--gz", action="store_true", help="ingest the trace gzip-compressed (BIG.json.gz)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of our ingest; the median is reported")
    args = parser.parse_args(argv)
    if not SOURCE.is_file():
        print(f"source trace {SOURCE} is absent (../shared)", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    big = args.work / f"rn50x{args.copies}.json"
    if not big.is_file() and not (args.gz and big.with_suffix(".json.gz").is_file()):
        subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), str(SOURCE), str(big),
                        "--copies", str(args.copies)], check=True)
    if args.gz:
        if not big.with_suffix(".json.gz").is_file():
            gzip_file(big, big.with_suffix(".json.gz"))
        big = big.with_suffix(".json.gz")
    db = args.work / "bench.duckdb"
    beside = Path(sys.executable).with_name("trace-report")  # this interpreter's own, before any on PATH
    cli = str(beside) if beside.is_file() else shutil.which("trace-report")
    print(f"machine: {platform.node()} {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
          f"trace {big.stat().st_size / 1e9:.2f} GB{' gzip, ' + decoded(big) if args.gz else ''}")
    runs = []
    for _ in range(max(1, args.repeat)):
        shutil.rmtree(args.work / "bench.duckdb.events", ignore_errors=True)
        db.unlink(missing_ok=True)
        runs.append(measure([cli, "ingest", str(big), "-o", str(db), "--no-progress"]))
    ours = sorted(runs)[len(runs) // 2]
    print(f"trace-report ingest: {ours[0]:.2f} s (median of {len(runs)}: "
          f"{', '.join(f'{w:.2f}' for w, _ in runs)}), peak RSS {max(r for _, r in runs):.2f} GB")
    query = subprocess.run([sys.executable, "-c", TOP_SNIPPET, str(db)], capture_output=True, text=True, check=True)
    top_wall, _ = measure([cli, "top-kernels", str(db), "-n", "20", "-f", "csv"])
    print(f"top-kernels on the database: query {float(query.stdout):.3f} s, whole command {top_wall:.2f} s")
    if args.skip_hta:
        return 0
    hta_dir = args.work / "hta"
    hta_dir.mkdir(exist_ok=True)
    for old in hta_dir.iterdir():  # one trace in the folder: the plain or the gzip one
        old.unlink()
    link = hta_dir / ("rank-0.json.gz" if args.gz else "rank-0.json")
    link.symlink_to(big.resolve())
    hta = measure([sys.executable, "-c", HTA_SNIPPET, str(hta_dir)])
    print(f"HTA TraceAnalysis:   {hta[0]:.2f} s, peak RSS {hta[1]:.2f} GB")
    print(f"ratio: {hta[0] / ours[0]:.1f}x faster, {ours[1] / hta[1]:.2f} of HTA's peak RSS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
