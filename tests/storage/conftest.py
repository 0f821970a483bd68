"""An S3-compatible server for the object-storage tests: moto's, in this process, on a free port.

``moto[server]`` is in the ``dev`` extra; without it these tests skip. The session fixture sets
``AWS_ENDPOINT_URL`` and dummy keys for the whole session (pyarrow, fsspec and DuckDB's
registered file system all read them); :func:`bucket` gives each test an empty bucket of its own.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_COUNTER = itertools.count()


@dataclass
class S3Server:
    """A running moto server: its endpoint URL and its in-process backend settings."""

    endpoint: str
    settings: object

    def bucket(self) -> str:
        """A new empty bucket's name."""
        import pyarrow.fs as pafs

        name = f"trace-report-{os.getpid()}-{next(_COUNTER)}"
        fs, _ = pafs.FileSystem.from_uri(f"s3://{name}?allow_bucket_creation=true")
        fs.create_dir(name)
        return name


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed (the dev extra)",
                                   exc_type=ImportError)
    from moto import settings

    keys = {"AWS_ENDPOINT_URL": "", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    keys["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield S3Server(keys["AWS_ENDPOINT_URL"], settings)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    """An empty bucket of this test's own, as ``s3://NAME``."""
    return f"s3://{s3_server.bucket()}"


def _upload(local: Path, url: str) -> str:
    from trace_report import storage

    if local.is_dir():
        for p in sorted(local.rglob("*")):
            if p.is_file():
                storage.write_file(storage.join(url, p.relative_to(local).as_posix()), p)
    else:
        storage.write_file(url, local)
    return url


@pytest.fixture
def upload(s3_server: S3Server) -> Callable[[Path, str], str]:
    """``upload(local, url)``: copy a local file, or a folder's files (relative names kept), to
    ``url``; returns ``url``."""
    return _upload


@pytest.fixture
def mirror(tmp_path: Path, bucket: str, upload: Callable[[Path, str], str]) -> Callable[[str], tuple[Path, str]]:
    """``mirror(name)``: the shared folder ``name`` copied to ``tmp_path/name`` and uploaded to
    ``bucket/name``; returns both."""
    from tests.conftest import TRACES, shared_or_skip

    def copy(name: str) -> tuple[Path, str]:
        shared_or_skip()
        local = tmp_path / name
        shutil.copytree(TRACES / name, local)
        return local, upload(local, f"{bucket}/{name}")

    return copy
