"""Shown "in the report where it applies": the report's section of the deeper analyses
holds the numbers of the commands themselves (critical path of the median step, launches,
modules), and is left out for traces without GPU work."""

from __future__ import annotations

import html
import re
import shlex

import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr
from trace_report.analyses.critical_path import CriticalPathOptions, critical_path
from trace_report.analyses.launches import LaunchOptions, launches
from trace_report.present.report import build_report
from trace_report.present.report.sections.deeper import deeper_section, median_step

BERT = "tracelens_h100_bert_small"


def _cells(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]


def test_deeper_section_shows_the_commands_numbers() -> None:
    shared_or_skip()
    with tr.open(TRACES / BERT) as db:
        steps = sorted(s for (s,) in db.con.execute("SELECT step FROM steps").fetchall())
        assert median_step(db, None) == steps[len(steps) // 2]
        sec = deeper_section(db, None, None)
        path = critical_path(db, CriticalPathOptions(rank=0, step=steps[len(steps) // 2], top=5))
        names = launches(db, LaunchOptions()).frame
    assert sec is not None and f"Critical path (step {steps[len(steps) // 2]})" in sec.tail
    cells = _cells(sec.tail)
    assert f"{path.frame['path_ms'].iloc[0]:.4g}"[:4] in " ".join(cells)
    assert all(html.escape(str(n)) in sec.tail or str(n)[:20] in sec.tail for n in names["name"].head(3))
    assert "nn.Module tree" in sec.tail  # the BERT trace has nn.Module events


def test_no_section_without_gpu_work() -> None:
    shared_or_skip()
    cpu_only = next((TRACES / "hta_cpu_only").glob("*.json*"), None)
    if cpu_only is None:
        pytest.skip("no CPU-only trace")
    with tr.open(cpu_only) as db:
        assert deeper_section(db, None, None) is None


def test_timeline_names_the_slice_command_that_writes_its_step(tmp_path) -> None:
    """The report's timeline says which `trace-report slice` command writes its
    step for Perfetto; run as written, it gives a trace of that step (re-ingested: that step, and
    the kernels the whole trace runs in it)."""
    shared_or_skip()
    src = str(TRACES / "hta_ns_resolution")
    with tr.open(src) as db:
        report = build_report(db, [src])
        notes = [n for s in report.sections for n in s.notes if "trace-report slice" in n]
        assert len(notes) == 1
        command = shlex.split(notes[0].split(": ", 1)[1])
        step = int(command[command.index("--steps") + 1])
        want = db.scalar("SELECT count(*) FROM kernels k JOIN steps s ON s.trace_id = k.trace_id "
                         "AND k.ts_us >= s.ts_us AND k.ts_us < s.end_us WHERE s.step = $s", {"s": step})
    assert command[:3] == ["trace-report", "slice", src] and command[-2] == "-o"
    out = tmp_path / command[-1]
    done = invoke([*command[1:-1], str(out)])
    assert done.exit_code == 0, done.stderr
    with tr.open(out) as sliced:
        assert [s for (s,) in sliced.con.execute("SELECT step FROM steps").fetchall()] == [step]
        got = sliced.scalar("SELECT count(*) FROM kernels k JOIN steps s ON s.trace_id = k.trace_id "
                            "AND k.ts_us >= s.ts_us AND k.ts_us < s.end_us")
    assert want and got == want
