"""Per-trace results remembered for one block (store/block_memo.py): the report computes the step
breakdown's rows of a trace opened directly once, not once for advise and again for its table, and
the breakdowns equal those computed outside any block."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import TRACES, shared_or_skip

import trace_report as tr
from trace_report.analyses import breakdown as regions
from trace_report.analyses.breakdown import BreakdownOptions, breakdown
from trace_report.present.report import write_report
from trace_report.store.block_memo import recall_each, remembering

A100 = TRACES / "hta_a100_ddp_nccl"


def test_recall_each_computes_what_is_missing_once_inside_the_block() -> None:
    con = duckdb.connect()
    asked: list[list[int]] = []

    def compute(ids: list[int]) -> dict[int, str]:
        asked.append(ids)
        return {t: f"v{t}" for t in ids}

    assert recall_each(con, "k", [1, 2], compute) == {1: "v1", 2: "v2"}
    assert recall_each(con, "k", [1, 2], compute) == {1: "v1", 2: "v2"}
    assert asked == [[1, 2], [1, 2]]  # outside a block: every call computes
    asked.clear()
    with remembering(con):
        assert recall_each(con, "k", [2], compute) == {2: "v2"}
        with remembering(con):  # nested: the same memo
            assert recall_each(con, "k", [1, 2, 3], compute) == {1: "v1", 2: "v2", 3: "v3"}
        assert recall_each(con, "k", [3, 1], compute) == {3: "v3", 1: "v1"}
        assert recall_each(con, "other", [1], compute) == {1: "v1"}  # another kind: computed
        assert recall_each(duckdb.connect(), "k", [1], compute) == {1: "v1"}  # another connection: computed
    assert asked == [[2], [1, 3], [1], [1]]
    recall_each(con, "k", [1], compute)  # the block is over: nothing remembered
    assert asked[-1] == [1]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    calls: list[list[int]] = []
    compute = regions.compute_region_parts

    def counted(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict:
        calls.append(list(ids))
        return compute(con, ids)

    monkeypatch.setattr(regions, "compute_region_parts", counted)
    return calls


def test_breakdowns_in_one_block_compute_each_trace_once_and_equal_plain_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    by_rank, by_step = BreakdownOptions(by_rank=True), BreakdownOptions(by_step=True)
    with tr.open(A100) as db:  # a trace opened directly: a database in memory keeps nothing
        plain = [breakdown(db, o).frame for o in (by_rank, by_step)]
        ids = sorted(t for (t,) in db.con.execute("SELECT trace_id FROM traces").fetchall())
        calls = _counting(monkeypatch)
        with remembering(db.con):
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
