"""The compiled scanner alone over the bytes of an input: the floor of the ingest's
cost per byte.

The input's ``traceEvents`` is cut into the ingest's pieces (8 MB, ``kineto.PieceStream``;
gzip inflated, neither timed), then each piece goes once through ``_scan.scan_only`` (the JSON
checked and the fields read, no column written) and once through ``_scan.scan_events`` (the
columns written as well, what the ingest calls), each timed in CPU seconds of this thread. The
allocator is tuned as ``trace-report`` tunes it (``sysutil.tune_allocator``), so that the column
buffers of one piece reuse the last one's pages as they do in an ingest.

Usage: python benchmarks/scan_floor.py PATH... [--json]
  PATH: trace files or folders of them. Prints MB of JSON, CPU seconds and MB per CPU-second of
  both passes, and the MB the scanner declined (decoded by msgspec in an ingest).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Floor:
    """MB of JSON read, CPU seconds of each pass over it, and MB of declined pieces."""

    mb: float = 0.0
    scan_only_s: float = 0.0
    scan_events_s: float = 0.0
    declined_mb: float = 0.0

    def rate(self, seconds: float) -> float:
        """MB per CPU-second (0 where nothing was timed)."""
        return self.mb / seconds if seconds > 0 else 0.0


def files_of(paths: list[Path]) -> list[Path]:
    """The files of ``paths`` (folders listed recursively, in order)."""
    return [f for p in paths for f in (sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p])]


def measure(paths: list[Path], piece_bytes: int = 8 << 20) -> Floor:
    """Both scanner passes over every piece of every file in ``paths`` (see the module docstring).
    Raises SystemExit when the compiled scanner is not built."""
    from trace_report.sysutil import tune_allocator

    tune_allocator()
    from trace_report.formats import kineto

    if kineto._scan is None:
        raise SystemExit("the compiled scanner is not built (trace_report/formats/_scan.pyx)")
    memory_cat = kineto.MEMORY_CAT.encode()
    out = Floor()
    for path in files_of(paths):
        stream = kineto.PieceStream(path, piece_bytes)
        for raw in stream:
            data = stream.split_tail(raw) if isinstance(raw, kineto.TailBytes) else raw
            out.mb += len(data) / 1e6
            start = time.thread_time()
            counted = kineto._scan.scan_only(data)
            middle = time.thread_time()
            columns = kineto._scan.scan_events(data, memory_cat)
            out.scan_events_s += time.thread_time() - middle
            out.scan_only_s += middle - start
            if counted is None or columns is None:
                out.declined_mb += len(data) / 1e6
            del columns, data, raw
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = parser.parse_args(argv)
    floor = measure(args.paths)
    if args.json:
        print(json.dumps(asdict(floor)))
    else:
        print(f"{floor.mb:,.0f} MB of JSON ({floor.declined_mb:,.1f} MB declined by the scanner): "
              f"scan only {floor.scan_only_s:.3f} s ({floor.rate(floor.scan_only_s):,.0f} MB per CPU-s), "
              f"with columns {floor.scan_events_s:.3f} s ({floor.rate(floor.scan_events_s):,.0f} MB per CPU-s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
