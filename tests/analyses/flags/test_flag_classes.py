"""The kernel classes a flags query reads (common.kernel_classes.classes_relation): the ``kernel_classes``
view where a command keeps it as a table (the report), else the classes of the query's own names.
The flags are the same rows either way; a report plans the classifying macro once (planning it
costs DuckDB the same for any number of names), where its flags and advise planned it three times."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr
from trace_report.analyses.common import kernel_classes
from trace_report.analyses.common.kernel_classes import flag_rows
from trace_report.present.report import write_report
from trace_report.store.kept_views import kept_as_table, materialized

A100 = TRACES / "hta_a100_ddp_nccl"
DDP = TRACES / "param_dlrm_kineto_v100x8"


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


def _equal_with_and_without_the_kept_classes(db: Any) -> None:
    con = db.con
    options = [(None, True, None), (None, False, None), (0, True, None), (None, False, [1])]
    plain = [flag_rows(con, *o) for o in options]
    assert not kept_as_table(con, "kernel_classes")
    with materialized(con, ("gpu_ops", "kernel_classes")):
        assert kept_as_table(con, "kernel_classes")
        kept = [flag_rows(con, *o) for o in options]
    assert not kept_as_table(con, "kernel_classes")
    assert any(len(p) > 1 for p in plain)  # rows with classes, not only the totals
    for a, b in zip(plain, kept, strict=True):
        pd.testing.assert_frame_equal(_sorted(a), _sorted(b))


def test_flags_equal_with_the_kept_classes_on_a_trace_opened_directly() -> None:
    shared_or_skip()
    folder = DDP if DDP.is_dir() else A100
    with tr.open(folder) as db:
        _equal_with_and_without_the_kept_classes(db)


def test_flags_equal_with_the_kept_classes_on_a_database(tmp_path: Path) -> None:
    shared_or_skip()
    db_path = tmp_path / "a.duckdb"
    assert invoke(["ingest", A100, "-o", db_path]).exit_code == 0
    assert invoke(["flags", db_path]).exit_code == 0  # the GPU operation names kept beside the database
    with tr.open(db_path) as db:
        _equal_with_and_without_the_kept_classes(db)


def test_report_reads_the_kernel_classes_kept_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shared_or_skip()
    given: list[str] = []
    inner = kernel_classes.classes_relation

    @contextmanager
    def recorded(con: Any, names: str) -> Iterator[str]:
        with inner(con, names) as classes:
            given.append(classes)
            yield classes

    monkeypatch.setattr(kernel_classes, "classes_relation", recorded)
    with tr.open(A100) as db:
        write_report(db, [str(A100)], tmp_path / "r.html")
        assert not kept_as_table(db.con, "kernel_classes")  # a plain view again after the report
    # its flags (the chart and the table): the table the report made once, never the macro (advise
    # reads that table through its windows' GPU operations)
    assert given == ["kernel_classes"]
