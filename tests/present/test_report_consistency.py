"""No number on the report page contradicts another (issue 14, "Done when"): the headline GPU
utilisation, the advice's GPU-busy figures and its launch-bound figure, read back from the
rendered HTML, are the views' (``gpu_utilization_by_rank``, ``launch_bound``) and ``advise()``'s,
with the same rounding. The A100 page once said 23.8% (headline) against 23.6% (advice)."""

from __future__ import annotations

import html
import re

import pytest
from conftest import TRACES, shared_or_skip

import trace_report as tr
from trace_report.analyses.advise import advise
from trace_report.analyses.utilization import gpu_utilization
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
        found = advise(db).frame.set_index("finding")
    launch = launch.set_index("rank")["shorter_pct"]
    pct = util["gpu_util_pct"]

    # the headline: sum of busy / sum of step time over the ranks (and the range over ranks)
    total = 100.0 * util["busy_us"].sum() / util["wall_us"].sum()
    want = f"{total:.1f}%" + (f" (ranks {pct.min():.1f}-{pct.max():.1f}%)" if len(util) > 1 else "")
    assert headline(page)["GPU busy (of step time)"] == want

    rows = advice_rows(page)
    # low GPU utilisation: advise's value is the view's worst (lowest) rank, on the ranks below 50%
    low = rows["low_gpu_utilization"]
    assert float(low["value"]) == found.loc["low_gpu_utilization", "value"] == round(pct.min(), 3)
    assert f"{pct.min():.1f}% of step time" in low["evidence"]
    assert f"{pct.min():.1f}" in headline(page)["GPU busy (of step time)"]  # same figure, same rounding
    if len(util) > 1:
        assert low["ranks"] == ", ".join(str(r) for r in pct.index if pct[r] < 50.0)

    # launch-bound: the view's share (kernels + memcpy + memset shorter than their launch), worst rank;
    # the GPU busy it quotes is that rank's utilisation from the same view
    lb = rows["launch_bound"]
    worst = int(re.search(r"worst rank (\d+)", lb["evidence"]).group(1)) if len(util) > 1 else int(util.index[0])
    assert float(lb["value"]) == found.loc["launch_bound", "value"] == round(launch.max(), 3)
    assert launch[worst] == launch.max()
    assert f"GPU busy {pct[worst]:.1f}% of step time" in lb["evidence"]
