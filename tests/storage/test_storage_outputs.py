"""Outputs in object storage: ``export -o s3://...`` (manifest last) and ``report -o s3://...``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TRACES, invoke, shared_or_skip
from trace_report import storage

GZ = "tracelens_h100_falconsai_vit"


def _fetch(url: str, into: Path) -> list[str]:
    """Download every object under ``url`` into ``into``; their relative names."""
    names = []
    for obj in storage.list_prefix(url):
        rel = str(obj.location)[len(url) + 1:]
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        storage.download(obj.location, into / rel)
        names.append(rel)
    return names


def test_export_to_prefix_reads_back_as_the_local_export(tmp_path: Path, bucket: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    trace = TRACES / GZ if shared_or_skip() else None
    written: list[str] = []
    upload = storage.write_file

    def recording(loc: str, source: Path) -> None:
        written.append(storage.name_of(loc))
        upload(loc, source)

    monkeypatch.setattr(storage, "write_file", recording)
    url = f"{bucket}/datasets/vit"
    result = invoke(["export", trace, "-o", url])
    assert result.exit_code == 0, result.output
    assert written[-2:] == ["_SUCCESS", "_trace_report_files.txt"]
    local = invoke(["export", trace, "-o", tmp_path / "local"])
    assert local.exit_code == 0, local.output
    names = _fetch(url, tmp_path / "fetched")
    listed = (tmp_path / "fetched" / "_trace_report_files.txt").read_text().splitlines()
    assert set(names) == set(listed) | {"_trace_report_files.txt"}
    assert listed == (tmp_path / "local" / "_trace_report_files.txt").read_text().splitlines()
    here = invoke(["top-kernels", tmp_path / "local", "-f", "json"])
    there = invoke(["top-kernels", tmp_path / "fetched", "-f", "json"])
    assert here.exit_code == 0 and there.stdout == here.stdout


def test_export_to_prefix_overwrite_rules(bucket: str) -> None:
    trace = TRACES / GZ if shared_or_skip() else None
    url = f"{bucket}/ds"
    assert invoke(["export", trace, "-o", url]).exit_code == 0
    again = invoke(["export", trace, "-o", url])
    assert again.exit_code == 1
    assert again.stderr.splitlines()[-1] == f"Error: {url}: already exists (choose another prefix, or --overwrite)"
    assert invoke(["export", trace, "-o", url, "--overwrite"]).exit_code == 0
    storage.write_bytes(f"{url}/notes.txt", b"mine")
    refused = invoke(["export", trace, "-o", url, "--overwrite"])
    assert refused.exit_code == 1 and "holds other objects" in refused.stderr
    assert storage.stat(f"{url}/notes.txt").size == 4


def test_export_output_may_not_be_the_input_prefix(bucket: str, upload: object) -> None:
    shared_or_skip()
    url = f"{bucket}/{GZ}"
    upload(TRACES / GZ, url)  # type: ignore[operator]
    result = invoke(["export", url, "-o", f"{url}/ds"])
    assert result.exit_code == 2 and "inside the input" in result.stderr


@pytest.mark.slow
def test_report_to_object(bucket: str) -> None:
    trace = TRACES / GZ if shared_or_skip() else None
    url = f"{bucket}/reports/vit.html"
    result = invoke(["report", trace, "-o", url])
    assert result.exit_code == 0, result.output
    with storage.open_stream(url) as fh:
        page = fh.read()
    assert page.lstrip().lower().startswith(b"<!doctype html") and b"sm90" in page


def test_report_to_object_needs_html_suffix(bucket: str) -> None:
    trace = TRACES / GZ if shared_or_skip() else None
    bad = invoke(["report", trace, "-o", f"{bucket}/reports/vit.txt"])
    assert bad.exit_code == 1 and bad.stderr.strip() == (f"Error: {bucket}/reports/vit.txt: the report is an HTML "
                                                         "page: give a URL ending in .html")
    assert storage.list_prefix(bucket) == []
