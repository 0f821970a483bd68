"""The Operator view's nesting rows kept per trace beside a database (analyses/ops/nesting_kept.py).

On this project's own H100 captures (traces/): `ops` from kept rows against `ops` computed from
the events, each kept file against a plain pass over its trace's JSON, and the files' life cycle
(written by the first `ops`, read back, one trace alone in a scope, damaged files rewritten).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import H100_CAPTURES as H100
from conftest import H100_RUNS as RUNS
from conftest import empty_kept_file, kept_traces
from conftest import kept_files as kept_of_kind

import trace_report as tr
from trace_report.analyses.ops import OpsOptions, ops
from trace_report.analyses.ops import nesting_kept as ops_nesting_kept
from trace_report.analyses.ops.nesting import nesting
from trace_report.analyses.ops.nesting_kept import kept_nesting
from trace_report.store.cache import traces_of_rank

OPTIONS = [OpsOptions(limit=None), OpsOptions(all_ops=True, limit=None), OpsOptions(by_shape=True, limit=None),
           OpsOptions(rank=0, limit=None)]

pytestmark = pytest.mark.skipif(not H100.is_dir(), reason="traces/h100-2026-11-25 is not present")


@pytest.fixture
def db_path(h100_db: Path) -> Path:
    """The three H100 runs ingested (a copy of the database ingested once per test process)."""
    return h100_db


def kept_files(db_path: Path) -> list[Path]:
    return kept_of_kind(db_path, ops_nesting_kept.KEPT.kind)


def computed_ops(db_path: Path, opts: OpsOptions, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """`ops` with the nesting computed from the events: no kept file read or written."""
    with monkeypatch.context() as m, tr.open(db_path) as db:
        m.setattr(sys.modules["trace_report.analyses.ops.compute"], "kept_nesting",
                  lambda con, rank: nesting(con, traces_of_rank(con, rank)))
        return ops(db, opts).frame


def json_operators(run: str) -> int:
    """Complete cpu_op and user_annotation events of a run's trace, from its JSON: one nesting row each."""
    (path,) = (H100 / run).glob("*.pt.trace.json.gz")
    return sum(1 for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"))


def test_kept_rows_give_the_computed_operator_view(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = {i: computed_ops(db_path, o, monkeypatch) for i, o in enumerate(OPTIONS)}
    assert kept_files(db_path) == []
    assert (want[0]["gpu_us"] > 0).any()
    for _ in ("computed and kept", "read back"):
        for i, opts in enumerate(OPTIONS):
            with tr.open(db_path) as db:
                pd.testing.assert_frame_equal(ops(db, opts).frame, want[i])
        (part,) = kept_files(db_path)  # the traces computed together, in one part
        assert len(kept_traces(part)) == len(RUNS)


def test_each_file_holds_its_traces_operators(db_path: Path) -> None:
    with tr.open(db_path) as db:
        ops(db, OpsOptions())
        sources = dict(db.con.execute("SELECT trace_id, path FROM traces").fetchall())
    (path,) = kept_files(db_path)
    ids = pq.read_table(path)["trace_id"].to_pylist()
    assert set(kept_traces(path)) == set(ids) == set(sources)
    for trace_id in sources:
        run = next(r for r in RUNS if f"/{r}/" in sources[trace_id])
        assert ids.count(trace_id) == json_operators(run)


def test_the_files_are_what_is_read(db_path: Path) -> None:
    with tr.open(db_path) as db:
        assert not ops(db, OpsOptions()).frame.empty
    for path in kept_files(db_path):
        empty_kept_file(path)
    with tr.open(db_path) as db:  # no nesting row: no operator is listed
        assert ops(db, OpsOptions()).frame.empty


def test_a_trace_alone_has_the_rows_it_has_among_the_others(db_path: Path) -> None:
    with tr.open(db_path) as db:
        ids = traces_of_rank(db.con, None)
        every = nesting(db.con, ids).to_pandas()
        for t in ids:
            with db.scope([t]):
                alone = kept_nesting(db.con, None).to_pandas()
            pd.testing.assert_frame_equal(alone, every[every["trace_id"] == t].reset_index(drop=True),
                                          check_dtype=False)
    assert len(kept_files(db_path)) == len(ids)
    with tr.open(db_path) as db:  # all three from their files, in the order of the computation
        pd.testing.assert_frame_equal(kept_nesting(db.con, None).to_pandas(), every, check_dtype=False)


@pytest.mark.parametrize("damage", ["not parquet", "other columns"])
def test_a_damaged_file_is_computed_and_written_again(db_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      damage: str) -> None:
    want = computed_ops(db_path, OpsOptions(limit=None), monkeypatch)
    with tr.open(db_path) as db:
        ops(db, OpsOptions())
    first = kept_files(db_path)[0]
    if damage == "not parquet":
        first.write_bytes(b"not a parquet file")
    else:
        pq.write_table(pq.read_table(first).drop_columns(["gpu_us"]), first)
    with tr.open(db_path) as db:
        pd.testing.assert_frame_equal(ops(db, OpsOptions(limit=None)).frame, want)
    (again,) = kept_files(db_path)  # the damaged part replaced
    assert pq.read_table(again).column_names == ["trace_id", "event_id", "child_us", "gpu_self_us", "gpu_us"]


def test_a_trace_given_directly_keeps_nothing(tmp_path: Path) -> None:
    (source,) = (H100 / RUNS[0]).glob("*.pt.trace.json.gz")
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes())
    with tr.open(path) as db:  # a database in memory: nothing beside the trace
        assert not ops(db, OpsOptions()).frame.empty
    assert [p.name for p in tmp_path.iterdir()] == [source.name]
