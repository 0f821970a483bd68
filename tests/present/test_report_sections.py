"""The report's step-time-per-rank, operators and memory sections, shown only when
their data is there, with the numbers of a plain pass over the JSON and of the commands; and the
kernel-class chart of an experiment with one bar per run, never the runs summed (item 3)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil

import pytest
from conftest import GPU_OP_CATS, TRACES, captured_runs, events_of, invoke, load_json, tar_ranks, trace_file

import trace_report as tr
from trace_report.api import open as open_runs
from trace_report.present.report import build_report, render_html, trace_runs
from trace_report.present.report.sections.memory import memory_section
from trace_report.present.report.sections.ops import ops_section
from trace_report.present.report.sections.stragglers import stragglers_section


def _plain(body: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_stragglers_section_on_eight_ranks_only(shared):
    """DLRM, 8 ranks of one step: each rank's step time is its ProfilerStep's dur; the slowest rank
    is named in the lead. One rank (the A100 trace): no section."""
    ranks = tar_ranks(TRACES / "param_dlrm_kineto_v100x8" / "dlrm_kineto.tar.gz")
    durs = {r: next(float(e["dur"]) for e in evs if e["name"].startswith("ProfilerStep#")) for r, evs in ranks.items()}
    with tr.open(TRACES / "param_dlrm_kineto_v100x8") as db:
        sec = stragglers_section(db, None)
        assert stragglers_section(db, 3) is None  # one rank chosen: nothing to compare in the page
    rows = re.findall(r"<tr>(<td.*?)</tr>", sec.body, re.S)
    cells = [[_plain(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]
    assert {int(c[1]): float(c[2].replace(",", "")) for c in cells} == durs  # rank -> step_us
    slowest = max(durs, key=durs.get)
    assert f"slowest rank {slowest}" in _plain(sec.body) and len(cells) == 8
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        assert stragglers_section(db, None) is None


def test_operators_section_is_the_ops_command(shared):
    """H100 BERT (shapes recorded): the section's rows are ``trace-report ops``' first rows, FLOP
    and TFLOP/s included; a trace without GPU time has no operators section."""
    path = trace_file("tracelens_h100_bert_small")
    res = invoke(["ops", path, "-f", "json", "--limit", "15"])
    assert res.exit_code == 0, res.stderr
    want = json.loads(res.stdout)
    with tr.open(path) as db:
        sec = ops_section(db, None)
    rows = re.findall(r"<tr>(<td.*?)</tr>", sec.body, re.S)
    cells = [[_plain(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]
    assert [c[0] for c in cells] == [w["name"] for w in want]
    addmm = next(c for c in cells if c[0] == "aten::addmm")
    ref = next(w for w in want if w["name"] == "aten::addmm")
    assert float(addmm[4].replace(",", "")) == pytest.approx(ref["gpu_us"], abs=5e-4)
    assert addmm[5] == f"{ref['flop'] / 1e9:.3g} GFLOP" and addmm[6] == f"{ref['tflop_per_s']:,.2f}"
    with tr.open(trace_file("hta_cpu_only")) as db:
        assert ops_section(db, None) is None


def test_memory_section_peak_and_chart(shared):
    """H100 BERT: the lead's peak is the largest Total Allocated of the step (plain pass over the
    JSON, with the level the step starts at); the chart has allocated and reserved lines. The
    A100 trace has no [memory] events: no section."""
    path = trace_file("tracelens_h100_bert_small")
    evs = events_of(load_json(path))
    step = next(e for e in evs if e.get("name", "").startswith("ProfilerStep#"))
    s0, s1 = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    cuda = sorted((e for e in evs if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                  key=lambda e: float(e["ts"]))
    level = [e for e in cuda if float(e["ts"]) < s0][-1:]
    peak = max(e["args"]["Total Allocated"] for e in level + [e for e in cuda if s0 <= float(e["ts"]) < s1])
    with tr.open(path) as db:
        sec = memory_section(db, None, {})
    text = _plain(sec.body)
    assert f"cuda:0: peak allocated {peak / 2**20:,.1f} MiB" in text and f"{peak:,}" in text
    chart = dict(sec.charts)["memory"].to_dict()
    series = {r["series"] for r in next(iter(chart["datasets"].values()))}
    assert series == {"allocated", "reserved"}
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        assert memory_section(db, None, {}) is None


def _gpu_experiment(root, tmp_path):
    """An experiment folder of two runs from the captured ``amp`` experiment (their run.json),
    each holding one real GPU trace: an A100 training step and an H100 BERT inference."""
    exp = tmp_path / "amp"
    exp.mkdir()
    shutil.copy(root / "amp" / "run.json", exp / "run.json")
    traces = {"fp32-bs2": TRACES / "hta_a100_ddp_nccl" / "nccl_data.json.gz",
              "amp-bf16-bs2": trace_file("tracelens_h100_bert_small")}
    for run, trace in traces.items():
        (exp / run).mkdir()
        shutil.copy(root / "amp" / run / "run.json", exp / run / "run.json")
        os.symlink(trace, exp / run / trace.name)
    return exp, {f"amp/{run}": trace for run, trace in traces.items()}


def test_experiment_kernel_classes_one_bar_per_run(shared, tmp_path_factory, tmp_path):
    """Each run's bars are shares of that run's own GPU time (plain pass: memcpy time / kernels +
    memcpy + memset of its trace), coloured by run; the sum over runs appears nowhere."""
    exp, traces = _gpu_experiment(captured_runs(tmp_path_factory), tmp_path)
    with open_runs([exp]) as db:
        assert set(trace_runs(db.con)) == set(traces)
        report = build_report(db, [str(exp)])
    charts = {name: chart.to_dict() for s in report.sections for name, chart in s.charts}
    spec = charts["kernel-classes"]
    assert spec["encoding"]["color"]["field"] == "run" and spec["encoding"]["yOffset"]["field"] == "run"
    rows = next(iter(spec["datasets"].values()))
    for run, trace in traces.items():
        ops = [e for e in events_of(load_json(trace)) if e.get("ph") == "X" and e.get("cat") in GPU_OP_CATS]
        gpu = sum(float(e["dur"]) for e in ops)
        memcpy = sum(float(e["dur"]) for e in ops if e["cat"] in ("gpu_memcpy", "Memcpy"))
        (row,) = [r for r in rows if r["run"] == run and r["class"] == "memcpy"]
        assert row["gpu_us"] == pytest.approx(gpu) and row["pct_of_gpu_time"] == pytest.approx(100 * memcpy / gpu)
    assert {r["run"] for r in rows} == set(traces)
    table = next(s for s in report.sections if s.title == "Kernel classes")
    assert "<th>run</th>" in table.body and "one colour per run" in render_html(report)
