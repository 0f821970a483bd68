"""docs/analysis.md's verdict table: the engineers' readings are well-formed and the table is what
``advise`` says today (docs/verdicts.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _verdicts():
    spec = importlib.util.spec_from_file_location("verdicts", REPO / "docs" / "verdicts.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_expected_finding_is_one_advise_can_give():
    v = _verdicts()
    sources = "".join(p.read_text(encoding="utf-8")
                      for p in (REPO / "trace_report" / "analyses" / "advise").rglob("*.py"))
    rows = v.experts()
    assert len({r.trace for r in rows}) == len(rows) >= 20
    for r in rows:
        assert r.verdict.strip(), r.trace
        for finding in r.first.split("|"):
            assert finding == "none" or f'"{finding}"' in sources, (r.trace, finding)


def test_agreement_counts_alternatives():
    v = _verdicts()
    e = v.Expert("x", "launch_bound|cpu_bound", "reading")
    assert e.agrees("cpu_bound") and e.agrees("launch_bound") and not e.agrees("host_sync")
    text = v.section([(e, "cpu_bound", "verdict"), (v.Expert("y", "none", "r"), "host_sync", "v")])
    assert "agrees with the engineer's on 1 of 2 traces" in text and "**no**" in text


@pytest.mark.slow
def test_table_is_current(shared):
    assert _verdicts().main(["--check"]) == 0
