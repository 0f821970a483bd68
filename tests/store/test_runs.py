"""Several capture runs in one database (``trace_report.open``): runs, run_traces, run_metrics,
run_results on real capture output (the capture library on the CPU with tiny settings, captured
once per session by ``conftest.captured_runs``).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import torch
from conftest import captured_runs

from trace_report.api import open as open_runs
from trace_report.errors import InputError
from trace_report.ingest.pipeline import ingest_to_database
from trace_report.store.notebook import magic_connection
from trace_report.store.runs import RUN_COLUMNS, runs_frame

OPTIMIZERS = ["adadelta", "adagrad", "adam", "sgd", "sgd-nesterov"]


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory) -> Path:
    return captured_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def db(runs_root):
    with open_runs([runs_root]) as opened:
        yield opened


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_runs_table_has_every_run_folder(db, runs_root):
    runs = runs_frame(db)
    folders = sorted(p.parent for p in runs_root.rglob("run.json"))
    assert sorted(Path(p) for p in runs["path"]) == folders
    assert list(runs.columns) == [c for c in RUN_COLUMNS if c != "manifest"]
    row = runs.set_index("run_key").loc["opt/adam"]
    assert (row["run_id"], row["experiment"], row["variant"], row["kind"]) == ("opt", "optimizers", "adam", "run")
    assert row["optimizer"] == "adam" and row["lr"] == 0.1 and row["device"] == "cpu"
    assert row["torch_version"] == torch.__version__ and row["n_traces"] == 1
    assert runs.set_index("run_key").loc["opt", "kind"] == "experiment"
    manifest = json.loads((runs_root / "opt" / "adam" / "run.json").read_text())
    config = db.sql("SELECT config FROM runs WHERE run_key = 'opt/adam'").fetchall()[0][0]
    assert json.loads(config) == manifest["config"]
    assert db.sql("SELECT config->>'optimizer' FROM runs WHERE run_key = 'opt/adam'").fetchall() == [("adam",)]


def test_one_query_joins_across_runs(db):
    """Every trace belongs to its run; traces.run_id is the experiment's id."""
    rows = db.sql("""
        SELECT r.run_key, t.run_id, r.optimizer, count(*) AS ops, sum(c.dur_us) AS cpu_us
        FROM cpu_ops c JOIN run_traces USING (trace_id) JOIN runs r USING (run_key)
        JOIN traces t USING (trace_id)
        WHERE r.experiment = 'optimizers' GROUP BY ALL ORDER BY r.optimizer""").fetchall()
    assert [r[2] for r in rows] == OPTIMIZERS
    assert {r[1] for r in rows} == {"opt"} and all(r[3] > 100 and r[4] > 0 for r in rows)
    n_traces = db.sql("SELECT count(*) FROM traces").fetchall()[0][0]
    linked = db.sql("SELECT count(*) FROM run_traces JOIN traces USING (trace_id)").fetchall()[0][0]
    assert n_traces == linked == 1 + 5 + 4  # baseline, optimizers, amp (the others ran without profiling)


def test_metrics_steps_and_results_of_every_run(db, runs_root):
    metrics = db.sql("SELECT epoch, loss, accuracy FROM run_metrics WHERE run_key = 'opt/sgd' ORDER BY epoch")
    metrics = metrics.fetchall()
    expected = read_csv(runs_root / "opt" / "sgd" / "metrics.csv")
    assert [(int(r["epoch"]), float(r["loss"]), float(r["accuracy"])) for r in expected] == metrics
    assert db.sql("SELECT count(*) FROM run_steps WHERE run_key = 'opt/sgd'").fetchall()[0][0] == 4
    workers = db.sql("SELECT workers, mean_total_s FROM run_results WHERE run_key = 'wk' ORDER BY workers").fetchall()
    assert [w for w, _ in workers] == [0, 1] and all(t > 0 for _, t in workers)


def test_results_convert_to_pandas_and_arrow(db):
    rel = db.sql("SELECT run_key, optimizer FROM runs WHERE kind = 'run' ORDER BY run_key")
    frame = rel.df()
    table = rel.arrow().read_all() if hasattr(rel.arrow(), "read_all") else rel.arrow()
    assert isinstance(table, pa.Table)
    assert table.column("run_key").to_pylist() == list(frame["run_key"])
    assert len(frame) == len(db.sql("SELECT * FROM runs WHERE kind = 'run'").fetchall())


def test_run_without_traces_and_a_single_trace(runs_root):
    with open_runs(runs_root / "wk" / "workers-1") as db:
        assert db.sql("SELECT count(*) FROM events").fetchall() == [(0,)]
        assert db.sql("SELECT run_key, workers FROM runs").fetchall() == [("wk/workers-1", 1)]
    trace = next((runs_root / "base").glob("*.pt.trace.json.gz"))
    with open_runs(trace) as db:
        assert db.sql("SELECT r.run_key FROM run_traces JOIN runs r USING (run_key)").fetchall() == [("base",)]


def test_database_finds_its_runs_again(runs_root, tmp_path):
    path = tmp_path / "runs.duckdb"
    ingest_to_database([runs_root / "opt", runs_root / "base"], path)
    with open_runs(path) as db:
        keys = [k for (k,) in db.sql("SELECT run_key FROM run_traces ORDER BY trace_id").fetchall()]
        assert sorted(keys) == ["base", *[f"opt/{o}" for o in OPTIMIZERS]]
        assert db.sql("SELECT count(*) FROM run_metrics").fetchall()[0][0] == 1 + 5 * 2


def test_secret_looking_keys_are_redacted(runs_root, tmp_path):
    run = tmp_path / "leaky"
    shutil.copytree(runs_root / "wk" / "workers-0", run)
    manifest = json.loads((run / "run.json").read_text())
    manifest["config"]["hf_token"] = "hf_" + "x" * 30
    (run / "run.json").write_text(json.dumps(manifest))
    with open_runs(run) as db:
        text = db.sql("SELECT config::VARCHAR || manifest::VARCHAR FROM runs").fetchall()[0][0]
    assert "hf_xxx" not in text and "<redacted:hf_token>" in text


def test_missing_and_empty_inputs(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        open_runs(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no traces or Nsight exports here"):
        open_runs(tmp_path / "empty")


def test_magic_connection_shares_the_temp_views(db):
    """jupysql queries ``conn.cursor()``; a DuckDB cursor is a new connection without our TEMP views."""
    with pytest.raises(duckdb.CatalogException):
        db.con.cursor().execute("SELECT count(*) FROM runs")
    conn = magic_connection(db)
    cur = conn.cursor()
    assert cur.execute("SELECT count(*) FROM run_traces").fetchall()[0][0] > 0
    cur.execute("SELECT trace_id, run_key FROM run_traces ORDER BY trace_id")
    assert [d[0] for d in cur.description] == ["trace_id", "run_key"]
    first = cur.fetchmany(2)  # a partial fetch, as jupysql's displaylimit does
    assert db.sql("SELECT trace_id FROM run_traces ORDER BY trace_id LIMIT 2").fetchall() == [(t,) for t, _ in first]
    assert len(cur.fetchall()) == db.sql("SELECT count(*) FROM run_traces").fetchall()[0][0] - 2
    assert list(cur.execute("SELECT 1 AS one").df()["one"]) == [1]
    conn.close()  # a no-op: the TraceDB keeps its connection
    assert db.sql("SELECT 1").fetchall() == [(1,)]
