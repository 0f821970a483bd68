"""Tables of the ingest's cost per byte for ``benchmarks/shapes.py``: per row and by worker count.

Pure functions over measured numbers: MB per CPU-second of each row against the compiled
scanner alone (:mod:`benchmarks.scan_floor`), CPU seconds per stage of one profiled run per row
(:mod:`benchmarks.profile_ingest`), and throughput and memory per worker count. "MB" is MB of
JSON (10^6 bytes; a gzip input counted decompressed); "CPU" is user + system time of the whole
process tree.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.profile_ingest import ORDER


@dataclass
class RowRate:
    """One benchmark row: MB of JSON (the files, decoded), the ingest's median CPU and wall seconds,
    and the CPU seconds of the scanner alone (no columns; with columns) over ``scan_mb``, the
    bytes of its ``traceEvents`` pieces (the files less their metadata around the events)."""

    key: str
    mb: float
    cpu_s: float
    wall_s: float
    scan_only_s: float
    scan_events_s: float
    scan_mb: float


@dataclass
class WorkerPoint:
    """One worker count of the curve: median wall and CPU seconds, peak RSS (GB, process tree)."""

    workers: int
    wall_s: float
    cpu_s: float
    peak_gb: float


def per_s(mb: float, seconds: float) -> str:
    """``mb / seconds`` rounded, with thousands separators; ``-`` when nothing was timed."""
    return f"{mb / seconds:,.0f}" if seconds > 0 else "-"


def parse_workers(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; raises ValueError for anything but positive integers."""
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or any(c < 1 for c in counts):
        raise ValueError(f"worker counts must be positive integers: {text!r}")
    return counts


def rate_table(rows: list[RowRate]) -> str:
    """Markdown: per row, MB per CPU-second of the whole ingest and of the scanner alone, and the
    share of the ingest's CPU that the scanner (with columns) takes at its own rate."""
    lines = ["| row | MB of JSON | ingest CPU | ingest MB per CPU-s | scanner alone, no columns, MB per CPU-s "
             "| scanner with columns, MB per CPU-s | scanner's share of the ingest CPU |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        share = f"{100 * r.scan_events_s / r.cpu_s:.0f}%" if r.cpu_s > 0 else "-"
        lines.append(f"| {r.key} | {r.mb:,.0f} | {r.cpu_s:.2f} s | **{per_s(r.mb, r.cpu_s)}** "
                     f"| {per_s(r.scan_mb, r.scan_only_s)} | {per_s(r.scan_mb, r.scan_events_s)} | {share} |")
    return "\n".join(lines)


def stage_table(profiles: dict[str, dict[str, float]]) -> str:
    """Markdown: CPU seconds (and share of the process) per stage (rows, in :data:`ORDER`) of one
    profiled ingest per benchmark row (columns); stages no row spent 1 ms on are left out."""
    keys = list(profiles)
    totals = {k: sum(profiles[k].values()) for k in keys}
    lines = ["| stage | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for stage in ORDER:
        if all(profiles[k].get(stage, 0.0) < 0.001 for k in keys):
            continue
        cells = [f"{profiles[k].get(stage, 0.0):.3f} s ({100 * profiles[k].get(stage, 0.0) / totals[k]:.0f}%)"
                 if totals[k] > 0 else "-" for k in keys]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    lines.append("| **whole process** | " + " | ".join(f"**{totals[k]:.3f} s**" for k in keys) + " |")
    return "\n".join(lines)


def workers_table(key: str, mb: float, points: list[WorkerPoint], cores: int) -> str:
    """Markdown: per worker count, MB per second of wall time, MB per CPU-second, peak memory,
    and the speed-up over the first count with its efficiency (speed-up / workers ratio)."""
    lines = [f"Row {key} ({mb:,.0f} MB of JSON) by worker count (`--workers N`); {cores} cores: "
             f"more than {cores} workers cannot run side by side here.", "",
             "| workers | wall | MB/s (wall) | CPU | MB per CPU-s | peak RSS | speed-up | of linear |",
             "|---|---|---|---|---|---|---|---|"]
    if not points:
        return "\n".join(lines)
    base = points[0]
    for p in points:
        speedup = base.wall_s / p.wall_s if p.wall_s > 0 else 0.0
        linear = p.workers / base.workers
        lines.append(f"| {p.workers} | {p.wall_s:.2f} s | {per_s(mb, p.wall_s)} | {p.cpu_s:.2f} s "
                     f"| {per_s(mb, p.cpu_s)} | {p.peak_gb:.2f} GB | {speedup:.2f}x | {100 * speedup / linear:.0f}% |")
    return "\n".join(lines)
