"""Where the CPU of one ingest goes, stage by stage.

Runs ``trace-report ingest`` in this process (the command's own code path, decoding threads
included) with the functions of each stage wrapped: every call charges the CPU time of its own
thread (``time.thread_time``: user + system of that thread) to its stage, a call inside another
stage's call only to the inner one, so that the stages add up without counting twice. What no
stage claims (the driver's glue, the threads' start, logging, the interpreter's own work) is
"other"; the start-up (the interpreter, and every module the command loads, imported here before
the ingest begins so that their functions can be wrapped) is the process's CPU time until then.
Wrapping costs a few microseconds per call and is applied only per piece, per file or per
command, never per event.

Stages (the functions wrapped):

- ``read (plain byte ranges)``: reading a plain file's pieces (``Job.raw``); ``SHA-256 (plain)``:
  reading and hashing the whole file (``digests.sha256_file``, in a thread of its own);
- ``inflate (gzip) + SHA-256``: ``kineto._HashingReader.read`` (zlib-ng, and the digest of the
  compressed bytes);
- ``cut into pieces``: ``kineto.PieceStream`` (finding event boundaries, joining blocks);
- ``scan``: the compiled scanner (``_scan.scan_events``: JSON validated, columns written as
  buffers), and ``scan: UTF-8 check, Arrow arrays``: the rest of ``kineto._scanned_piece``;
- ``msgspec (declined pieces)``: pieces the scanner declines;
- ``normalise`` (``normalize.finalize``), with its ``secret screen``, ``duplicate keys`` and
  ``edge rows`` apart;
- ``Parquet writing``: ``store.pieces.write_parquet`` as the ingest calls it;
- ``duplicates``: ``normalize.count_duplicates`` over a trace's keys;
- ``catalog (DuckDB)``: what ``pipeline.finish_ingest`` does outside the stages above (DuckDB's
  connection and schema, the ``traces`` rows, the catalog, the checkpoint and rename);
- ``derived tables``: the breakdown kept at ingest (``cli.ingest._keep_breakdown``), DuckDB's own
  threads included (the CPU of the whole process while it runs: the decoding is over by then);
- ``job glue``: ``decoding.run_job`` outside the stages it calls;
- ``resolve inputs``: ``inputs.resolve`` (what each path is); ``runs note (DuckDB)``: the line
  naming the runs of a database of several traces (``cli.ingest._say_runs``), DuckDB's threads
  included. Elsewhere DuckDB's threads (the checkpoint) fall under ``other``.

Usage: python benchmarks/profile_ingest.py TRACE... [--workers N] [--work DIR] [--json]
Prints a Markdown table (stage, CPU seconds, share, MB of JSON per CPU-second of the stage);
Then each stage's wall-clock span (first start and last end in any thread, from the command's
start): on many cores, what overlaps the decoding and what runs after it, alone.
``--json`` prints ``{"mb": ..., "cpu_s": ..., "stages": {stage: seconds}, "spans": {stage: [start, end]}}``
(``cpu_s``: the stages' sum).
"""

from __future__ import annotations

import resource


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


import argparse  # noqa: E402 - after the first CPU reading, on purpose
import functools  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent

ORDER = [
    "start-up (interpreter, imports)", "read (plain byte ranges)", "SHA-256 (plain)", "inflate (gzip) + SHA-256",
    "cut into pieces", "scan", "scan: UTF-8 check, Arrow arrays", "msgspec (declined pieces)", "normalise",
    "normalise: secret screen", "normalise: duplicate keys", "normalise: edge rows", "Parquet writing",
    "duplicates", "job glue", "catalog (DuckDB)", "derived tables", "resolve inputs", "runs note (DuckDB)", "other",
]
"""Stages in the order the table lists them."""


class StageClock:
    """CPU seconds per stage, charged per thread to the innermost stage being run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.spans: dict[str, list[float]] = {}
        """Wall clock (``time.perf_counter``) of each stage's first start and last end, any thread:
        on many cores, which stages overlap the decoding and which run after it, alone."""
        self._lock = threading.Lock()
        self._local = threading.local()

    def _stack(self) -> list[list[Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def enter(self, stage: str) -> None:
        wall = time.perf_counter()
        with self._lock:
            self.spans.setdefault(stage, [wall, wall])
        now = time.thread_time()
        stack = self._stack()
        if stack:
            self._charge(stack[-1][0], now - stack[-1][1])
        stack.append([stage, now])

    def leave(self) -> None:
        now = time.thread_time()
        stack = self._stack()
        stage, since = stack.pop()
        self._charge(stage, now - since)
        wall = time.perf_counter()
        with self._lock:
            span = self.spans[stage]
            span[1] = max(span[1], wall)
        if stack:
            stack[-1][1] = now

    def _charge(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.seconds[stage] += seconds

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(stage)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()
        return timed

    def wrap_process(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """As :meth:`wrap`, and the CPU time of the process's other threads during the call is
        charged to ``stage`` too: for a stage run after the decoding (nothing else works then)
        whose library runs threads of its own (DuckDB's queries)."""
        timed_here = self.wrap(stage, fn)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            process, thread = _cpu(), time.thread_time()
            try:
                return timed_here(*args, **kwargs)
            finally:
                others = (_cpu() - process) - (time.thread_time() - thread)
                self._charge(stage, max(0.0, others))
        return timed

    def wrap_generator(self, stage: str, fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        """Each step of the generator ``fn`` returns is charged to ``stage``."""
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            inner = fn(*args, **kwargs)
            while True:
                self.enter(stage)
                try:
                    item = next(inner)
                except StopIteration:
                    return
                finally:
                    self.leave()
                yield item
        return timed


class _ScanProxy:
    """The compiled scanner module with ``scan_events`` timed (the module's own attributes
    cannot be replaced from outside on every build)."""

    def __init__(self, module: Any, clock: StageClock) -> None:
        self._module = module
        self.scan_events = clock.wrap("scan", module.scan_events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def instrument(clock: StageClock) -> None:
    """Wrap the functions of every stage (see the module docstring), where they are looked up."""
    from trace_report.cli import ingest as cli_ingest
    from trace_report.formats import kineto
    from trace_report.ingest import decoding, digests, files, normalize, pipeline, start
    from trace_report.store import pieces

    def patch(owner: Any, name: str, stage: str, generator: bool = False, process: bool = False) -> None:
        fn = getattr(owner, name)
        wrap = clock.wrap_generator if generator else clock.wrap_process if process else clock.wrap
        setattr(owner, name, wrap(stage, fn))

    patch(decoding.Job, "raw", "read (plain byte ranges)")
    patch(digests, "sha256_file", "SHA-256 (plain)")
    patch(files, "sha256_file", "SHA-256 (plain)")
    patch(kineto._HashingReader, "read", "inflate (gzip) + SHA-256")
    patch(kineto.PieceStream, "_pieces", "cut into pieces", generator=True)
    patch(kineto.PieceStream, "split_tail", "cut into pieces")
    if kineto._scan is not None:
        kineto._scan = _ScanProxy(kineto._scan, clock)
    patch(kineto, "_scanned_piece", "scan: UTF-8 check, Arrow arrays")
    patch(kineto, "_decode_piece", "msgspec (declined pieces)")
    patch(decoding, "finalize", "normalise")
    patch(normalize, "_redact_column", "normalise: secret screen")
    patch(normalize, "row_keys", "normalise: duplicate keys")
    patch(normalize, "_dictionary_hashes", "normalise: duplicate keys")
    patch(normalize, "_edge_rows", "normalise: edge rows")
    for owner in (decoding, pipeline, pieces):
        patch(owner, "write_parquet", "Parquet writing")
    for owner in (decoding, pipeline):
        patch(owner, "count_duplicates", "duplicates")
    patch(decoding, "run_job", "job glue")
    patch(start, "run_job", "job glue")
    patch(pipeline, "finish_ingest", "catalog (DuckDB)")
    patch(cli_ingest, "_keep_breakdown", "derived tables", process=True)  # DuckDB's threads included
    patch(cli_ingest, "_say_runs", "runs note (DuckDB)", process=True)
    patch(start, "resolve", "resolve inputs")


def decoded_mb(paths: list[Path]) -> float:
    """MB of JSON in ``paths`` (files, or folders of them): gzip files counted decompressed."""
    from trace_report.formats.kineto import open_stream

    total = 0
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                with open_stream(f) as fh:
                    while chunk := fh.read(1 << 24):
                        total += len(chunk)
    return total / 1e6


def profile(paths: list[Path], db: Path, workers: int | None) -> tuple[dict[str, float], dict[str, list[float]]]:
    """CPU seconds per stage of ``trace-report ingest PATHS -o DB`` run here (``start-up`` and
    ``other`` included; their sum is the process's CPU time), and each stage's wall-clock span
    ``[first start, last end]`` in seconds from the command's start (``command`` spans it whole)."""
    from trace_report.sysutil import decoding_settings

    decoding_settings()  # as the command, before instrument() imports numpy and pyarrow
    from trace_report.cli.app import main as cli_main  # noqa: F401 - the command's imports, as start-up

    clock = StageClock()
    instrument(clock)
    start_up = _cpu()  # the interpreter, this module and every module the ingest loads
    shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
    db.unlink(missing_ok=True)
    argv = ["ingest", *map(str, paths), "-o", str(db), "--no-progress", "--quiet"]
    if workers is not None:
        argv += ["--workers", str(workers)]
    before, began = _cpu(), time.perf_counter()
    try:
        cli_main(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    whole, ended = _cpu() - before, time.perf_counter()
    stages = {k: v for k, v in clock.seconds.items()}
    stages["start-up (interpreter, imports)"] = start_up
    stages["other"] = max(0.0, whole - sum(v for k, v in clock.seconds.items()))
    spans = {k: [round(a - began, 4), round(b - began, 4)] for k, (a, b) in clock.spans.items()}
    spans["command"] = [0.0, round(ended - began, 4)]
    return stages, spans


def span_table(spans: dict[str, list[float]]) -> str:
    """Each stage's wall-clock span, in the order the stages began."""
    lines = ["| stage | first start | last end | span |", "|---|---|---|---|"]
    for stage, (a, b) in sorted(spans.items(), key=lambda kv: (kv[1][0], -kv[1][1])):
        lines.append(f"| {stage} | {a:.3f} s | {b:.3f} s | {b - a:.3f} s |")
    return "\n".join(lines)


def table(stages: dict[str, float], mb: float) -> str:
    total = sum(stages.values())
    lines = ["| stage | CPU | share | MB per CPU-s |", "|---|---|---|---|"]
    for stage in ORDER:
        s = stages.get(stage, 0.0)
        if s < 0.0005:
            continue
        lines.append(f"| {stage} | {s:.3f} s | {100 * s / total:.0f}% | {mb / s:,.0f} |")
    lines.append(f"| **whole process** | **{total:.3f} s** | 100% | **{mb / total:,.0f}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--workers", type=int, default=None, help="decoding threads (default: the ingest's own)")
    parser.add_argument("--work", type=Path, default=HERE / "out", help="where the database goes")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    db = args.work / "profile.duckdb"
    stages, spans = profile(args.paths, db, args.workers)
    mb = decoded_mb(args.paths)  # after: its CPU is not the ingest's
    shutil.rmtree(db.with_name(db.name + ".events"), ignore_errors=True)
    db.unlink(missing_ok=True)
    if args.json:
        print(json.dumps({"mb": mb, "cpu_s": sum(stages.values()), "stages": stages, "spans": spans}))
    else:
        print(table(stages, mb))
        print()
        print(span_table(spans))
    return 0


if __name__ == "__main__":
    sys.exit(main())
