"""Inputs in object storage: every command on s3:// prints what it prints on the same files locally.

The local run is the reference: the same folder names on both sides, so run labels and rank
file names agree; stderr differs only by the path (the URL is the label of an object).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SHARED, TRACES, events_of, invoke, kernel_stats, load_json, shared_or_skip

Upload = Callable[[Path, str], str]

COMMANDS = (["top-kernels"], ["breakdown"], ["flags"], ["advise"])
GZ = "tracelens_h100_falconsai_vit"
PLAIN = "kineto_gpu_metrics_input"
TAR = "param_dlrm_kineto_v100x8"


Mirror = Callable[[str], tuple[Path, str]]
"""The ``mirror`` fixture (tests/storage/conftest.py)."""


KEY_ID, SECRET = "TRTESTKEYID0000000", "trtest-secret/not-a-real-key"
"""Made-up credentials: moto refuses them once authentication is on; no output may show them."""
SECRET_PART = SECRET.split("/")[0]

def _same_output(command: list[str], local: Path | str, url: str) -> None:
    here = invoke([*command, local, "-f", "json"])
    there = invoke([*command, url, "-f", "json"])
    assert here.exit_code == 0, here.output
    assert there.exit_code == 0, there.output
    assert there.stdout == here.stdout
    assert there.stderr.replace(url.rstrip("/"), "X") == here.stderr.replace(str(local), "X")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_prefix_of_gzip_trace_same_as_local(command: list[str], mirror: Mirror) -> None:
    local, url = mirror(GZ)
    _same_output(command, local, url + "/")


def test_plain_object_same_as_local(mirror: Mirror) -> None:
    local, url = mirror(PLAIN)
    name = "gpu_metrics_input.json"
    _same_output(["top-kernels"], local / name, f"{url}/{name}")


def test_tar_of_ranks_same_as_local(mirror: Mirror) -> None:
    local, url = mirror(TAR)
    _same_output(["top-kernels", "--by-rank"], local / "dlrm_kineto.tar.gz", f"{url}/dlrm_kineto.tar.gz")


def test_ncu_report_object_same_as_local(tmp_path: Path, bucket: str, upload: Upload) -> None:
    """roofline on an Nsight Compute report in a bucket (its kind is known once it is copied)."""
    report = SHARED / "data" / "ncu" / "indexspaces_ncu_a40_frb" / "profile.ncu-rep" if shared_or_skip() else None
    pytest.importorskip("ncu_report")
    local = tmp_path / "profile.ncu-rep"
    shutil.copyfile(report, local)
    _same_output(["roofline"], local, upload(local, f"{bucket}/ncu/profile.ncu-rep"))


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: c[0])
def test_tar_every_command_same_as_local(command: list[str], mirror: Mirror) -> None:
    local, url = mirror(TAR)
    _same_output(command, local / "dlrm_kineto.tar.gz", f"{url}/dlrm_kineto.tar.gz")


def test_open_reads_objects(mirror: Mirror) -> None:
    """``trace_report.open`` on a URL: the kernels of a plain pass over the JSON, labelled by URL."""
    import trace_report as tr

    local, url = mirror(GZ)
    trace = next(local.iterdir())
    count, _ = kernel_stats([e for e in events_of(load_json(trace)) if e.get("ph") == "X"])
    with tr.open(url) as db:
        rows = db.sql("SELECT path, n_kernels FROM traces").fetchall()
    assert rows == [(f"{url}/{trace.name}", count)]


def _ingest(url: str, db: Path, *more: str) -> tuple[int, str]:
    result = invoke(["ingest", url, "-o", db, *more])
    return result.exit_code, result.output


def test_ingest_skips_unchanged_objects_and_replaces_changed(tmp_path: Path, mirror: Mirror) -> None:
    import duckdb

    from trace_report import storage

    local, url = mirror(GZ)
    db = tmp_path / "runs.duckdb"
    code, out = _ingest(url, db)
    assert code == 0, out
    key = f"{url}/{next(local.iterdir()).name}"
    code, out = _ingest(url, db)
    assert code == 0 and "already ingested" in out, out
    raw = (TRACES / PLAIN / "gpu_metrics_input.json").read_bytes()
    storage.write_bytes(key, __import__("gzip").compress(raw))  # a new upload under the same key
    code, out = _ingest(url, db)
    assert code == 0 and "replaced trace 1" in out, out
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT path, file_bytes FROM traces").fetchall()
    assert rows == [(key, storage.stat(key).size)]


def test_object_changed_during_ingest_is_not_stored(tmp_path: Path, mirror: Mirror,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from trace_report import staging, storage

    local, url = mirror(GZ)
    copy = staging.Stager._copy

    def copy_then_overwrite(self: staging.Stager, loc: str, dest: Path) -> staging.Staged:
        staged = copy(self, loc, dest)
        storage.write_bytes(loc, storage.read_bytes(loc) + b"\n")  # someone uploads a new version meanwhile
        return staged

    monkeypatch.setattr(staging.Stager, "_copy", copy_then_overwrite)
    db = tmp_path / "runs.duckdb"
    code, out = _ingest(url, db)
    assert code == 1 and "changed while it was read" in out and url in out, out
    assert out.count("Error:") == 1 and "Traceback" not in out


def test_missing_bucket_and_object(bucket: str) -> None:
    result = invoke(["top-kernels", "s3://trace-report-no-such-bucket/run-42/"])
    assert result.exit_code == 1
    assert result.stderr.strip() == "Error: s3://trace-report-no-such-bucket/run-42/: no such bucket"
    result = invoke(["top-kernels", f"{bucket}/run-42/"])
    assert result.stderr.strip() == f"Error: {bucket}/run-42/: no such object or prefix"


def test_access_denied_names_no_key(mirror: Mirror, s3_server: object,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With authentication on, moto refuses the test's keys: one line, the URL, no key."""
    _, url = mirror(GZ)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setattr(s3_server.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # type: ignore[attr-defined]
    result = invoke(["top-kernels", url])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {url}: access denied") and result.stderr.count("\n") == 1
    assert KEY_ID not in result.output and SECRET_PART not in result.output


def test_endpoint_down(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    result = invoke(["top-kernels", f"{bucket}/run-42/"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {bucket}/run-42/: cannot reach the storage endpoint "
                                     f"(http://127.0.0.1:{port})")


def test_url_with_credentials_refused() -> None:
    result = invoke(["top-kernels", f"s3://{KEY_ID}:{SECRET_PART}@bkt/run-42/"])
    assert result.exit_code == 1 and "may not hold credentials" in result.stderr
    assert KEY_ID not in result.output and SECRET_PART not in result.output


def test_prefix_copies_only_what_may_be_an_input(tmp_path: Path, mirror: Mirror,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint beside the traces is listed as skipped, never downloaded."""
    import zipfile

    from trace_report import staging, storage

    local, url = mirror(GZ)
    with zipfile.ZipFile(tmp_path / "model.pt", "w") as zf:  # torch.save's format
        zf.writestr("archive/data.pkl", b"\0" * 4096)
    storage.write_file(f"{url}/checkpoints/model.pt", tmp_path / "model.pt")
    fetched: list[str] = []
    read_range = storage.read_range

    def logged(loc: str, start: int, length: int) -> bytes:
        fetched.append(loc) if length > staging.SNIFF_BYTES else None
        return read_range(loc, start, length)

    monkeypatch.setattr(staging.storage, "download", lambda loc, dest: pytest.fail(f"{loc} copied whole"))
    monkeypatch.setattr(staging.storage, "read_range", logged)
    result = invoke(["ingest", url, "-o", tmp_path / "runs.duckdb"])
    assert result.exit_code == 0, result.output
    assert f"skipped: {url}/checkpoints/model.pt (not a trace, archive or Nsight export" in result.stderr
    assert fetched == [f"{url}/{p.name}" for p in local.iterdir()]  # a small trace: read in one request
