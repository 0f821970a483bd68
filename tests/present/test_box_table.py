"""Tables drawn without Rich (present/box_table.py) are the text Rich prints for them: random
tables (numbers and names, folded and multi-line cells, wrapped headers, µ and wide characters,
titles, given and natural widths) and the tables of real analyses compared character for
character; anything Rich would lay out differently is left to Rich."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from conftest import TRACES, shared_or_skip

import trace_report as tr
from trace_report.present import box_table, tables
from trace_report.present.format import Format

WORDS = ["aten::mm", "ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4, float>", "µs",
         "ncclKernel_AllReduce_RING_LL_Sum_float", "k[abc]", "全角", "", "x y z", "a_b_c_d_e_f"]


Drawn = tuple[str | None, list[str], list[list[str]], list[bool], list[int | None], int]


def random_table(rng: random.Random) -> Drawn:
    n = rng.randint(1, 6)
    headers = [rng.choice(["rank", "dur_us", "name", "pct_of_gpu_time", "ai_flop_\nper_byte", "全角", "x"])
               for _ in range(n)]
    right = [rng.random() < 0.5 for _ in range(n)]
    widths = [rng.choice([None, None, 4, 9, 14, 30]) for _ in range(n)]
    rows = []
    for _ in range(rng.randint(0, 40)):
        row = []
        for w in widths:
            text = rng.choice(WORDS) if rng.random() < 0.5 else f"{rng.uniform(0, 1e6):,.{rng.randint(0, 3)}f}"
            if w is not None:  # as fit.fit_rows leaves them: lines no wider than the column
                text = "\n".join(text[i:i + w] for i in range(0, max(len(text), 1), w))
            row.append(text)
        rows.append(row)
    title = rng.choice([None, "Top kernels", "Roofline [estimate]", "x" * 70])
    return title, headers, rows, right, widths, rng.choice([40, 80, 120, 200])


@pytest.mark.parametrize("seed", range(300))
def test_random_tables_as_rich_draws_them(seed: int) -> None:
    title, headers, rows, right, widths, width = random_table(random.Random(seed))
    drawn = box_table.draw(title, headers, rows, right, widths, width)
    if drawn is not None:
        assert drawn == tables._rich_table(title, headers, rows, right, widths, width)


def test_most_random_tables_are_drawn() -> None:
    """The comparison above is not vacuous: most random tables take the fast path."""
    drawn = sum(box_table.draw(*random_table(random.Random(s))) is not None for s in range(300))
    assert drawn > 60  # the others are wider than their console (40-200 columns): Rich shrinks those


def test_tabs_and_overwide_lines_are_left_to_rich() -> None:
    assert box_table.draw(None, ["a"], [["x\ty"]], [False], [None], 80) is None
    assert box_table.draw(None, ["a"], [["toolong"]], [False], [3], 80) is None
    assert box_table.draw(None, ["a" * 50, "b" * 50], [["1", "2"]], [False, False], [None, None], 80) is None


def test_real_long_tables_as_rich_draws_them(monkeypatch) -> None:
    """ops by shape and every kernel of a shared trace, in table format: the same text drawn both
    ways (names with templates and arguments, shapes, numbers)."""
    shared_or_skip()
    with tr.open(TRACES / "hta_trace_diff") as db:
        frame = db.ops(limit=None, all_ops=True, by_shape=True)
        kernels = db.top_kernels(limit=None)
    drawn = []
    real_draw = box_table.draw
    monkeypatch.setattr(box_table, "draw", lambda *a: drawn.append(real_draw(*a)) or drawn[-1])
    for f in (frame, kernels):
        assert len(f) >= 200
        fast = tables.render(f, Format.table, "Title")
        assert drawn[-1] is not None  # drawn without Rich
        monkeypatch.setattr(box_table, "draw", lambda *a: None)  # Rich itself
        slow = tables.render(f, Format.table, "Title")
        monkeypatch.setattr(box_table, "draw", lambda *a: drawn.append(real_draw(*a)) or drawn[-1])
        assert fast == slow and fast.count("\n") > len(f)


def test_rich_keeps_brackets_in_names() -> None:
    """Rich read cell text as markup: a name k[abc]y printed as ky."""
    text = tables.render(pd.DataFrame({"name": ["k[abc]y :cat:"], "dur_us": [1.0]}), Format.table)
    assert "k[abc]y :cat:" in text
