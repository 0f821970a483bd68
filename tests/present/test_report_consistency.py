"""No number on the report page contradicts another: the headline GPU
utilisation and biggest finding, the advice's GPU-busy figures and its launch-bound evidence, read
back from the rendered HTML, are the views' (``gpu_utilization_by_rank``, ``launch_bound``) and
``advise()``'s, with the same rounding. The A100 page once said 23.8% (headline) against 23.6%."""

from __future__ import annotations

import html
import re

import pytest
from conftest import TRACES, shared_or_skip

import trace_report as tr
from trace_report.analyses.advise import advise
from trace_report.analyses.common.utilization import gpu_utilization
from trace_report.present.report import build_report, render_html


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def headline(page: str) -> dict[str, str]:
    """``{label: value}`` of the headline boxes."""
    block = re.search(r'<div class="headline">(.*?)</div>\s*<h3>', page, re.S).group(1)
    return {_text(k): _text(v) for v, k in re.findall(r"<div><b>(.*?)</b>(.*?)</div>", block, re.S)}


def advice_rows(page: str) -> dict[str, dict[str, str]]:
    """The Advice table as ``{finding: {column: cell text}}``."""
    section = page[page.index("<h2>Advice</h2>"):]
    section = section[:section.index("</section>")]
    head = [_text(h) for h in re.findall(r"<th>(.*?)</th>", section, re.S)]
    rows = [dict(zip(head, (_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr_, re.S)), strict=True))
            for tr_ in re.findall(r"<tr>(<td.*?)</tr>", section, re.S)]
    return {row["finding"]: row for row in rows}


@pytest.mark.parametrize("folder", ["hta_a100_ddp_nccl", "param_dlrm_kineto_v100x8"])
def test_no_number_on_the_page_contradicts_another(folder):
    shared_or_skip()
    with tr.open(TRACES / folder) as db:
        page = render_html(build_report(db, [folder]))
        util = gpu_utilization(db).set_index("rank")
        launch = db.con.execute("SELECT t.rank, l.shorter_pct FROM launch_bound l JOIN traces t USING (trace_id)").df()
        advice = advise(db)
        found = advice.frame.set_index("finding")
    launch = launch.set_index("rank")["shorter_pct"]
    pct = util["gpu_util_pct"]

    # the headline: sum of busy / sum of step time over the ranks (and the range over ranks)
    total = 100.0 * util["busy_us"].sum() / util["wall_us"].sum()
    want = f"{total:.1f}%" + (f" (ranks {pct.min():.1f}-{pct.max():.1f}%)" if len(util) > 1 else "")
    assert headline(page)["GPU busy (of step time)"] == want

    rows = advice_rows(page)
    # the headline names advise's biggest finding, the Advice section lists the same findings
    assert _text(re.search(r'<p class="verdict-line">(.*?)</p>', page, re.S).group(1)) == advice.verdict
    assert list(rows) == list(found.index)
    # launch-bound: its evidence quotes the view's share of ops shorter than their launch for the
    # rank it is about, and the saving on the page is advise's
    lb = rows["launch_bound"]
    about = int(re.search(r"rank (\d+):", lb["evidence"]).group(1)) if len(util) > 1 else int(util.index[0])
    assert f"{launch[about]:.0f}% shorter than their launch" in lb["evidence"]
    assert float(lb["est_saving_ms_per_step"]) == pytest.approx(found.loc["launch_bound", "est_saving_ms_per_step"],
                                                                rel=1e-3)
    # the GPU busy figure advise quotes (low utilisation, where it is a finding) is the headline's
    if "low_gpu_utilization" in rows:
        low = rows["low_gpu_utilization"]
        rank = int(re.search(r"rank (\d+):", low["evidence"]).group(1)) if len(util) > 1 else int(util.index[0])
        assert f"{pct[rank]:.3g}% of step time" in low["evidence"]
        assert f"{pct[rank]:.1f}" in headline(page)["GPU busy (of step time)"] or len(util) > 1
