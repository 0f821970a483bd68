"""Ingest from object storage against the same trace on local disk (``s3://`` vs a path), in one run.

Starts moto's S3 server (``moto[server]``, the dev extra) in this process on localhost, uploads
the inputs and measures ``trace-report ingest`` of each from its ``s3://`` URL and from its local
path, taking turns: wall time and peak RSS summed over the process tree (``shapes.measure``;
moto's memory is this process's, not counted), and the ratios s3/local. moto on localhost has
no network latency and no bandwidth limit, so the ratio is a lower bound on what real object
storage costs, not an estimate of it; but moto is a Python server that shares the CPUs with the
ingest, which a real endpoint does not.

Inputs (built once into ``--work``, from the shared V100 ResNet-50 trace, as benchmarks/ingest.py):
  * ``plain``: the trace as plain JSON (31 MB; larger than the head the kind detection reads, so
    it is streamed from one GET, not copied),
  * ``gz``: ``--copies`` copies of it, gzip-compressed (make_big_trace.py; 5 copies: 5 MB, past the
    head too, so the streamed gzip path).
Results go in docs/benchmarks.md by hand, with the machine, date and load.

Usage: python benchmarks/s3_ingest.py [--work DIR] [--copies 5] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import shapes  # benchmarks/shapes.py, beside this script

from trace_report.inputs import HEAD_BYTES

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared/data/traces/kineto_rn50_nw4_2021jun/worker0.1623212756351.pt.trace.json.gz"
ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
       "AWS_EC2_METADATA_DISABLED": "true"}
BUCKET = "trace-report-bench"


def inputs(work: Path, copies: int) -> dict[str, Path]:
    """The local inputs by row name, built once."""
    plain = work / "rn50.json"
    if not plain.is_file():
        with gzip.open(SOURCE) as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
    gz = work / f"rn50x{copies}.json.gz"
    if not gz.is_file():
        subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), str(SOURCE), str(gz),
                        "--copies", str(copies)], check=True)
    return {"plain": plain, "gz": gz}


def start_s3() -> object:
    """moto's server on a free port of localhost, its endpoint in this process's environment
    (inherited by every ingest measured)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(ENV, AWS_ENDPOINT_URL=f"http://{host}:{port}")
    return server


def upload(local: Path, url: str) -> None:
    from trace_report import storage

    storage.write_file(url, local)


def ingest(cli: str, target: str, db: Path) -> shapes.Run:
    shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
    db.unlink(missing_ok=True)
    return shapes.measure([cli, "ingest", target, "-o", str(db), "--no-progress"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=HERE / "out" / "s3")
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each ingest; the median is reported")
    args = parser.parse_args(argv)
    if not SOURCE.is_file():
        print(f"source trace {SOURCE} is absent (../shared)", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    rows = inputs(args.work, args.copies)
    server = start_s3()
    try:
        import pyarrow.fs as pafs

        fs, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}?allow_bucket_creation=true")
        fs.create_dir(BUCKET)
        beside = Path(sys.executable).with_name("trace-report")  # this interpreter's own, before any on PATH
        cli = str(beside) if beside.is_file() else shutil.which("trace-report") or "trace-report"
        db = args.work / "bench.duckdb"
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared: ratios only)")
        print("| input | size | local wall | s3 wall | wall s3/local | local peak RSS | s3 peak RSS | RSS s3/local |")
        print("|---|---|---|---|---|---|---|---|")
        for name, local in rows.items():
            streamed = local.stat().st_size > HEAD_BYTES
            url = f"s3://{BUCKET}/{local.name}"
            upload(local, url)
            here, there = [], []
            for _ in range(max(1, args.repeat)):  # taking turns: the machine's load drifts
                here.append(ingest(cli, str(local), db))
                there.append(ingest(cli, url, db))
            a, b = (sorted(runs, key=lambda r: r.wall_s)[len(runs) // 2] for runs in (here, there))
            print(f"| {name} | {local.stat().st_size / 1e6:.0f} MB | {a.wall_s:.2f} s | {b.wall_s:.2f} s | "
                  f"**{b.wall_s / a.wall_s:.2f}x** | {a.peak_gb:.2f} GB | {b.peak_gb:.2f} GB | "
                  f"**{b.peak_gb / a.peak_gb:.2f}** |{'' if streamed else ' (not streamed: within the head)'}")
    finally:
        server.stop()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
