"""Analysis commands on a 1M-event trace against `breakdown` (issue 36 item 7: `ops` and `report`
within 3x of `breakdown`), runs interleaved, bytecode cached as users run.

The trace: the H100 BERT trace of ../shared (tracelens_h100_bert_small: one ProfilerStep, Python
stacks; 2,059 of its events stored) copied 485 times by make_big_trace.py with the steps
renumbered: 998,615 events stored, 485 steps, 29,585 GPU operations, 671,725 Python-function events. It is built and
ingested once into --work (a database of 1 M events keeps nothing at ingest: the first command
computes and keeps the breakdown's tables, so a warm-up run of every command comes first, as a user's
second command would find it). Prints a Markdown table: median and range of wall time and median CPU
time (user + system of the command's process) per command, and the ratio of the medians to
`breakdown`.

Usage: python benchmarks/commands.py [--runs 5] [--copies 485] [--work DIR]
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "data" / "traces" / "tracelens_h100_bert_small"
sys.path.insert(0, str(HERE))

from make_big_trace import build  # noqa: E402
from startup import prepared, timed, timing_parser  # noqa: E402


def database(cli: str, work: Path, copies: int) -> Path:
    """The ingested 1M-event database in ``work`` (built once)."""
    db = work / f"commands-bert-x{copies}.duckdb"
    if db.is_file():
        return db
    trace = work / f"commands-bert-x{copies}.json"
    source = next(p for p in sorted(SOURCE.iterdir()) if ".json" in p.name)
    build(source, trace, copies, renumber_steps=True)
    try:
        subprocess.run([cli, "ingest", str(trace), "-o", str(db), "-q"], check=True, stderr=subprocess.DEVNULL)
    finally:
        trace.unlink(missing_ok=True)
    return db


def one_step(db: Path) -> int:
    """Step 400 when the trace has it (485 copies: the runs in docs/benchmarks.md), else its middle step."""
    import trace_report as tr

    with tr.open(db) as handle:
        rows = handle.con.execute("SELECT step FROM steps WHERE step IS NOT NULL ORDER BY 1").fetchall()
    steps = [s for (s,) in rows]
    return 400 if 400 in steps else int(steps[len(steps) // 2])


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__, 5)
    parser.add_argument("--copies", type=int, default=485, help="copies of the source trace (default 485: 1M events)")
    args = parser.parse_args(argv)
    cli = prepared(SOURCE, args.work)
    if cli is None:
        return 1
    db = database(cli, args.work, args.copies)
    html = args.work / "commands-report.html"
    step = one_step(db)
    commands = {name: [cli, *words, str(db)] for name, words in (
        ("breakdown", ["breakdown"]), ("top-kernels", ["top-kernels"]), ("ops", ["ops"]), ("advise", ["advise"]),
        (f"critical-path --step {step}", ["critical-path", "--step", str(step)]))}
    commands["report"] = [cli, "report", str(db), "-o", str(html)]
    for cmd in commands.values():  # warm: page cache, bytecode, the tables kept beside the database
        timed(cmd)
    load_before = os.getloadavg()[0]
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            runs[name].append(timed(cmd))
    base = statistics.median(w for w, _ in runs["breakdown"])
    print(f"Machine: {os.uname().nodename}, {os.cpu_count()} cores; Python {sys.version.split()[0]}. "
          f"Date: {dt.date.today()}. {db.name}; {args.runs} interleaved runs each after one warm-up; load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after.\n")
    print("| command | median wall | range | median CPU | vs breakdown |")
    print("|---|---|---|---|---|")
    for name, got in runs.items():
        walls = [w for w, _ in got]
        med = statistics.median(walls)
        print(f"| `{name}` | {med:.2f} s | {min(walls):.2f}-{max(walls):.2f} s | "
              f"{statistics.median(c for _, c in got):.2f} s | {med / base:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
