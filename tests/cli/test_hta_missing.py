"""HTA is the [hta] extra: without it `trace-report hta` is one Error line with the install command."""

from __future__ import annotations

import sys

from conftest import REPO, invoke


def test_hta_command_without_hta_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "hta", None)  # import hta... raises ImportError
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", None)
    out = invoke(["hta", "temporal", REPO / "traces" / "h100-2026-11-25" / "baseline"])
    assert out.exit_code == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("Error:") and "pip install" in lines[-1] and "[hta]" in lines[-1]
    assert "Traceback" not in out.output
