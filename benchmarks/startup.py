"""Start-up benchmark: `trace-report --help` and `top-kernels` on a small
database against `python -c "import duckdb"`, runs interleaved, bytecode cached as users run.

The small database is the ingested hta_a100_ddp_nccl trace of ../shared (built once into
benchmarks/out/). Prints a Markdown table: median and range of wall time per command and the
ratio of the medians to `import duckdb`.

Usage: python benchmarks/startup.py [--runs 15] [--work DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SMALL = HERE.parent.parent / "shared" / "data" / "traces" / "hta_a100_ddp_nccl"


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd``, bytecode written as users run (CPU: the user + system time
    of the command's process tree)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall_s, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def wall(cmd: list[str]) -> float:
    return timed(cmd)[0]


def cli_path() -> str:
    """This interpreter's own ``trace-report`` install first, else the one on PATH."""
    beside = Path(sys.executable).with_name("trace-report")
    return str(beside) if beside.is_file() else str(shutil.which("trace-report"))


def timing_parser(doc: str, runs: int) -> argparse.ArgumentParser:
    """The options every timing benchmark takes: ``--runs`` (interleaved runs of each command)
    and ``--work`` (where its inputs are built once)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=runs, help=f"interleaved runs of each command (default {runs})")
    parser.add_argument("--work", type=Path, default=HERE / "out")
    return parser


def prepared(source: Path, work: Path) -> str | None:
    """The CLI to time, with ``work`` created; None (said on stderr) when ``source`` is absent."""
    if not source.is_dir():
        print(f"{source} is absent (../shared)", file=sys.stderr)
        return None
    work.mkdir(parents=True, exist_ok=True)
    return cli_path()


def main(argv: list[str] | None = None) -> int:
    args = timing_parser(__doc__, 15).parse_args(argv)
    cli = prepared(SMALL, args.work)
    if cli is None:
        return 1
    db = args.work / "startup-small.duckdb"
    if not db.is_file():
        subprocess.run([cli, "ingest", str(SMALL), "-o", str(db), "-q"], check=True, stderr=subprocess.DEVNULL)
    commands = {
        'python -c "import duckdb"': [sys.executable, "-c", "import duckdb"],
        "trace-report --help": [cli, "--help"],
        "trace-report top-kernels SMALL.duckdb": [cli, "top-kernels", str(db)],
    }
    for cmd in commands.values():  # warm the page cache and the bytecode
        wall(cmd)
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            times[name].append(wall(cmd))
    base = statistics.median(times['python -c "import duckdb"'])
    print(f"Machine: {os.uname().nodename}, {os.cpu_count()} cores; Python {sys.version.split()[0]}. "
          f"Date: {dt.date.today()}. {args.runs} interleaved runs each; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after (above ~0.5 on 2 cores the ratios grow: other work slows the longer "
          "command more).\n")
    print("| command | median wall | range | vs import duckdb |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| `{name}` | {med:.3f} s | {min(ts):.3f}-{max(ts):.3f} s | {med / base:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
