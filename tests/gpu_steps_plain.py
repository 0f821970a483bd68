"""The step as the GPU sees it, computed from a trace's JSON alone (no trace_report code): the
reference the tests of view ``step_time``, ``compare``'s headline and its gate check against; and
:func:`stretch_gpu`, which makes a copy of a trace whose GPU is slower and whose CPU is the same."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
STRETCHED_CATS = GPU_CATS | {"gpu_user_annotation"}


def load(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def _islands(ops: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(ops):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _busy(islands: list[list[float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in islands)


def steps(trace: dict) -> list[dict]:
    """Per ProfilerStep in start order: ``cpu_us``, ``gpu_us`` (end of the earlier steps' GPU work,
    or the first operation launched in the step, to the end of the last one launched in it),
    ``step_us`` (the longer), ``busy_us`` (union of all GPU operations inside the GPU period)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    cpu = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                 if str(e.get("name", "")).startswith("ProfilerStep#")
                 and e.get("cat") in ("user_annotation", "cpu_op"))
    launch: dict[object, float] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in RUNTIME_CATS and corr is not None:
            launch.setdefault(corr, float(e["ts"]))  # the first call with the id (ties: file order)
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    islands = _islands([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu if float(e["dur"]) > 0])
    rows, earlier_end = [], None
    for s, e in cpu:
        mine = [g for g in gpu
                if (t := launch.get((g.get("args") or {}).get("correlation"))) is not None and s <= t < e]
        row = {"cpu_us": e - s, "gpu_us": None, "busy_us": None}
        if mine:
            end = max(float(g["ts"]) + float(g["dur"]) for g in mine)
            start = min(earlier_end if earlier_end is not None else min(float(g["ts"]) for g in mine), end)
            row.update(gpu_us=end - start, busy_us=_busy(islands, start, end))
            earlier_end = end if earlier_end is None else max(earlier_end, end)
        row["step_us"] = max(row["cpu_us"], row["gpu_us"] or 0.0)
        rows.append(row)
    return rows


def launched_in_steps(trace: dict) -> list[dict]:
    """The GPU operations (kernel, memcpy, memset) whose launch, the first runtime call with their
    correlation id, starts inside a ProfilerStep's CPU span: the work :func:`steps` gives each step,
    and what advise's GPU-time findings count."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    cpu = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
           if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") in ("user_annotation", "cpu_op")]
    launch: dict[object, float] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in RUNTIME_CATS and corr is not None:
            launch.setdefault(corr, float(e["ts"]))
    return [g for g in events if g.get("cat") in GPU_CATS
            and (t := launch.get((g.get("args") or {}).get("correlation"))) is not None
            and any(s <= t < e for s, e in cpu)]


def stretch_gpu(trace: dict, factor: float) -> dict:
    """A copy of ``trace`` whose GPU runs ``factor`` times slower: every GPU event's (kernel,
    memcpy, memset, gpu_user_annotation) ``ts`` and ``dur`` stretched about the start of the
    trace's first GPU event; launches and every CPU event unchanged. One origin keeps the GPU
    events' order (no two operations of a stream come to overlap) and moves none before its
    launch (each only moves later)."""
    out = dict(trace)
    gpu = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in STRETCHED_CATS]
    origin = min(float(e["ts"]) for e in gpu)
    events = []
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in STRETCHED_CATS:
            e = dict(e, ts=origin + factor * (float(e["ts"]) - origin), dur=factor * float(e["dur"]))
        events.append(e)
    out["traceEvents"] = events
    return out
