"""Event pieces in object storage: ``ingest -o DB --pieces s3://bucket/prefix/``.

The reference is the same ingest with its pieces beside the database: top-kernels, breakdown and
advise must print the same bytes from both; the kernels counted in plain Python over the JSON are
the independent check of what the bucket holds.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import KERNEL_CATS, TRACES, catalog_rows, events_of, invoke, shared_or_skip, tar_ranks
from trace_report import storage
from trace_report.ingest import catalog
from trace_report.ingest.engine import ThreadEngine
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.store.layout import PIECE_NAME
from trace_report.store.pieces import ParquetStore
from trace_report.store.remote_pieces import MARKER

DLRM = TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz"
GZ = TRACES / "tracelens_h100_falconsai_vit"
PLAIN = TRACES / "kineto_gpu_metrics_input"
COMMANDS = (["top-kernels", "--by-rank", "--limit", "1000"], ["breakdown", "--by-rank"], ["advise"])


def _listed(db: Path) -> set[str]:
    return {f for (f,) in catalog_rows(db, "SELECT file FROM event_files")}


def _in_bucket(prefix: str) -> set[str]:
    return {storage.name_of(o.location) for o in storage.list_prefix(prefix)}


def _ok(args: list[object]) -> str:
    result = invoke(args)
    assert result.exit_code == 0, result.output
    return result.stderr


def _error(args: list[object]) -> str:
    result = invoke(args)
    assert result.exit_code != 0, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "Traceback" not in result.output
    return last


def _same_analyses(local_db: Path, remote_db: Path, commands: tuple[list[str], ...] = COMMANDS) -> None:
    for command in commands:
        here = invoke([command[0], local_db, *command[1:], "-f", "json"])
        there = invoke([command[0], remote_db, *command[1:], "-f", "json"])
        assert here.exit_code == 0 and there.exit_code == 0, there.output
        assert there.stdout == here.stdout, command


def _dlrm_kernels() -> int:
    return sum(1 for events in tar_ranks(DLRM).values() for e in events if e.get("cat") == "kernel")


@pytest.fixture
def dlrm_files(tmp_path: Path) -> Path:
    """The 8 DLRM ranks extracted to a folder."""
    shared_or_skip()
    out = tmp_path / "dlrm"
    out.mkdir()
    with tarfile.open(DLRM) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member) if member.isfile() else None
            if data is not None and member.name.endswith(".json"):
                (out / Path(member.name).name).write_bytes(data.read())
    return out


def test_remote_pieces_read_as_local_pieces(tmp_path: Path, bucket: str) -> None:
    shared_or_skip()
    prefix = f"{bucket}/runs.duckdb.events"
    local_db, remote_db = tmp_path / "local.duckdb", tmp_path / "remote.duckdb"
    _ok(["ingest", DLRM, "-o", local_db])
    _ok(["ingest", DLRM, "-o", remote_db, "--pieces", prefix + "/"])
    assert not (tmp_path / "remote.duckdb.events").exists()  # nothing beside the catalog
    pieces = _listed(remote_db)
    assert pieces and all(PIECE_NAME.fullmatch(p) for p in pieces)
    assert _in_bucket(prefix) == pieces | {MARKER}
    assert catalog_rows(remote_db, "SELECT sum(n_kernels) FROM traces")[0][0] == _dlrm_kernels()
    _same_analyses(local_db, remote_db)


def test_later_ingests_use_the_recorded_prefix_and_replace_pieces(tmp_path: Path, bucket: str) -> None:
    shared_or_skip()
    prefix = f"{bucket}/p/db.events"
    db = tmp_path / "db.duckdb"
    _ok(["ingest", GZ, "-o", db, "--pieces", prefix])
    first = _listed(db)
    _ok(["ingest", PLAIN, "-o", db])  # no --pieces: the database's own prefix
    assert len(catalog_rows(db, "SELECT * FROM traces")) == 2
    assert _in_bucket(prefix) == _listed(db) | {MARKER} and first < _listed(db)
    _ok(["ingest", GZ, "-o", db, "--pieces", prefix, "--force"])  # the old pieces of trace 1 go
    assert not first & _listed(db)
    assert _in_bucket(prefix) == _listed(db) | {MARKER}
    reference = tmp_path / "ref.duckdb"  # the same three ingests, pieces beside it
    for args in ([GZ], [PLAIN], [GZ, "--force"]):
        _ok(["ingest", *args, "-o", reference])
    for command in (["top-kernels"], ["breakdown"]):
        assert invoke([*command, db, "-f", "json"]).stdout == invoke([*command, reference, "-f", "json"]).stdout


def test_pieces_refusals(tmp_path: Path, bucket: str) -> None:
    shared_or_skip()
    local_db = tmp_path / "local.duckdb"
    _ok(["ingest", PLAIN, "-o", local_db])
    assert "--pieces cannot move them" in _error(["ingest", GZ, "-o", local_db, "--pieces", f"{bucket}/x"])
    remote_db = tmp_path / "remote.duckdb"
    _ok(["ingest", PLAIN, "-o", remote_db, "--pieces", f"{bucket}/a"])
    assert "not s3://" in _error(["ingest", GZ, "-o", remote_db, "--pieces", f"{bucket}/b"])
    assert "an empty prefix of its own" in _error(["ingest", GZ, "-o", tmp_path / "other.duckdb",
                                                   "--pieces", f"{bucket}/a"])
    storage.write_bytes(f"{bucket}/c/notes.txt", b"mine")
    assert "holds other objects" in _error(["ingest", GZ, "-o", tmp_path / "c.duckdb", "--pieces", f"{bucket}/c"])
    assert "not the bucket itself" in _error(["ingest", GZ, "-o", tmp_path / "d.duckdb", "--pieces", bucket])
    assert "takes an s3://" in _error(["ingest", GZ, "-o", tmp_path / "e.duckdb", "--pieces", tmp_path / "pieces"])
    assert "takes no ?options" in _error(["ingest", GZ, "-o", tmp_path / "f.duckdb", "--pieces",
                                          f"{bucket}/f?endpoint_override=elsewhere:9000"])
    assert not (tmp_path / "c.duckdb").exists() and storage.stat(f"{bucket}/c/notes.txt").size == 4
    storage.write_bytes(f"{bucket}/a/{MARKER}", json.dumps({"id": "someone-else"}).encode())
    assert "does not name" in _error(["ingest", GZ, "-o", remote_db])
    with duckdb.connect(str(remote_db)) as con:  # a database changed to send its pieces elsewhere
        con.execute("UPDATE trace_report_info SET value = value || '?endpoint_override=elsewhere:9000' "
                    "WHERE key = 'pieces'")
    assert "no object-store prefix" in _error(["top-kernels", remote_db])


def test_an_interrupted_ingest_leaves_the_bucket_as_it_was(tmp_path: Path, bucket: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    prefix, db = f"{bucket}/db.events", tmp_path / "db.duckdb"
    _ok(["ingest", PLAIN, "-o", db, "--pieces", prefix])
    before, listed = _in_bucket(prefix), _listed(db)
    written: list[str] = []
    path_for = ParquetStore.path_for

    def recording(self: ParquetStore, trace_id: int, piece: int) -> Any:
        written.append(str(path := path_for(self, trace_id, piece)))
        return path

    def interrupted(self: catalog.Catalog) -> None:
        assert written and all(storage.stat(p).size for p in written)  # the new pieces are in the bucket
        raise KeyboardInterrupt

    monkeypatch.setattr(ParquetStore, "path_for", recording)
    monkeypatch.setattr(catalog.Catalog, "flush", interrupted)
    result = invoke(["ingest", GZ, "-o", db])
    assert result.exit_code == 130, result.output
    assert _in_bucket(prefix) == before and _listed(db) == listed
    monkeypatch.undo()
    # a killed ingest's pieces (no rollback ran): removed by the next ingest, with a note
    orphan = f"{prefix}/t000009-0123abcd-p00000.parquet"
    storage.write_bytes(orphan, b"PAR1")
    note = _ok(["ingest", GZ, "-o", db])
    assert "removed 1 orphan event piece(s)" in note
    assert _in_bucket(prefix) == _listed(db) | {MARKER}


def test_a_first_ingest_killed_before_its_catalog_is_cleaned_up(tmp_path: Path, bucket: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    prefix, db = f"{bucket}/new.events", tmp_path / "new.duckdb"
    monkeypatch.setattr(ParquetStore, "rollback", lambda self: None)  # as if killed: nothing removed
    monkeypatch.setattr(catalog.Catalog, "flush", lambda self: (_ for _ in ()).throw(KeyboardInterrupt))
    assert invoke(["ingest", PLAIN, "-o", db, "--pieces", prefix]).exit_code == 130
    assert not db.exists() and len(_in_bucket(prefix)) > 1
    monkeypatch.undo()
    assert "orphan event piece" in _ok(["ingest", PLAIN, "-o", db, "--pieces", prefix])
    assert _in_bucket(prefix) == _listed(db) | {MARKER}


def test_sql_reads_exactly_the_pieces_prefix(tmp_path: Path, bucket: str) -> None:
    shared_or_skip()
    prefix, db = f"{bucket}/db.events", tmp_path / "db.duckdb"
    _ok(["ingest", PLAIN, "-o", db, "--pieces", prefix])
    events = events_of(json.loads(next(PLAIN.glob("*.json")).read_text()))
    kernels = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS)
    out = invoke(["sql", db, "SELECT count(*) AS n FROM events WHERE cat = 'kernel'", "-f", "json"])
    assert out.exit_code == 0 and json.loads(out.stdout)[0]["n"] == kernels
    piece = storage.join(prefix, sorted(_listed(db))[0])
    direct = invoke(["sql", db, f"SELECT count(*) AS n FROM read_parquet('{piece}')", "-f", "json"])
    assert direct.exit_code == 0, direct.output
    storage.write_parquet(__import__("pyarrow").table({"x": [1]}), f"{prefix}-other/x.parquet")
    storage.write_parquet(__import__("pyarrow").table({"x": [1]}), f"{bucket}/secret.parquet")
    (tmp_path / "local.parquet").write_bytes(b"")
    for target in (f"{prefix}-other/x.parquet", f"{bucket}/secret.parquet", tmp_path / "local.parquet",
                   f"{prefix}/../secret.parquet"):
        refused = invoke(["sql", db, f"SELECT * FROM read_parquet('{target}')"])
        assert refused.exit_code == 1 and "Permission Error" in refused.stderr, target


def test_missing_and_damaged_pieces_are_one_error_line(tmp_path: Path, bucket: str) -> None:
    shared_or_skip()
    prefix, db = f"{bucket}/db.events", tmp_path / "db.duckdb"
    _ok(["ingest", DLRM, "-o", db, "--pieces", prefix])
    names = sorted(_listed(db))
    storage.write_bytes(storage.join(prefix, names[-1]), b"not parquet at all")
    assert f"event piece {names[-1]} is damaged" in _error(["top-kernels", db])
    storage.delete(storage.join(prefix, names[0]))
    assert "1 event piece(s) are missing" in _error(["top-kernels", db])


class UrlThreads(ThreadEngine):
    """Threads that read object storage themselves, as Ray tasks do."""

    reads_urls = True


@pytest.fixture
def no_driver_puts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refused(self: ParquetStore, name: str, data: bytes) -> None:
        raise AssertionError(f"the driver wrote {name}: the job should have")

    monkeypatch.setattr(ParquetStore, "put", refused)
    yield


@pytest.mark.parametrize("source", ["files", "objects"])
def test_jobs_write_their_pieces_to_the_bucket(source: str, tmp_path: Path, bucket: str, dlrm_files: Path,
                                               upload: Any, no_driver_puts: None) -> None:
    local_db, remote_db = tmp_path / "local.duckdb", tmp_path / "remote.duckdb"
    _ok(["ingest", dlrm_files, "-o", local_db])
    inputs: list[Any] = [dlrm_files] if source == "files" else [upload(dlrm_files, f"{bucket}/in") + "/"]
    engine = ThreadEngine(2) if source == "files" else UrlThreads(2)
    summary = ingest_to_database(inputs, remote_db, IngestOptions(pieces=f"{bucket}/db.events"), engine=engine)
    assert len(summary.ingested) == 8
    assert _in_bucket(f"{bucket}/db.events") == _listed(remote_db) | {MARKER}
    assert catalog_rows(remote_db, "SELECT sum(n_kernels) FROM traces")[0][0] == _dlrm_kernels()
    _same_analyses(local_db, remote_db, COMMANDS[:1])


def test_partitions_and_per_trace_reads_use_the_remote_pieces(tmp_path: Path, bucket: str) -> None:
    """What the Ray aggregations hand to a task (a partition's piece URLs, opened in a database of
    its own) and the per-trace reads of the critical path read the bucket as they read a folder."""
    import trace_report as tr
    from trace_report.store.partitions import event_partitions, open_partition

    shared_or_skip()
    prefix, db, local = f"{bucket}/db.events", tmp_path / "db.duckdb", tmp_path / "local.duckdb"
    _ok(["ingest", GZ, PLAIN, "-o", db, "--pieces", prefix])
    _ok(["ingest", GZ, PLAIN, "-o", local])
    with tr.open(db) as opened:
        parts = event_partitions(opened)
        listed = [catalog_rows(db, f"SELECT * FROM event_files WHERE trace_id = {t}") for t in (1, 2)]
        assert [len(p.files) for p in parts] == [len(rows) for rows in listed]
        assert all(f.startswith(prefix + "/") for p in parts for f in p.files)
        whole = opened.sql("SELECT trace_id, count(*), sum(dur_us) FROM events GROUP BY 1 ORDER BY 1").fetchall()
    per_part = []
    for part in parts:
        with open_partition(part) as one:
            per_part += one.sql("SELECT trace_id, count(*), sum(dur_us) FROM events GROUP BY 1").fetchall()
    assert per_part == whole
    for command in (["critical-path"], ["ops"]):
        there, here = invoke([*command, db, "-f", "json"]), invoke([*command, local, "-f", "json"])
        assert there.exit_code == 0 and there.stdout == here.stdout, there.output
    _ok(["export", db, "-o", tmp_path / "from-remote"])
    _ok(["export", local, "-o", tmp_path / "from-local"])
    assert invoke(["top-kernels", tmp_path / "from-remote", "-f", "json"]).stdout == \
        invoke(["top-kernels", tmp_path / "from-local", "-f", "json"]).stdout
