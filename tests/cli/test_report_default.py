"""`report` without -o writes <first input's name>-report.html in the current folder and says so."""

from __future__ import annotations

from conftest import REPO, invoke

from trace_report.cli.report import default_report_path


def test_default_names():
    assert default_report_path(REPO / "traces" / "run-42").name == "run-42-report.html"
    assert default_report_path(REPO / "rank0.pt.trace.json.gz").name == "rank0-report.html"
    assert default_report_path(REPO / "dlrm_kineto.tar.gz").name == "dlrm_kineto-report.html"
    assert default_report_path(REPO / "runs.duckdb").name == "runs-report.html"


def test_report_without_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = invoke(["report", REPO / "traces" / "h100-2026-11-25" / "baseline"])
    assert out.exit_code == 0, out.output
    page = tmp_path / "baseline-report.html"
    assert page.is_file() and str(page) in out.stderr
