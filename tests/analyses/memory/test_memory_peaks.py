"""memory_peaks on constructed traces against a plain-Python reading of its rule: a step's peak
counts the events inside it (ts <= event < end, every step holding the event) and the level it
starts at (the device's last event before the step, by time then event order, with a value).
The rule is found by ASOF joins where a trace's steps do not overlap and by a range join where they
do (analyses/memory/memory_peaks.sql): both shapes are here, with ties, boundaries and zero-length steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trace_report as tr
from trace_report.analyses.memory import memory_peaks


def _trace(path: Path, steps: list[tuple[int, float, float]], memory: list[tuple[float, int, int | None, int]]) -> Path:
    """``steps``: (number, ts, dur); ``memory``: (ts, total allocated, total reserved or None, device id)."""
    ev: list[dict] = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                       "ts": ts, "dur": dur} for n, ts, dur in steps]
    for ts, allocated, reserved, device in memory:
        args = {"Device Type": 1, "Device Id": device, "Bytes": 64, "Total Allocated": allocated}
        if reserved is not None:
            args["Total Reserved"] = reserved
        ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                   "ts": ts, "args": args})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    return path


def _expected(steps: list[tuple[int, float, float]], memory: list[tuple[float, int, int | None, int]]) -> dict:
    """{(device, step): (events, peak allocated, peak reserved)}, step None for events in no step."""
    out: dict = {}
    for device in sorted({d for *_, d in memory}):
        mine = [(i, ts, a, r) for i, (ts, a, r, d) in enumerate(memory) if d == device]  # i: event order
        name = f"cuda:{device}"
        for n, s0, dur in steps:
            inside = [(a, r) for _, ts, a, r in mine if s0 <= ts < s0 + dur]
            before = sorted((ts, i, a, r) for i, ts, a, r in mine if ts < s0)
            allocated = [a for a, _ in inside] + ([before[-1][2]] if before else [])
            reserved_before = [r for *_, r in before if r is not None]
            reserved = [r for _, r in inside if r is not None] + reserved_before[-1:]
            if inside or allocated:
                got = out.setdefault((name, n), [0, None, None])
                got[0] += len(inside)
                got[1] = max([x for x in [got[1], *allocated] if x is not None], default=None)
                got[2] = max([x for x in [got[2], *reserved] if x is not None], default=None)
        outside = [(a, r) for _, ts, a, r in mine if not any(s0 <= ts < s0 + dur for _, s0, dur in steps if dur > 0)]
        if outside:
            out[(name, None)] = [len(outside), max(a for a, _ in outside),
                                 max((r for _, r in outside if r is not None), default=None)]
    return {k: tuple(v) for k, v in out.items()}


def _got(path: Path) -> dict:
    with tr.open(path) as db:
        frame = memory_peaks(db).frame
    return {(r.device, None if r.step is None or r.step != r.step else int(r.step)):
            (int(r.events), None if r.peak_allocated_bytes is None else int(r.peak_allocated_bytes),
             None if r.peak_reserved_bytes != r.peak_reserved_bytes or r.peak_reserved_bytes is None
             else int(r.peak_reserved_bytes))
            for r in frame.astype(object).where(frame.notna(), None).itertuples()}


MEMORY = [  # (ts, total allocated, total reserved, device)
    (5, 100, 1000, 0), (8, 950, 5000, 0), (8, 900, None, 0),  # two at 8: the later sets step 1's allocated
    (10, 300, 1000, 0),  # level, the earlier its reserved one (the later has none)
    (10, 50, 500, 1), (20, 400, 2000, 0), (30, 150, 2000, 0),  # 30: step 2's first, step 1's end
    (35, 900, 3000, 1), (45, 120, 2500, 0), (60, 700, 4000, 0),  # 60: past every step
    (25, 80, None, 1),
]


def test_peaks_with_disjoint_steps(tmp_path: Path) -> None:
    steps = [(1, 10, 20), (2, 30, 20), (3, 50, 0)]  # step 3 holds nothing
    path = _trace(tmp_path / "t.json", steps, MEMORY)
    assert _got(path) == _expected(steps, MEMORY)


@pytest.mark.parametrize("steps", [
    [(1, 10, 20), (2, 25, 20)],  # overlapping: 25-30 in both
    [(1, 10, 40), (2, 20, 10), (3, 55, 5)],  # nested, then one of its own
    [(1, 10, 20), (2, 10, 20)],  # the same window twice
])
def test_peaks_with_overlapping_steps(tmp_path: Path, steps: list[tuple[int, float, float]]) -> None:
    path = _trace(tmp_path / "t.json", steps, MEMORY)
    assert _got(path) == _expected(steps, MEMORY)
