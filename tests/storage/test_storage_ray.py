"""Ray without a shared filesystem: ``ingest s3://... --engine ray`` has each object read by the task
that decodes it, from its URL, and its Parquet pieces sent back to the driver (docs/scaling.md,
"Ray without a shared filesystem").

The driver copies only the head of each trace (here 64 KB of ~0.9 MB ranks, patched down from
4 MB so that the 8 DLRM ranks are cut short): a task that read the driver's copy would decode a
truncated trace and fail. In the cluster test the driver's whole-object copy refuses traces, and
the workers have a ``TMPDIR`` of their own.
The reference is a local ingest of the same files; top-kernels, breakdown and advise must print
the same JSON from both databases.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES, catalog_rows, invoke, shared_or_skip, tar_ranks
from trace_report import inputs, storage
from trace_report.errors import InputError
from trace_report.ingest.decoding import Job, run_job
from trace_report.ingest.engine import ThreadEngine
from trace_report.ingest.pipeline import ingest_to_database
from trace_report.staging import identity_of
from trace_report.store.pieces import ParquetStore

Upload = Callable[[Path, str], str]
DLRM = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
COMMANDS = (["top-kernels", "--by-rank", "--limit", "1000"], ["breakdown", "--by-rank"], ["advise"])
HEAD = 64 << 10


def _ranks_in_bucket(tmp_path: Path, bucket: str, upload: Upload) -> tuple[Path, str]:
    """The 8 DLRM ranks extracted to ``tmp_path/dlrm`` and uploaded to ``bucket/dlrm/``."""
    shared_or_skip()
    local = tmp_path / "x" / "dlrm_kineto"
    local.mkdir(parents=True)
    with tarfile.open(DLRM) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member) if member.isfile() else None
            if data is not None:
                (local / Path(member.name).name).write_bytes(data.read())
    assert len(list(local.glob("*.json"))) == 8 and all(p.stat().st_size > 4 * HEAD for p in local.glob("*.json"))
    return local, upload(local, f"{bucket}/dlrm") + "/"


def _json(args: list[object]) -> Any:
    result = invoke([*args, "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _same_analyses(local_db: Path, remote_db: Path) -> None:
    for command in COMMANDS:
        assert _json([command[0], remote_db, *command[1:]]) == _json([command[0], local_db, *command[1:]]), command


def _kernels(db: Path) -> int:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT sum(n_kernels) FROM traces").fetchone()[0]
    finally:
        con.close()


class UrlThreads(ThreadEngine):
    """Threads that read object storage themselves, as Ray tasks do; remembers the jobs' kinds."""

    reads_urls = True

    def __init__(self) -> None:
        super().__init__(2)
        self.kinds: list[str] = []

    def submit(self, fn: Any, /, *args: Any) -> Any:
        self.kinds.append(args[0].kind)
        return super().submit(fn, *args)


# ---------------------------------------------------------------- default run: no Ray


def test_url_jobs_read_the_objects_and_match_a_local_ingest(tmp_path: Path, bucket: str, upload: Upload,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    local, url = _ranks_in_bucket(tmp_path, bucket, upload)
    local_db, remote_db = tmp_path / "local.duckdb", tmp_path / "remote.duckdb"
    assert invoke(["ingest", local, "-o", local_db]).exit_code == 0
    monkeypatch.setattr(inputs, "HEAD_BYTES", HEAD)
    engine = UrlThreads()
    summary = ingest_to_database([url], remote_db, engine=engine)
    assert engine.kinds == ["url"] * 8 and len(summary.ingested) == 8
    assert {label for _, label in summary.ingested} == {storage.join(url, p.name) for p in local.glob("*.json")}
    ranks = tar_ranks(DLRM)  # independent: the kernels of the JSON, counted in plain Python
    assert _kernels(remote_db) == sum(1 for evs in ranks.values() for e in evs if e.get("cat") == "kernel")
    _same_analyses(local_db, remote_db)
    again = UrlThreads()  # unchanged objects are skipped by their size and time, not read again
    summary = ingest_to_database([url], remote_db, engine=again)
    assert again.kinds == [] and not summary.ingested
    assert [why for _, why in summary.skipped] == ["already ingested"] * 8


def test_a_url_job_refuses_an_object_uploaded_again(tmp_path: Path, bucket: str, upload: Upload) -> None:
    local, url = _ranks_in_bucket(tmp_path, bucket, upload)
    name = sorted(p.name for p in local.glob("*.json"))[0]
    found = identity_of(storage.stat(storage.join(url, name)))
    store = ParquetStore(tmp_path / "x.duckdb")
    job = Job("url", 1, 0, name, url=storage.join(url, name), identity=(*found[:2], found[2] + 1, found[3]),
              store=store.sibling())
    with pytest.raises(InputError, match="changed since the ingest found it"):
        run_job(job)
    assert not store.folder.exists()  # nothing written beside the database


# ---------------------------------------------------------------- a 3-node Ray cluster


@pytest.fixture
def ray_cluster(s3_server: object, tmp_path: Path) -> Iterator[Any]:
    """A 3-node local Ray cluster (one CPU each; the nodes inherit the S3 endpoint and keys from
    this process's environment) with this process connected as its driver, the workers' TMPDIR
    a folder of their own."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        pytest.skip("a Ray runtime is already up in this process")
    cluster = _started_cluster(Cluster)
    try:
        (tmp_path / "worker-tmp").mkdir()
        ray.init(address=cluster.address, logging_level="warning", log_to_driver=False,
                 runtime_env={"env_vars": {"TMPDIR": str(tmp_path / "worker-tmp")}})
        yield ray
    finally:
        ray.shutdown()
        cluster.shutdown()


def _started_cluster(cluster_class: Any, tries: int = 3) -> Any:
    """A head and two worker nodes of one CPU each. A raylet whose dashboard agent takes more than
    Ray's fixed wait to start (a loaded machine) exits; its node is started again."""
    for attempt in range(tries):
        cluster = cluster_class(initialize_head=False)
        try:
            cluster.add_node(num_cpus=1, include_dashboard=False)
            for _ in range(2):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            return cluster
        except Exception:
            cluster.shutdown()
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


@pytest.mark.slow
def test_ray_cluster_ingest_of_a_bucket_matches_local(tmp_path: Path, bucket: str, upload: Upload,
                                                      ray_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    local, url = _ranks_in_bucket(tmp_path, bucket, upload)
    local_db, remote_db = tmp_path / "local.duckdb", tmp_path / "remote.duckdb"
    assert invoke(["ingest", local, "-o", local_db]).exit_code == 0
    monkeypatch.setattr(inputs, "HEAD_BYTES", HEAD)
    whole_copy = storage.download

    def no_trace_copies(loc: str, dest: Path) -> storage.ObjectInfo:  # the driver copies heads only
        assert not str(loc).endswith(".json"), f"the driver copied {loc} whole"
        return whole_copy(loc, dest)

    monkeypatch.setattr(storage, "download", no_trace_copies)  # this process only: not the workers
    assert len(ray_cluster.nodes()) == 3
    result = invoke(["ingest", url, "-o", remote_db, "--engine", "ray"])
    assert result.exit_code == 0, result.stderr
    assert "8 trace(s) ingested" in result.stderr
    _same_analyses(local_db, remote_db)
    assert list((tmp_path / "worker-tmp").iterdir()) == []  # the tasks' copies are gone with them


@pytest.mark.slow
def test_ray_cluster_tasks_write_pieces_to_the_bucket(tmp_path: Path, bucket: str, upload: Upload,
                                                       ray_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--pieces s3://...``: each task writes its pieces to the bucket itself, from objects (``url``
    jobs) and from files on a shared path (``file`` jobs); the driver receives none of their bytes."""
    local, url = _ranks_in_bucket(tmp_path, bucket, upload)
    local_db = tmp_path / "local.duckdb"
    assert invoke(["ingest", local, "-o", local_db]).exit_code == 0

    def no_puts(self: ParquetStore, name: str, data: bytes) -> None:
        raise AssertionError(f"the driver received the bytes of {name}")

    monkeypatch.setattr(ParquetStore, "put", no_puts)
    for source, name in ((url, "objects"), (local, "files")):
        db, prefix = tmp_path / f"{name}.duckdb", f"{bucket}/{name}.events"
        result = invoke(["ingest", source, "-o", db, "--engine", "ray", "--pieces", prefix])
        assert result.exit_code == 0, result.stderr
        listed = {f for (f,) in catalog_rows(db, "SELECT file FROM event_files")}
        in_bucket = {storage.name_of(o.location) for o in storage.list_prefix(prefix)}
        assert in_bucket == listed | {"_trace_report_pieces.json"}
        _same_analyses(local_db, db)


