"""Build a large Kineto trace by replicating a real one (for the ingest benchmark).

Each copy is shifted in time by the span of the source trace and its ``correlation``,
``External id`` and flow ``id`` values are offset, so that kernels still join to their own
launches and no two copies overlap. The output keeps Kineto's layout (an object with
``traceEvents``, one event per block of lines) and is written uncompressed, like the
1.12 GB file of docs/benchmarks.md.

With ``--rank R --world-size W`` the copy is one rank of a distributed run: its
``distributedInfo`` says so and its timestamps are shifted by R µs (so that no two ranks have
the same content, which an ingest would store once). An OUT ending in ``.gz`` is written
gzip-compressed (level 6, as Kineto's ``use_gzip``).

Usage: python benchmarks/make_big_trace.py SOURCE OUT.json[.gz] --copies 40 [--rank R --world-size W]
       [--renumber-steps]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

ID_KEYS = ("correlation", "External id", "external id")


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as fh:
        data = json.load(fh)
    return data if isinstance(data, dict) else {"traceEvents": data}


def _span_and_max_id(events: list[dict[str, Any]]) -> tuple[float, int]:
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
    max_id = 0
    for e in events:
        args = e.get("args") or {}
        for key in ID_KEYS:
            if isinstance(args.get(key), int):
                max_id = max(max_id, args[key])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    return float(math.ceil(max(ends) - min(ts) + 1.0)), max_id + 1


STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _shift(event: dict[str, Any], dt: float, did: int, dstep: int = 0) -> dict[str, Any]:
    out = dict(event)
    step = STEP.match(out.get("name") or "") if dstep else None
    if step:
        out["name"] = f"ProfilerStep#{int(step.group(1)) + dstep}"
    if isinstance(out.get("ts"), int):  # keep integer microseconds integers, as Kineto wrote them
        out["ts"] += int(dt)
    elif isinstance(out.get("ts"), float):
        out["ts"] = round(out["ts"] + dt, 3)
    if isinstance(out.get("id"), int):
        out["id"] += did
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_KEYS:
            if isinstance(args.get(key), int):
                args[key] += did
        out["args"] = args
    return out


def build(source: Path, out: Path, copies: int, rank: int | None = None, world_size: int = 1,
          renumber_steps: bool = False) -> int:
    """Write ``copies`` shifted copies of ``source`` to ``out`` (as rank ``rank`` of
    ``world_size`` when given; ``renumber_steps``: copy k's ProfilerStep#N becomes
    ProfilerStep#(N + k * the source's steps), so that every step has its own number); return the
    number of events."""
    data = _load(source)
    events = data.pop("traceEvents")
    span, id_step = _span_and_max_id(events)
    steps = len({e["name"] for e in events if STEP.match(str(e.get("name") or ""))}) if renumber_steps else 0
    base = 0.0
    if rank is not None:
        data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
        base = float(rank)
    head = json.dumps(data, indent=2)[:-2] + "," if data else "{"  # the object without its closing "\n}"
    n = 0
    part = out.with_name(out.name + ".part")
    gz = out.name.endswith(".gz")
    with gzip.open(part, "wt", compresslevel=6) if gz else open(part, "w") as fh:  # noqa: SIM115
        fh.write(head + '\n  "traceEvents": [\n')
        first = True
        for k in range(copies):
            for e in events:
                if k and e.get("ph") == "M":
                    continue
                shifted = _shift(e, base + k * span, k * id_step, k * steps)
                fh.write(("" if first else ",\n") + "  " + json.dumps(shifted))
                first = False
                n += 1
        fh.write('\n  ]\n}\n')
    part.rename(out)
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--rank", type=int, default=None, help="write rank R of a distributed run")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--renumber-steps", action="store_true", help="give every copy's ProfilerSteps new numbers")
    args = parser.parse_args(argv)
    n = build(args.source, args.out, args.copies, args.rank, args.world_size, args.renumber_steps)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e9:.2f} GB, {n:,} events)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
