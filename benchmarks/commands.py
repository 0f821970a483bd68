"""Analysis commands on a 1M-event trace against `breakdown` (the target: `ops` and `report`
within 3x of `breakdown`), runs interleaved, bytecode cached as users run.

The trace: the H100 BERT trace of ../shared (tracelens_h100_bert_small: one ProfilerStep, Python
stacks; 2,059 of its events stored) copied 485 times by make_big_trace.py with the steps
renumbered: 998,615 events stored, 485 steps, 29,585 GPU operations, 671,725 Python-function events. It is built and
ingested once into --work (a database of 1 M events keeps nothing at ingest: the first command
computes and keeps the breakdown's tables, so a warm-up run of every command comes first, as a user's
second command would find it). Prints a Markdown table: median and range of wall time and median CPU
time (user + system of the command's process) per command, and the ratio of the medians to
`breakdown`.

With several ``--copies`` (``1,121,242,485``) it times each size and fits a line per command
through the median walls: the fixed cost (imports, opening, views) and the cost per million
events, which shows whether any command grows faster than its trace (a super-linear step).

``--input trace`` times the commands on the JSON trace itself, as a user's first command on a
trace file runs: every run ingests it into memory and computes every table it reads (nothing is
kept between runs); ``both`` times the database, then the trace. The JSON files stay in --work
(0.32 GB at x 485).

``--cache`` times what the per-trace tables kept beside a database (trace_report.store.cache)
cost and save instead: the ingest's CPU without and with ``--precompute``, and ``breakdown``'s
first run on a database (nothing kept: it computes and keeps its tables) against its second
(reads them), each on a fresh database per run.

Usage: python benchmarks/commands.py [--runs 5] [--copies 485 | --copies 1,121,242,485] [--input database|trace|both]
       [--cache] [--work DIR]
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


def trace_file(work: Path, copies: int) -> Path:
    """The JSON trace of ``copies`` copies in ``work`` (built once)."""
    trace = work / f"commands-bert-x{copies}.json"
    if not trace.is_file():
        source = next(p for p in sorted(SOURCE.iterdir()) if ".json" in p.name)
        build(source, trace, copies, renumber_steps=True)
    return trace


def database(cli: str, work: Path, copies: int, *, keep_trace: bool = False) -> Path:
    """The ingested database of ``copies`` copies in ``work`` (built once); its JSON trace is
    removed after the ingest unless ``keep_trace``."""
    db = work / f"commands-bert-x{copies}.duckdb"
    if db.is_file():
        return db
    trace = trace_file(work, copies)
    try:
        subprocess.run([cli, "ingest", str(trace), "-o", str(db), "-q"], check=True, stderr=subprocess.DEVNULL)
    finally:
        if not keep_trace:
            trace.unlink(missing_ok=True)
    return db


def one_step(db: Path) -> int:
    """Step 400 when the trace has it (485 copies: the runs in docs/benchmarks.md), else its middle step."""
    import trace_report as tr

    with tr.open(db) as handle:
        rows = handle.con.execute("SELECT step FROM steps WHERE step IS NOT NULL ORDER BY 1").fetchall()
    steps = [s for (s,) in rows]
    return 400 if 400 in steps else int(steps[len(steps) // 2])


def events_stored(db: Path) -> int:
    """Events of the database (the x axis of the scaling fit)."""
    import trace_report as tr

    with tr.open(db) as handle:
        return int(handle.con.execute("SELECT count(*) FROM events").fetchone()[0])


def linear_fit(events: list[int], walls: list[float]) -> tuple[float, float]:
    """(fixed seconds, seconds per million events) of the least-squares line through the
    ``(events, wall)`` points (``statistics.linear_regression``); a constant cost per command
    and a cost per event, which a super-linear step would show as points bending above it."""
    slope, intercept = statistics.linear_regression([e / 1e6 for e in events], walls)
    return intercept, slope


def time_commands(cli: str, db: Path, html: Path, runs: int, step: int) -> dict[str, list[tuple[float, float]]]:
    """``(wall, CPU)`` of each command on ``db`` (a database or a trace file), ``runs`` interleaved
    runs after one warm-up of each (``critical-path`` of ProfilerStep ``step``)."""
    commands = {name: [cli, *words, str(db)] for name, words in (
        ("breakdown", ["breakdown"]), ("top-kernels", ["top-kernels"]), ("ops", ["ops"]), ("advise", ["advise"]),
        ("critical-path", ["critical-path", "--step", str(step)]))}
    commands["report"] = [cli, "report", str(db), "-o", str(html)]
    for cmd in commands.values():  # warm: page cache, bytecode, the tables kept beside the database
        timed(cmd)
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            got[name].append(timed(cmd))
    return got


def time_cache(cli: str, work: Path, copies: int, runs: int) -> dict[str, list[tuple[float, float]]]:
    """``(wall, CPU)`` per run of the ingest without and with ``--precompute`` and of ``breakdown``'s
    first and second run on the database ingested without it (a fresh database each run)."""
    trace = trace_file(work, copies)
    db = work / f"cache-bert-x{copies}.duckdb"
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in (
        "ingest", "ingest --precompute", "breakdown, first run", "breakdown, second run")}
    for _ in range(runs):
        for flags in (["--precompute"], []):
            _remove_database(db)
            got[" ".join(["ingest", *flags])].append(timed([cli, "ingest", str(trace), "-o", str(db), "-q", *flags]))
        got["breakdown, first run"].append(timed([cli, "breakdown", str(db)]))
        got["breakdown, second run"].append(timed([cli, "breakdown", str(db)]))
    _remove_database(db)
    return got


def _remove_database(db: Path) -> None:
    """The database file and its events folder (with the tables kept beside it), when there."""
    import shutil

    db.unlink(missing_ok=True)
    shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)


def print_cache(runs: dict[str, list[tuple[float, float]]], label: str) -> None:
    print(f"{label}\n")
    print("| step | median wall | median CPU |")
    print("|---|---|---|")
    for name, got in runs.items():
        print(f"| `{name}` | {statistics.median(w for w, _ in got):.2f} s | "
              f"{statistics.median(c for _, c in got):.2f} s |")
    print()


def print_runs(runs: dict[str, list[tuple[float, float]]], label: str, step: int) -> None:
    base = statistics.median(w for w, _ in runs["breakdown"])
    print(f"{label}\n")
    print("| command | median wall | range | median CPU | vs breakdown |")
    print("|---|---|---|---|---|")
    for name, got in runs.items():
        walls = [w for w, _ in got]
        med = statistics.median(walls)
        shown = f"critical-path --step {step}" if name == "critical-path" else name
        print(f"| `{shown}` | {med:.2f} s | {min(walls):.2f}-{max(walls):.2f} s | "
              f"{statistics.median(c for _, c in got):.2f} s | {med / base:.1f}x |")
    print()


def print_scaling(sizes: list[tuple[int, dict[str, list[tuple[float, float]]]]]) -> None:
    """Median wall per command and trace size, and the fitted fixed cost and cost per 1M events
    (``critical-path``: one step per size, the same step from 485 copies on, :func:`one_step`)."""
    print("| command | " + " | ".join(f"{n:,} events" for n, _ in sizes) + " | fixed | per 1M events |")
    print("|---|" + "---|" * (len(sizes) + 2))
    for name in sizes[0][1]:
        walls = [statistics.median(w for w, _ in runs[name]) for _, runs in sizes]
        fixed, per_m = linear_fit([n for n, _ in sizes], walls)
        print(f"| `{name}` | " + " | ".join(f"{w:.2f} s" for w in walls) + f" | {fixed:.2f} s | {per_m:.2f} s |")


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__, 5)
    parser.add_argument("--copies", default="485",
                        help="copies of the source trace, or several comma-separated for the scaling table "
                             "(default 485: 1M events)")
    parser.add_argument("--input", choices=("database", "trace", "both"), default="database",
                        help="what the commands read: the ingested database (default), the JSON trace (each "
                             "run ingests it), or both")
    parser.add_argument("--cache", action="store_true",
                        help="time the ingest without and with --precompute and breakdown's first and second run")
    args = parser.parse_args(argv)
    copies = list(dict.fromkeys(int(c) for c in str(args.copies).split(",")))  # each size once, in order
    cli = prepared(SOURCE, args.work)
    if cli is None:
        return 1
    html = args.work / "commands-report.html"
    load_before = os.getloadavg()[0]
    print(f"Machine: {os.uname().nodename}, {os.cpu_count()} cores; Python {sys.version.split()[0]}. "
          f"Date: {dt.date.today()}. {args.runs} interleaved runs of each command after one warm-up.\n")
    if args.cache:
        for n in copies:
            runs = time_cache(cli, args.work, n, args.runs)
            print_cache(runs, f"BERT x {n}: the tables kept per trace, {args.runs} run(s) each")
        print(f"\nLoad average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.")
        return 0
    inputs = ("database", "trace") if args.input == "both" else (args.input,)
    for kind in inputs:
        sizes = []
        for n in copies:
            db = database(cli, args.work, n, keep_trace=args.input != "database")
            step = one_step(db)
            target = db if kind == "database" else trace_file(args.work, n)
            runs = time_commands(cli, target, html, args.runs, step)
            events = events_stored(db)
            sizes.append((events, runs))
            what = "" if kind == "database" else " (every run ingests it)"
            print_runs(runs, f"{target.name}{what}: {events:,} events; load average {os.getloadavg()[0]:.2f}", step)
        if len(sizes) > 1:
            print_scaling(sizes)
    print(f"\nLoad average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
