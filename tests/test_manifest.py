"""manifest.py: one typed run.json, read by ingest (traces.torch_version, host, device, rank)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from conftest import invoke

from trace_report.manifest import (
    SCHEMA_VERSION,
    Distributed,
    Environment,
    RunManifest,
    manifest_for_trace,
    read_manifest,
    write_manifest,
)

# run.json exactly as capture/loop.py wrote it before this module existed (schema 1, no schema_version)
OLD_RUN_JSON = {
    "schema": "trace-report/run/1", "run_id": "demo-1", "experiment": "baseline", "variant": None,
    "started_utc": "2026-11-01T10:00:00+00:00", "finished_utc": "2026-11-01T10:01:00+00:00", "seed": 0,
    "learning_rate": 0.1, "config": {"model": "resnet18", "batch_size": 32, "steps": 6},
    "environment": {"torch_version": "2.14.1+cpu", "cuda_version": None, "device": "cpu",
                    "device_name": "Example CPU", "host": "node-7", "git": {"commit": "abc"}, "new_key": 1},
    "distributed": {"rank": 0, "world_size": 1, "local_rank": 0, "backend": None},
    "traces": ["worker.1.pt.trace.json.gz"], "files": {"metrics": "metrics.csv", "steps": "steps.csv"},
    "summary": {"epochs": 1, "steps": 6, "final_loss": 2.3, "final_accuracy": 0.1, "test_accuracy": None,
                "peak_memory_bytes": 123456.0, "peak_memory_source": "rss"},
    "unknown_top_level": [1, 2],
}


def test_old_run_json_loads(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps(OLD_RUN_JSON))
    m = read_manifest(tmp_path)
    assert m is not None and m.kind == "run" and m.run_id == "demo-1"
    assert m.environment.torch_version == "2.14.1+cpu" and m.environment.host == "node-7"
    assert m.config["batch_size"] == 32 and m.summary is not None and m.summary.final_loss == 2.3
    assert m.distributed == Distributed(rank=0, world_size=1, local_rank=0, backend=None)


def test_bad_fields_are_dropped_not_fatal(tmp_path: Path) -> None:
    bad = dict(OLD_RUN_JSON, seed="not a number", traces="not a list")
    (tmp_path / "run.json").write_text(json.dumps(bad))
    m = read_manifest(tmp_path)
    assert m is not None and m.seed is None and m.traces == [] and m.run_id == "demo-1"
    (tmp_path / "run.json").write_text("[1, 2]")
    assert read_manifest(tmp_path) is None
    assert read_manifest(tmp_path / "absent") is None


def test_round_trip_and_secrets(tmp_path: Path) -> None:
    token = "hf_" + "Q7" * 17
    m = RunManifest(run_id="r", config={"hf_token": token, "lr": 0.1}, summary=None,
                    environment=Environment(torch_version="2.14.1"), learning_rate=math.nan)
    path = write_manifest(tmp_path / "run.json", m)
    stored = json.loads(path.read_text())
    assert stored["schema_version"] == SCHEMA_VERSION and stored["learning_rate"] is None
    back = read_manifest(tmp_path)
    assert back is not None and back.environment.torch_version == "2.14.1"
    assert token not in json.dumps(back.config) and back.config["lr"] == 0.1


def _trace(path: Path, ts: float) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 5.0}]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))


def test_ingest_takes_run_facts_from_run_json(tmp_path: Path) -> None:
    run = tmp_path / "demo-1"
    run.mkdir()
    _trace(run / "worker.1.pt.trace.json", 10.0)
    write_manifest(run / "run.json", RunManifest(
        run_id="demo-1", environment=Environment(torch_version="2.14.1+cpu", host="node-7", device="cpu",
                                                 device_name="Example CPU"),
        distributed=Distributed(), traces=["worker.1.pt.trace.json"]))
    # a DDP rank's own manifest names its trace; rank 1 of 2
    _trace(run / "worker.2.pt.trace.json", 20.0)
    write_manifest(run / "run-rank1.json", RunManifest(
        run_id="demo-1", environment=Environment(torch_version="2.14.1+cpu", host="node-8"),
        distributed=Distributed(rank=1, world_size=2), traces=["worker.2.pt.trace.json"]))
    assert manifest_for_trace(run / "worker.2.pt.trace.json")[1].distributed.rank == 1  # type: ignore[union-attr]
    db = tmp_path / "runs.duckdb"
    result = invoke(["ingest", run, "-o", db])
    assert result.exit_code == 0, result.stderr
    assert "no rank" not in result.stderr  # the rank came from run.json, not a guess
    rows = json.loads(invoke(["sql", db, "SELECT rank, rank_source, world_size, host, device_name, torch_version, "
                              "run_id FROM traces ORDER BY rank", "-f", "json"]).stdout)
    assert rows == [
        {"rank": 0, "rank_source": "run.json", "world_size": 1, "host": "node-7", "device_name": "Example CPU",
         "torch_version": "2.14.1+cpu", "run_id": "demo-1"},
        {"rank": 1, "rank_source": "run.json", "world_size": 2, "host": "node-8", "device_name": None,
         "torch_version": "2.14.1+cpu", "run_id": "demo-1"},
    ]
