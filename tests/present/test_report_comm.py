"""The report's communication section: present with NCCL kernels, its numbers are the commands'."""

from __future__ import annotations

import html

import trace_report as tr
from tests.conftest import TRACES, shared_or_skip
from trace_report.analyses.overlap import overlap
from trace_report.present.report import Section, build_report, render_html, table_html
from trace_report.present.report.sections.comm import comm_section


def test_comm_section_on_ddp_trace_and_absent_without_nccl():
    shared_or_skip()
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        report = build_report(db, ["hta_a100_ddp_nccl"])
        pct = overlap(db).frame.loc[0, "comp_comm_overlap_pct"]
    titles = [s.title for s in report.sections]
    assert "Communication" in titles
    page = render_html(report)
    assert f"{pct:.1f}% of communication time runs while computation kernels run" in html.unescape(page)
    assert "allreduce" in page and "busbw_gbps" in page.replace("<wbr>", "")  # headers wrap at "_"
    with tr.open(TRACES / "tracelens_h100_bert_small") as db:
        assert comm_section(db, None, Section, table_html) is None
