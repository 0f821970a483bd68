"""The GPU operations per name (view ``gpu_op_names``) and the rows of it that `flags` keeps.

On this project's own H100 captures (traces/): the view against a plain-Python pass over the
trace JSON, flags from kept rows against flags from the events, and the kept files' life cycle
(kept at ingest or by the first `flags`, read back, ignored when damaged).
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import cpp_demangle
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import H100_CAPTURES as H100
from conftest import H100_RUNS as RUNS
from conftest import kept_files as kept_of_kind
from conftest import kept_traces, run_cli

import trace_report as tr
from trace_report.analyses.common import gpu_op_names
from trace_report.analyses.flags import FlagsOptions, FlagsResult, flags
from trace_report.store.views import views_as_created

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
OPTIONS = [FlagsOptions(), FlagsOptions(by_rank=True), FlagsOptions(trace_ids=(2,)), FlagsOptions(rank=0),
           FlagsOptions(classes=("tensor_core",), limit=3)]

pytestmark = pytest.mark.skipif(not H100.is_dir(), reason="traces/h100-2026-11-25 is not present")


@pytest.fixture
def db_path(h100_db: Path) -> Path:
    """The three H100 runs ingested (a copy of the database ingested once per test process)."""
    return h100_db


def kept_files(db_path: Path) -> list[Path]:
    return kept_of_kind(db_path, gpu_op_names.KEPT.kind)


def json_names(run: str) -> dict[tuple[str, str], tuple[int, float]]:
    """(cat, name) -> (ops, summed dur) of the complete GPU events of a run's trace, from its JSON
    (mangled names demangled, as the ingest stores them)."""
    (path,) = (H100 / run).glob("*.pt.trace.json.gz")
    acc: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0.0])
    for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            key = (e["cat"], cpp_demangle.demangle(e["name"]) if e["name"].startswith("_Z") else e["name"])
            acc[key][0] += 1
            acc[key][1] += float(e["dur"])
    return {k: (n, us) for k, (n, us) in acc.items()}


def computed_flags(db_path: Path, opts: FlagsOptions, monkeypatch: pytest.MonkeyPatch) -> FlagsResult:
    """flags from the events: the kept rows neither read nor written."""
    with monkeypatch.context() as m, tr.open(db_path) as db:
        m.setattr(gpu_op_names, "kept_rows", gpu_op_names._compute)
        return flags(db, opts)


def assert_same(a: FlagsResult, b: FlagsResult) -> None:
    for x, y in ((a.frame, b.frame), (a.summary, b.summary), (a.explain, b.explain)):
        pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=1e-12)
    assert a.notes == b.notes


def test_the_view_counts_and_sums_as_the_json_does(db_path: Path) -> None:
    with tr.open(db_path) as db:
        traces = dict(db.con.execute("SELECT trace_id, path FROM traces").fetchall())
        for trace_id, source in traces.items():
            run = next(r for r in RUNS if f"/{r}/" in source)
            rows = db.con.execute("SELECT cat, name, ops, dur_us FROM gpu_op_names WHERE trace_id = $t",
                                  {"t": trace_id}).fetchall()
            got = {(c, n): (ops, us) for c, n, ops, us in rows}
            want = json_names(run)
            assert got.keys() == want.keys() and len(got) > 20
            for key, (ops, us) in want.items():
                assert got[key][0] == ops and got[key][1] == pytest.approx(us, rel=1e-12)
            gpu_ops, gpu_us = db.con.execute("SELECT gpu_ops, gpu_op_us FROM gpu_time WHERE trace_id = $t",
                                             {"t": trace_id}).fetchall()[0]
            assert gpu_ops == sum(n for n, _ in want.values())
            assert gpu_us == pytest.approx(sum(us for _, us in want.values()), rel=1e-12)


@pytest.mark.parametrize("opts", OPTIONS, ids=repr)
def test_flags_from_kept_rows_equal_flags_from_the_events(db_path: Path, opts: FlagsOptions,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    expected = computed_flags(db_path, opts, monkeypatch)
    assert kept_files(db_path) == []
    with tr.open(db_path) as db:
        first = flags(db, opts)  # computes the rows of the selected traces and keeps them
        assert views_as_created(db.con)  # the kept rows were registered only during the query
        selected = db.con.execute(
            "SELECT trace_id FROM traces WHERE ($r IS NULL OR rank = $r) "
            "AND ($ids IS NULL OR list_contains($ids, trace_id))",
            {"r": opts.rank, "ids": None if opts.trace_ids is None else list(opts.trace_ids)}).fetchall()
        (part,) = kept_files(db_path)  # one part: the selected traces computed together
        assert len(kept_traces(part)) == len(selected) > 0
    with tr.open(db_path) as db:
        again = flags(db, opts)  # reads them
    assert_same(first, expected)
    assert_same(again, expected)
    assert expected.summary["gpu_us"].gt(0).all()


def test_a_second_flags_reads_the_kept_rows(db_path: Path) -> None:
    with tr.open(db_path) as db:
        before = flags(db, FlagsOptions(trace_ids=(1,)))
    (path,) = kept_files(db_path)
    kept = pq.read_table(path)
    doubled = kept.set_column(4, "dur_us", pc.multiply(kept["dur_us"], 2.0))
    pq.write_table(doubled.replace_schema_metadata(kept.schema.metadata), path)
    with tr.open(db_path) as db:
        after = flags(db, FlagsOptions(trace_ids=(1,)))
    pd.testing.assert_series_equal(after.frame["total_us"], 2 * before.frame["total_us"], rtol=1e-12)
    pd.testing.assert_series_equal(after.summary["gpu_us"], 2 * before.summary["gpu_us"], rtol=1e-12)


@pytest.mark.parametrize("damage", ["not parquet", "other columns", "another trace"])
def test_a_damaged_kept_file_is_computed_again(db_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = FlagsOptions(trace_ids=(2,))
    expected = computed_flags(db_path, opts, monkeypatch)
    with tr.open(db_path) as db:
        flags(db, opts)
    (path,) = kept_files(db_path)
    if damage == "not parquet":
        path.write_bytes(b"PAR1 half a file")
    else:
        kept = pq.read_table(path)
        kept = (kept.rename_columns(["trace_id", "cat", "name", "ops", "us"]) if damage == "other columns"
                else kept.set_column(0, "trace_id", pa.array([3] * kept.num_rows, kept["trace_id"].type)))
        pq.write_table(kept, path)
    with tr.open(db_path) as db:
        assert_same(flags(db, opts), expected)
    (again,) = kept_files(db_path)  # kept again
    assert pq.read_table(again).column_names == ["trace_id", "cat", "name", "ops", "dur_us"]
    assert pq.read_table(again)["trace_id"].to_pylist() == [2] * pq.read_table(again).num_rows


def test_ingest_keeps_the_rows_with_the_breakdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "k.duckdb"
    code, _, err = run_cli(["ingest", str(H100 / "baseline"), "-o", str(db), "--no-progress", "--precompute"])
    assert code == 0, err
    assert len(kept_files(db)) == 1 and "`breakdown` and `flags` read it" in err
    expected = computed_flags(db, FlagsOptions(), monkeypatch)
    with tr.open(db) as handle:
        assert_same(flags(handle, FlagsOptions()), expected)
    code, _, err = run_cli(["ingest", str(H100 / "baseline"), "-o", str(tmp_path / "n.duckdb"), "--no-progress",
                            ])
    assert code == 0 and kept_files(tmp_path / "n.duckdb") == []
