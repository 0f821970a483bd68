"""The pure parts of the ingest cost benchmark (benchmarks/cpu_report.py, benchmarks/profile_ingest.py):
the tables' numbers against values computed by hand, and the stage clock's charging of nested
calls against a fake thread clock."""

from __future__ import annotations

import pytest

from benchmarks import profile_ingest
from benchmarks.cpu_report import RowRate, WorkerPoint, parse_workers, rate_table, stage_table, workers_table


def test_parse_workers() -> None:
    assert parse_workers("1,2,4,8,16") == [1, 2, 4, 8, 16]
    assert parse_workers("3") == [3]
    for bad in ("", "0,2", "1,-2", "a"):
        with pytest.raises(ValueError):
            parse_workers(bad)


def test_rate_table_divides_mb_by_each_cpu_time() -> None:
    # 600 MB in 2.0 s of ingest CPU = 300; scanner over 599 MB: 0.5 s = 1,198 and 0.75 s = 799,
    # 0.75 / 2.0 = 38%
    table = rate_table([RowRate("b-plain", 600.0, 2.0, 1.5, 0.5, 0.75, 599.0)])
    row = table.splitlines()[2]
    assert row == "| b-plain | 600 | 2.00 s | **300** | 1,198 | 799 | 38% |"


def test_stage_table_shares_and_totals() -> None:
    profiles = {"a": {"scan": 1.0, "Parquet writing": 3.0, "other": 0.0004},
                "b": {"scan": 0.5, "Parquet writing": 0.5}}
    lines = stage_table(profiles).splitlines()
    assert lines[0] == "| stage | a | b |"
    assert "| scan | 1.000 s (25%) | 0.500 s (50%) |" in lines
    assert "| Parquet writing | 3.000 s (75%) | 0.500 s (50%) |" in lines
    assert not any(line.startswith("| other") for line in lines)  # under 1 ms in every row
    assert lines[-1] == "| **whole process** | **4.000 s** | **1.000 s** |"
    assert lines.index("| scan | 1.000 s (25%) | 0.500 s (50%) |") < lines.index(
        "| Parquet writing | 3.000 s (75%) | 0.500 s (50%) |")  # in profile_ingest.ORDER


def test_workers_table_speed_up_against_the_first_count() -> None:
    points = [WorkerPoint(1, 4.0, 3.8, 0.5), WorkerPoint(2, 2.5, 4.0, 0.6), WorkerPoint(4, 1.25, 4.4, 0.8)]
    lines = workers_table("a-plain", 1000.0, points, 16).splitlines()
    rows = lines[4:]
    assert rows[0] == "| 1 | 4.00 s | 250 | 3.80 s | 263 | 0.50 GB | 1.00x | 100% |"
    assert rows[1] == "| 2 | 2.50 s | 400 | 4.00 s | 250 | 0.60 GB | 1.60x | 80% |"  # 1.6 of 2
    assert rows[2] == "| 4 | 1.25 s | 800 | 4.40 s | 227 | 0.80 GB | 3.20x | 80% |"  # 3.2 of 4
    assert "16 cores" in lines[0]


def test_stage_clock_charges_a_nested_call_to_the_inner_stage_only(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(profile_ingest.time, "thread_time", lambda: now[0])
    clock = profile_ingest.StageClock()

    def inner() -> None:
        now[0] += 2.0

    timed_inner = clock.wrap("inner", inner)

    def outer() -> None:
        now[0] += 1.0
        timed_inner()
        now[0] += 0.5

    clock.wrap("outer", outer)()

    def steps() -> object:
        now[0] += 0.25
        yield 1
        now[0] += 0.25
        yield 2

    gen = clock.wrap_generator("gen", steps)()
    assert next(gen) == 1
    now[0] += 10.0  # between items: the consumer's time, not the generator's
    assert list(gen) == [2]
    assert clock.seconds == {"outer": 1.5, "inner": 2.0, "gen": 0.5}


def test_stage_clock_spans_are_each_stages_first_start_and_last_end(monkeypatch: pytest.MonkeyPatch) -> None:
    wall = [100.0]
    monkeypatch.setattr(profile_ingest.time, "perf_counter", lambda: wall[0])
    clock = profile_ingest.StageClock()

    def step(seconds: float) -> None:
        wall[0] += seconds

    timed = clock.wrap("scan", step)
    timed(1.0)  # 100 -> 101
    wall[0] += 5.0  # nothing runs
    timed(2.0)  # 106 -> 108
    clock.wrap("parquet", step)(0.5)  # 108 -> 108.5
    assert clock.spans == {"scan": [100.0, 108.0], "parquet": [108.0, 108.5]}
