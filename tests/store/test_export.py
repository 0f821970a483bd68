"""``export``: a database as a Hive-partitioned Parquet dataset (run, rank), read back by
DuckDB, pyarrow and pandas, and reopened as a TraceDB with the same numbers."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.dataset as ds
import pytest
from conftest import TRACES, captured_runs, invoke

from trace_report.analyses.breakdown import breakdown
from trace_report.api import open as open_runs
from trace_report.errors import InputError
from trace_report.ingest.pipeline import ingest_to_database
from trace_report.inputs import is_dataset as is_parquet_dataset
from trace_report.store import export
from trace_report.store.export import export_parquet, open_parquet_dataset
from trace_report.store.tracedb import TraceDB

A100 = TRACES / "hta_a100_ddp_nccl"
DLRM = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data is not present")
KERNELS = "SELECT trace_id, count(*) AS n, sum(dur_us) AS us FROM kernels GROUP BY 1 ORDER BY 1"


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    if not TRACES.is_dir():
        pytest.skip("../shared/data is not present")
    path = tmp_path_factory.mktemp("db") / "traces.duckdb"
    ingest_to_database([A100, DLRM], path)
    return path


@pytest.fixture(scope="module")
def dataset(database, tmp_path_factory) -> tuple[Path, export.ExportSummary]:
    out = tmp_path_factory.mktemp("export") / "dataset"
    with open_runs(database) as db:
        report = export_parquet(db, out)
    return out, report


@needs_shared
def test_layout_is_hive_partitioned_by_run_and_rank(dataset):
    out, report = dataset
    parts = sorted(p.relative_to(out / "events").parent.as_posix() for p in (out / "events").rglob("*.parquet"))
    assert parts == sorted({f"run_id=__HIVE_DEFAULT_PARTITION__/rank={r}" for r in range(8)})  # A100 is rank 0 too
    assert report.partitions == 8 and report.events > 0
    for name in ("traces", "kernel_names", "trace_report_info", "runs", "run_traces"):
        assert (out / f"{name}.parquet").is_file()
    assert not (out / "event_files.parquet").exists() and (out / "_SUCCESS").is_file()
    assert not list(out.parent.glob(".dataset.tmp-*")) and is_parquet_dataset(out)


@needs_shared
def test_round_trip_keeps_kernel_counts_and_sums(database, dataset):
    out, _ = dataset
    with open_runs(database) as before, open_runs(out) as after:
        pd.testing.assert_frame_equal(after.sql(KERNELS).df(), before.sql(KERNELS).df(), check_exact=False, rtol=1e-12)
        assert after.sql("SELECT * FROM traces ORDER BY trace_id").df().equals(
            before.sql("SELECT * FROM traces ORDER BY trace_id").df())
        (n, us), = after.sql("SELECT count(*), sum(dur_us) FROM events").fetchall()
        assert (n, pytest.approx(us, rel=1e-12)) == before.sql("SELECT count(*), sum(dur_us) FROM events").fetchall()[0]
        pd.testing.assert_frame_equal(after.top_kernels(10), before.top_kernels(10))
        pd.testing.assert_frame_equal(breakdown(after).frame, breakdown(before).frame)
        info = dict(after.sql("SELECT key, value FROM trace_report_info").fetchall())
        assert info["app"] == "trace-report"


@needs_shared
def test_readable_by_duckdb_pyarrow_and_pandas(database, dataset):
    out, _ = dataset
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT rank, count(*) FROM read_parquet('{out}/events/**/*.parquet', hive_partitioning = true) "
        "WHERE cat = 'kernel' GROUP BY 1 ORDER BY 1").fetchall()
    with open_runs(database) as db:
        expected = db.sql("SELECT rank, count(*) FROM kernels JOIN traces USING (trace_id) GROUP BY 1 ORDER BY 1")
        assert rows == expected.fetchall()
    table = ds.dataset(out / "events", partitioning=export.partitioning()).to_table(filter=ds.field("rank") == 3)
    assert table.num_rows > 0 and set(table.column("run_id").to_pylist()) == {None}
    frame = pd.read_parquet(out / "events", partitioning=export.partitioning(), filters=[("rank", "==", 3)])
    assert len(frame) == table.num_rows
    traces = pd.read_parquet(out / "traces.parquet")
    assert sorted(traces["rank"]) == [0, 0, 1, 2, 3, 4, 5, 6, 7]


def test_captured_runs_export_with_their_run_tables(tmp_path_factory, tmp_path):
    root = captured_runs(tmp_path_factory)
    with open_runs([root / "base", root / "opt"]) as db:
        report = export_parquet(db, tmp_path / "runs")
        runs_before = db.sql("SELECT * EXCLUDE (config, manifest) FROM runs ORDER BY run_key").df()
        kernels_before = db.sql("SELECT count(*), sum(dur_us) FROM cpu_ops").fetchall()
    assert sorted(p.name for p in (tmp_path / "runs" / "events").iterdir()) == ["run_id=base", "run_id=opt"]
    assert report.tables["runs"] == len(runs_before)
    with open_runs(tmp_path / "runs") as again:  # open_runs recognises a dataset
        (n, us), = again.sql("SELECT count(*), sum(dur_us) FROM cpu_ops").fetchall()
        assert n == kernels_before[0][0] and us == pytest.approx(kernels_before[0][1], rel=1e-12)
        pd.testing.assert_frame_equal(again.sql("SELECT * EXCLUDE (config, manifest) FROM runs ORDER BY run_key")
                                      .df(), runs_before, check_dtype=False)
        joined = again.sql("SELECT r.optimizer, count(*) FROM cpu_ops JOIN run_traces USING (trace_id) "
                           "JOIN runs r USING (run_key) GROUP BY 1").fetchall()
        assert {o for o, _ in joined} == {"sgd", "sgd-nesterov", "adagrad", "adadelta", "adam"}


def test_atomic_and_refuses_to_overwrite(tmp_path_factory, tmp_path, monkeypatch):
    root = captured_runs(tmp_path_factory)
    out = tmp_path / "ds"
    with open_runs(root / "base") as db:
        export_parquet(db, out)
        first = sorted(p.name for p in out.iterdir())
        with pytest.raises(InputError, match="already exists"):
            export_parquet(db, out)

        def boom(con, tmp, report):
            (tmp / "events").mkdir()
            raise RuntimeError("disk full")

        monkeypatch.setattr(export, "_write_dataset", boom)
        with pytest.raises(RuntimeError, match="disk full"):
            export_parquet(db, out, overwrite=True)
        assert sorted(p.name for p in out.iterdir()) == first  # the old dataset is untouched
        assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no temporary folder left behind
        monkeypatch.undo()
        export_parquet(db, out, overwrite=True)
    with pytest.raises(InputError, match="no such directory"):
        export_parquet(TraceDB(duckdb.connect()), tmp_path / "absent" / "ds")
    with pytest.raises(InputError, match="not a trace-report Parquet dataset"):
        open_parquet_dataset(tmp_path)


def test_export_command(tmp_path_factory, tmp_path):
    root = captured_runs(tmp_path_factory)
    res = invoke(["export", str(root / "amp"), "-o", str(tmp_path / "amp")])
    assert res.exit_code == 0, res.output
    assert "events in 1 partition(s)" in res.output
    with open_parquet_dataset(tmp_path / "amp") as db:
        assert db.sql("SELECT count(*) FROM traces").fetchall() == [(4,)]


def test_overwrite_replaces_only_a_dataset_or_an_empty_folder(tmp_path):
    """`export X -o /tmp --overwrite` once replaced the whole of /tmp: a folder holding
    other files is refused and left as it was; an earlier dataset is replaced."""
    from conftest import REPO, invoke

    trace = REPO / "traces" / "h100-2026-11-25" / "baseline"
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    out = invoke(["export", trace, "-o", other, "--overwrite"])
    assert out.exit_code == 1 and out.stderr.strip().splitlines()[-1].startswith("Error:")
    assert (other / "notes.txt").read_text() == "keep me" and len(list(other.iterdir())) == 1
    dataset = tmp_path / "dataset"
    assert invoke(["export", trace, "-o", dataset]).exit_code == 0
    assert invoke(["export", trace, "-o", dataset, "--overwrite"]).exit_code == 0
    assert (dataset / "traces.parquet").is_file()
