"""Per-trace rows kept for the connection of a database in memory (store/cache.py): the report
computes the step breakdown's rows of a trace opened directly once, not once for advise and again
for its table, and the breakdowns equal those of another connection."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import TRACES, shared_or_skip

import trace_report as tr
from trace_report.analyses.breakdown import BreakdownOptions, breakdown
from trace_report.analyses.common import breakdown_regions as regions
from trace_report.present.report import write_report

A100 = TRACES / "hta_a100_ddp_nccl"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    calls: list[list[int]] = []
    compute = regions.compute_region_parts

    def counted(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict:
        calls.append(list(ids))
        return compute(con, ids)

    monkeypatch.setattr(regions, "compute_region_parts", counted)
    return calls


def test_breakdowns_on_one_connection_compute_each_trace_once_and_equal_plain_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    by_rank, by_step = BreakdownOptions(by_rank=True), BreakdownOptions(by_step=True)
    with tr.open(A100) as db:  # a trace opened directly: a database in memory keeps rows for its connection
        plain = [breakdown(db, o).frame for o in (by_rank, by_step)]
    with tr.open(A100) as db:
        ids = sorted(t for (t,) in db.con.execute("SELECT trace_id FROM traces").fetchall())
        calls = _counting(monkeypatch)
        kept = [breakdown(db, o).frame for o in (by_rank, by_step)]
    assert [sorted(c) for c in calls] == [ids]  # every trace, once
    for a, b in zip(plain, kept, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_report_on_a_trace_file_computes_its_breakdown_rows_once(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    shared_or_skip()
    calls = _counting(monkeypatch)
    with tr.open(A100) as db:
        write_report(db, [str(A100)], tmp_path / "r.html")
    assert len(calls) == 1  # advise's breakdown and the report's table: once (twice before)
