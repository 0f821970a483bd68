"""Capture overhead benchmark: the shared training loop against a plain minimal loop.

Thin wrapper over ``benchmarks.capture_overhead_loop`` (same options): the shared loop with
profiling off against a plain ``zero_grad; forward; loss; backward; step`` loop on the same
model, data and batch (target: at most 3% slower), the loop's fixed cost per step, and with
profiling on the cost per profiled step and the trace size per step. Results are printed as
JSON; record them in docs/benchmarks.md with the machine and date.

Usage: python benchmarks/capture_overhead.py [--threads N] [--json FILE]
"""

from __future__ import annotations

from benchmarks.capture_overhead_loop import main

if __name__ == "__main__":
    raise SystemExit(main())
