"""Exported datasets and run folders in object storage; a ``.duckdb`` object refused.

- ``export -o s3://.../ds`` then ``trace_report.open("s3://.../ds")`` (and any command) reads the
  dataset in place, as the same export on a local folder reads;
- a run folder (``run.json``, ``metrics.csv`` beside the traces) under a prefix gives the rows of
  ``runs``, ``run_traces`` and ``run_metrics`` that the same folder gives locally, opened directly
  and from a database ingested from the prefix;
- a ``.duckdb`` object is one ``Error:`` line saying what is supported, before any of it is copied.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import trace_report as tr
from tests.conftest import TRACES, invoke, shared_or_skip
from trace_report import storage

GZ = "tracelens_h100_falconsai_vit"
MANIFEST = {"schema": "trace-report/run/1", "run_id": "vit-42", "config": {"model": "vit", "batch_size": 8},
            "environment": {"host": "node-7", "device_name": "NVIDIA H100 80GB HBM3"}}
METRICS = [{"epoch": "0", "loss": "2.5"}, {"epoch": "1", "loss": "1.25"}]


def test_export_to_prefix_opens_in_place(tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = TRACES / GZ if shared_or_skip() else None
    url, local = f"{bucket}/datasets/vit", tmp_path / "vit"
    assert invoke(["export", trace, "-o", url]).exit_code == 0
    assert invoke(["export", trace, "-o", local]).exit_code == 0
    copied = storage.download

    def no_copies(loc: str, dest: Path) -> storage.ObjectInfo:
        raise AssertionError(f"{loc} was copied: a dataset is read in place")

    monkeypatch.setattr(storage, "download", no_copies)
    with tr.open(url) as there, tr.open(local) as here:
        assert there.top_kernels().equals(here.top_kernels())
        assert there.sql("SELECT count(*), sum(dur_us) FROM events").fetchall() == \
            here.sql("SELECT count(*), sum(dur_us) FROM events").fetchall()
    for command in (["top-kernels"], ["breakdown"]):
        remote, plain = invoke([*command, url, "-f", "json"]), invoke([*command, local, "-f", "json"])
        assert remote.exit_code == 0 and remote.stdout == plain.stdout, remote.output
    monkeypatch.setattr(storage, "download", copied)
    storage.write_bytes(f"{bucket}/elsewhere.parquet", b"")
    refused = invoke(["sql", url, f"SELECT * FROM read_parquet('{bucket}/elsewhere.parquet')"])
    assert refused.exit_code == 1 and "Permission Error" in refused.stderr


def test_database_object_is_one_error_line(tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = TRACES / GZ if shared_or_skip() else None
    db = tmp_path / "runs.duckdb"
    assert invoke(["ingest", trace, "-o", db]).exit_code == 0
    url = f"{bucket}/dbs/runs.duckdb"
    storage.write_file(url, db)

    def no_copies(loc: str, dest: Path) -> storage.ObjectInfo:
        raise AssertionError(f"{loc} was copied before being refused")

    monkeypatch.setattr(storage, "download", no_copies)
    for command in (["top-kernels", url], ["report", url, "-o", tmp_path / "r.html"]):
        result = invoke(command)
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert result.stderr.strip().splitlines()[-1] == (
            f"Error: {url}: a trace-report database is opened from a local file only: copy it here (its event "
            "pieces may stay in object storage: ingest --pieces), or export it (export -o s3://...), which is "
            "read in place")
    with pytest.raises(tr.InputError, match="opened from a local file only"):
        tr.open(url)


def _run_folder(root: Path) -> Path:
    """A capture-like run folder: one real trace, run.json and metrics.csv."""
    folder = root / "vit-42"
    folder.mkdir(parents=True)
    trace = next((TRACES / GZ).glob("*.json.gz"))
    shutil.copy(trace, folder / trace.name)
    (folder / "run.json").write_text(json.dumps({**MANIFEST, "traces": [trace.name]}))
    with open(folder / "metrics.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(METRICS[0]))
        writer.writeheader()
        writer.writerows(METRICS)
    return folder


def _runs(db: Any) -> list[tuple[Any, ...]]:
    return db.sql("SELECT run_key, run_id, path, model, batch_size, host, n_traces FROM runs").fetchall()


def test_run_folder_in_a_bucket_gives_its_runs_rows(tmp_path: Path, bucket: str, upload: Any) -> None:
    shared_or_skip()
    local = _run_folder(tmp_path / "local")
    url = upload(local, f"{bucket}/runs/vit-42")
    expected = [("vit-42", "vit-42", url, "vit", 8, "node-7", 1)]
    with tr.open(local) as here:
        assert _runs(here) == [(*expected[0][:2], str(local), *expected[0][3:])]
    db = tmp_path / "runs.duckdb"
    assert invoke(["ingest", url + "/", "-o", db]).exit_code == 0
    with tr.open(url + "/") as opened, tr.open(db) as ingested:
        for there in (opened, ingested):
            assert _runs(there) == expected
            assert there.sql("SELECT run_key FROM run_traces").fetchall() == [("vit-42",)]
            metrics = there.sql("SELECT epoch, loss FROM run_metrics ORDER BY epoch").fetchall()
            assert metrics == [(int(m["epoch"]), float(m["loss"])) for m in METRICS]
            assert there.sql("SELECT run_id FROM traces").fetchall() == [("vit-42",)]
    rows = invoke(["sql", db, "SELECT run_key, path FROM runs", "-f", "json"])
    assert rows.exit_code == 0 and json.loads(rows.stdout) == [{"run_key": "vit-42", "path": url}]


def test_run_folder_without_traces_in_a_bucket(tmp_path: Path, bucket: str, upload: Any) -> None:
    shared_or_skip()
    local = _run_folder(tmp_path / "local")
    for trace in local.glob("*.json.gz"):
        trace.unlink()
    url = upload(local, f"{bucket}/runs/vit-42")
    with tr.open(url + "/") as opened:
        assert _runs(opened) == [("vit-42", "vit-42", url, "vit", 8, "node-7", 0)]


def test_hta_on_urls_matches_local_and_leaves_no_copies(tmp_path: Path, bucket: str, upload: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("hta")
    shared_or_skip()
    local = tmp_path / "ddp"
    shutil.copytree(TRACES / "hta_a100_ddp_nccl", local)
    url = upload(local, f"{bucket}/ddp")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)  # TMPDIR read again
    db = tmp_path / "ddp.duckdb"
    assert invoke(["ingest", url + "/", "-o", db]).exit_code == 0
    here = invoke(["hta", "temporal", local, "-f", "json"])
    assert here.exit_code == 0, here.output
    for target in (url + "/", db):
        there = invoke(["hta", "temporal", target, "-f", "json"])
        assert there.exit_code == 0 and there.stdout == here.stdout, there.output
    assert list(scratch.iterdir()) == []  # the copies HTA read are gone
    assert "copied to a temporary folder" in invoke(["hta", "--help"]).stdout
