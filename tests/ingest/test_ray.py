"""The Ray engine (docs/scaling.md) on a real Ray runtime: ``ingest --engine ray`` writes the
same database as the local engine, ``top-kernels``/``breakdown``/``flags``/``compare --engine ray``
print the local engine's rows, a task whose worker dies is run again, an interrupted ingest leaves
the old database, and without Ray ``--engine ray`` is one ``Error:`` line.

"Identical" is the golden tests' rule (``tests.golden.cases.differences``): strings, integers, row
order and keys exactly, floats to 1e-9 relative, because floating sums taken in another order
differ in the last bits (two local runs of ``flags --summary`` on hta_a100_ddp_nccl already do).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REPO, TRACES, invoke, shared_or_skip, tar_ranks

from tests.golden.cases import differences
from trace_report.ingest.decoding import Job, JobResult, run_job

DLRM = "param_dlrm_kineto_v100x8"
A100 = "hta_a100_ddp_nccl"
ANALYSES = (["top-kernels", "--limit", "1000"], ["top-kernels", "--by-rank"], ["breakdown"],
            ["breakdown", "--by-step", "--by-rank"], ["flags"], ["flags", "--summary", "--by-rank"])
FAST = (["top-kernels", "--by-rank"], ["breakdown"], ["flags", "--summary", "--by-rank"])
"""What the default run compares (each command once, by rank); the slow tests compare :data:`ANALYSES`."""


@pytest.fixture(scope="session")
def ray_up() -> Any:
    """A real local Ray runtime of 2 CPUs for the whole session (about 20 s to start here)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="warning", log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def _json(args: list[object]) -> Any:
    result = invoke([*args, "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _same_analyses(local_target: Path, ray_target: Path, analyses: tuple[list[str], ...] = ANALYSES) -> None:
    for cmd in analyses:
        local = _json([cmd[0], local_target, *cmd[1:]])
        distributed = _json([cmd[0], ray_target, *cmd[1:], "--engine", "ray"])
        assert local, cmd  # something to compare
        diffs = differences(local, distributed, " ".join(cmd))
        assert not diffs, "\n".join(diffs[:10])


def _tables(db: Path) -> dict[str, list[tuple]]:
    """Every row of ``traces`` and ``events`` of a database, in order. Left out: the ingest time, and
    the file time, which for a tar member is when it was unpacked."""
    with duckdb.connect(str(db), read_only=True) as con:
        traces = con.execute("SELECT * EXCLUDE (ingested_at, file_mtime_ns) FROM traces ORDER BY trace_id").fetchall()
        rows = con.execute("SELECT sum(rows) FROM event_files").fetchall()[0][0]
    import trace_report as tr

    with tr.open(db) as opened:
        events = opened.con.execute("SELECT * FROM events ORDER BY trace_id, event_id").fetchall()
    assert rows == len(events)
    return {"traces": traces, "events": events}


GPU_CATS = {"kernel": ("kernel", "Kernel"), "memcpy": ("gpu_memcpy", "Memcpy"), "memset": ("gpu_memset", "Memset")}
"""The top-kernels ``kind`` of each GPU operation and its categories in a trace (2020/2021 Kineto spellings too)."""


def _gpu_counts(events: Any) -> dict[str, int]:
    """Complete events of each top-kernels ``kind``, by a plain pass over the JSON."""
    return {kind: sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in cats)
            for kind, cats in GPU_CATS.items()}


def _counts_by_kind(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Summed ``count`` of top-kernels rows per ``kind`` (every kind of :data:`GPU_CATS`, 0 when absent)."""
    out = dict.fromkeys(GPU_CATS, 0)
    for r in rows:
        out[r["kind"]] += r["count"]
    return out


def _hidden_note(stderr: str) -> str | None:
    """The ``--kernels-only`` note on memcpy/memset rows in a command's stderr (lines joined: the
    console may wrap it), or None."""
    found = re.search(r"memcpy/memset rows hidden \(--kernels-only\): .*? of GPU time", " ".join(stderr.split()))
    return found.group(0) if found else None


def _same_top_kernels(local_target: Path, ray_target: Path, *args: object) -> tuple[list[Any], list[Any], str | None]:
    """``top-kernels ARGS`` and ``top-kernels ARGS --kernels-only`` on Ray give the local engine's
    rows (``kind`` included) and ``--kernels-only`` note; the Ray rows of both and the note, returned."""
    out = []
    for extra in ((), ("--kernels-only",)):
        cmd = ["top-kernels", *args, *extra, "-f", "json"]
        local = invoke([cmd[0], local_target, *cmd[1:]])
        distributed = invoke([cmd[0], ray_target, *cmd[1:], "--engine", "ray"])
        assert local.exit_code == distributed.exit_code == 0, distributed.stderr
        expected, actual = json.loads(local.stdout), json.loads(distributed.stdout)
        assert expected, cmd  # something to compare
        diffs = differences(expected, actual, " ".join(map(str, cmd)))
        assert not diffs, "\n".join(diffs[:10])
        assert _hidden_note(local.stderr) == _hidden_note(distributed.stderr)
        out.append((actual, _hidden_note(distributed.stderr)))
    (everything, none), (kernels, note) = out
    assert none is None
    assert {r["kind"] for r in kernels} == {"kernel"}
    if any(r["kind"] != "kernel" for r in everything):
        assert note is not None
    return everything, kernels, note


def _ingest(target: Path, db: Path, *extra: object) -> None:
    result = invoke(["ingest", target, "-o", db, *extra])
    assert result.exit_code == 0, result.stderr


# ---------------------------------------------------------------- default run: one small end-to-end test


def test_ray_ingest_and_analyses_match_local_on_the_8_rank_archive(ray_up: Any, tmp_path: Path) -> None:
    folder = shared_or_skip() / "data" / "traces" / DLRM
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    _ingest(folder, local_db)
    _ingest(folder, ray_db, "--engine", "ray")
    local, distributed = _tables(local_db), _tables(ray_db)
    assert local == distributed
    # independent: the plain-Python pass over the archive gives the ranks and their GPU operations
    ranks = tar_ranks(folder / "dlrm_kineto.tar.gz")
    assert sorted(r[3] for r in distributed["traces"]) == sorted(ranks) == list(range(8))
    n_ops = _gpu_counts([e for evs in ranks.values() for e in evs])
    assert sum(r[13] for r in distributed["traces"]) == n_ops["kernel"]
    assert n_ops["memcpy"] > 0 and n_ops["memset"] > 0  # the archive has both: their rows are compared too
    # a second ingest of the same files skips them all, as locally
    again = invoke(["ingest", folder, "-o", ray_db, "--engine", "ray"])
    assert again.exit_code == 0 and "0 trace(s) ingested, 8 skipped" in again.stderr
    _same_analyses(folder, ray_db, FAST)
    # the Ray breakdown kept each rank's rows beside the database; local and Ray runs now read them
    parts = (tmp_path / "ray.duckdb.events" / "derived" / "breakdown").glob("*/part-*")
    kept = {p: p.stat().st_mtime_ns for p in parts}
    assert len(kept) == 1  # one part: the 8 ranks computed together
    _same_analyses(folder, ray_db, (["breakdown", "--by-step"],))
    assert differences(_json(["breakdown", folder]), _json(["breakdown", ray_db]), "kept rows, local") == []
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # read, not computed and written again
    # top-kernels: kernels, memcpy and memset rows with their kind, each counted as the JSON has them;
    # --kernels-only keeps the kernels (all of them under the limit) and says what it hid
    top, kernels, note = _same_top_kernels(local_db, ray_db, "--limit", "1000")
    assert _counts_by_kind(top) == n_ops
    assert not differences([r for r in top if r["kind"] == "kernel"], kernels, "kernel rows")
    memory_cats = GPU_CATS["memcpy"] + GPU_CATS["memset"]
    memory = {e["name"] for evs in ranks.values() for e in evs if e.get("cat") in memory_cats}
    assert note is not None and note.startswith(f"memcpy/memset rows hidden (--kernels-only): {len(memory)} names,")
    top, kernels, note = _same_top_kernels(local_db, ray_db, "--by-rank", "--limit", "3")
    assert sorted({r["rank"] for r in kernels}) == list(range(8)) and len(kernels) == 8 * 3 and note is not None
    # an exported dataset (hive-partitioned run_id=/rank=) is aggregated one partition per task
    dataset = tmp_path / "dataset"
    assert invoke(["export", ray_db, "-o", dataset]).exit_code == 0
    assert len(list((dataset / "events").glob("run_id=*/rank=*"))) == 8
    _same_analyses(folder, dataset, FAST[:1])


def test_engine_ray_without_ray_is_one_error_line(tmp_path: Path) -> None:
    """Ray made unimportable in a child process: one ``Error:`` line with the install command."""
    shared_or_skip()
    trace = TRACES / A100
    for argv in (["top-kernels", str(trace), "--engine", "ray"],
                 ["ingest", str(trace), "-o", str(tmp_path / "x.duckdb"), "--engine", "ray"]):
        code = ("import sys; sys.modules['ray'] = None; from trace_report.cli.app import main; "
                f"main({argv!r})")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and 'pip install "trace-report[ray]"' in lines[0]
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "x.duckdb").exists()


# ---------------------------------------------------------------- slow: more inputs, retries, atomicity


@pytest.mark.slow
def test_ray_breakdown_of_a_dataset_with_a_trace_without_events(ray_up: Any, tmp_path: Path) -> None:
    """A trace whose every event is left out at ingest has no run_id=/rank= folder in an exported
    dataset, so no Ray task sees it: the breakdown still lists it as the local engine does."""
    traces = tmp_path / "traces"
    traces.mkdir()
    (good,) = (REPO / "traces" / "h100-2026-11-25" / "baseline").glob("*.pt.trace.json.gz")
    (traces / good.name).write_bytes(good.read_bytes())
    (traces / "empty.json").write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 10, "dur": -5}],
        "distributedInfo": {"rank": 1}}))
    db, dataset = tmp_path / "t.duckdb", tmp_path / "dataset"
    _ingest(traces, db)
    assert invoke(["export", db, "-o", dataset]).exit_code == 0
    assert len(list((dataset / "events").glob("run_id=*/rank=*"))) == 1
    local = invoke(["breakdown", dataset, "-f", "json"])
    distributed = invoke(["breakdown", dataset, "-f", "json", "--engine", "ray"])
    assert local.exit_code == distributed.exit_code == 0, distributed.stderr
    assert differences(json.loads(local.stdout), json.loads(distributed.stdout), "breakdown") == []
    assert "empty.json: CPU-only trace" in local.stderr and "empty.json: CPU-only trace" in distributed.stderr


@pytest.mark.slow
def test_ray_matches_local_on_the_a100_ddp_trace(ray_up: Any, tmp_path: Path) -> None:
    folder = shared_or_skip() / "data" / "traces" / A100
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    _ingest(folder, local_db)
    _ingest(folder, ray_db, "--engine", "ray")
    assert _tables(local_db) == _tables(ray_db)
    _same_analyses(folder, ray_db)
    _same_analyses(folder, folder, ANALYSES[:1])  # trace files: ingested by Ray tasks into a temporary database
    for by in ("kernel", "region"):
        local = _json(["compare", folder, TRACES / DLRM, "--by", by])
        distributed = _json(["compare", ray_db, TRACES / DLRM, "--by", by, "--engine", "ray"])
        assert not differences(local, distributed, f"compare --by {by}")


@pytest.mark.slow
def test_ray_decodes_large_files_whole_in_tasks_like_local(ray_up: Any, tmp_path: Path) -> None:
    """Two ranks larger than a piece (as many as the runtime's CPUs): each goes to one task whole
    (job kind ``pieces``), which cuts, decodes and writes its pieces and counts its duplicates."""
    from trace_report.ingest.engine_ray import RayEngine

    source = shared_or_skip() / "data" / "traces" / A100 / "nccl_data.json.gz"
    with gzip.open(source, "rt") as fh:
        doc = json.load(fh)
    folder = tmp_path / "two"
    folder.mkdir()
    for rank in (0, 1):
        with gzip.open(folder / f"rank{rank}.json.gz", "wt") as fh:
            json.dump({**doc, "distributedInfo": {**doc["distributedInfo"], "rank": rank}}, fh)
    kinds: list[str] = []

    class Recording(RayEngine):
        def submit(self, fn: Any, /, *args: Any) -> Any:
            kinds.append(args[0].kind)
            return super().submit(fn, *args)

    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    local = ingest_to_database([folder], local_db, IngestOptions(piece_bytes=1 << 20))
    distributed = ingest_to_database([folder], ray_db, IngestOptions(piece_bytes=1 << 20), engine=Recording())
    assert kinds == ["pieces", "pieces"]
    assert (local.notes, local.warnings) == (distributed.notes, distributed.warnings)
    assert _tables(local_db) == _tables(ray_db)
    assert len(list((tmp_path / "ray.duckdb.events").glob("t000001-*.parquet"))) > 1  # cut into pieces
    _same_analyses(folder, ray_db, ANALYSES[:1])


def _replicated_ranks(folder: Path, copies: int) -> dict[str, int]:
    """Write ``copies`` x the 8 DLRM ranks as one folder of ``8 * copies`` rank files: rank, pid,
    correlation and External ids shifted per copy so that every file is a distinct rank. Returns the
    GPU operations written per top-kernels ``kind`` (:func:`_gpu_counts`)."""
    archive = TRACES / DLRM / "dlrm_kineto.tar.gz"
    with tarfile.open(archive) as tar:
        docs = [json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")]
    for k in range(copies):
        for doc in docs:
            rank = doc["distributedInfo"]["rank"] + 8 * k
            copy = {**doc, "distributedInfo": {**doc["distributedInfo"], "rank": rank, "world_size": 8 * copies}}
            events = []
            for e in doc["traceEvents"]:
                e = dict(e)
                args = dict(e.get("args") or {})
                for key in ("correlation", "External id"):
                    if isinstance(args.get(key), int):
                        args[key] += 1_000_000 * k
                if args:
                    e["args"] = args
                events.append(e)
            copy["traceEvents"] = events
            with gzip.open(folder / f"rank{rank:03d}.pt.trace.json.gz", "wt") as fh:
                json.dump(copy, fh)
    return {kind: n * copies for kind, n in _gpu_counts([e for d in docs for e in d["traceEvents"]]).items()}


@pytest.mark.slow
def test_ray_matches_local_on_32_replicated_ranks(ray_up: Any, tmp_path: Path) -> None:
    shared_or_skip()
    folder = tmp_path / "ranks32"
    folder.mkdir()
    n_ops = _replicated_ranks(folder, 4)
    ray_db = tmp_path / "ray.duckdb"
    _ingest(folder, ray_db, "--engine", "ray")
    ranks, kernels, note = _same_top_kernels(folder, ray_db, "--by-rank", "--limit", "1000")
    assert sorted({r["rank"] for r in ranks}) == list(range(32))
    assert _counts_by_kind(ranks) == n_ops and n_ops["memcpy"] > 0 and n_ops["memset"] > 0
    assert not differences([r for r in ranks if r["kind"] == "kernel"], kernels, "kernel rows") and note is not None
    _same_analyses(folder, ray_db)


def _crash_once(marker: str, job: Job) -> JobResult:
    """The first job to run kills its own worker process (once: the marker is claimed atomically)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return run_job(job)
    os._exit(1)


@pytest.mark.slow
def test_a_killed_worker_is_retried_and_the_result_is_the_same(ray_up: Any, tmp_path: Path) -> None:
    from trace_report.ingest.engine_ray import RayEngine
    from trace_report.ingest.pipeline import ingest_to_database

    ray_up.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import tests/

    class CrashingEngine(RayEngine):
        def submit(self, fn: Any, /, *args: Any) -> Any:
            return super().submit(functools.partial(_crash_once, str(tmp_path / "crashed")), *args)

    folder = shared_or_skip() / "data" / "traces" / DLRM
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    _ingest(folder, local_db)
    summary = ingest_to_database([folder], ray_db, engine=CrashingEngine(max_retries=2))
    assert (tmp_path / "crashed").exists()  # a worker did die
    assert len(summary.ingested) == 8
    assert _tables(local_db) == _tables(ray_db)

    class NoRetries(RayEngine):
        def submit(self, fn: Any, /, *args: Any) -> Any:
            return super().submit(functools.partial(_crash_once, str(tmp_path / "crashed-again")), *args)

    from trace_report.errors import EngineError

    with pytest.raises(EngineError, match="lost"):
        ingest_to_database([folder], tmp_path / "never.duckdb", engine=NoRetries(max_retries=0))
    assert not (tmp_path / "never.duckdb").exists()
    assert not list((tmp_path / "never.duckdb.events").glob("*.parquet"))


@pytest.mark.slow
def test_a_failed_ray_ingest_leaves_the_old_database(ray_up: Any, tmp_path: Path) -> None:
    shared_or_skip()
    db = tmp_path / "runs.duckdb"
    _ingest(TRACES / A100, db, "--engine", "ray")
    before, files = db.read_bytes(), sorted(p.name for p in (tmp_path / "runs.duckdb.events").iterdir())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.json").write_text('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": ')
    result = invoke(["ingest", TRACES / DLRM, bad, "-o", db, "--engine", "ray"])
    assert result.exit_code == 1 and result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert db.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "runs.duckdb.events").iterdir()) == files
    assert len(_json(["top-kernels", db, "--engine", "ray"])) > 0
