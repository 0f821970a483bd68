"""View ``estimate_op_args`` (store/sql/views_ops.sql), the rows the roofline's FLOP estimate
counts: the names of :data:`ESTIMATED_OPS` and the args of ``_COUNTED_ARGS``, written once in SQL
so that the rows can be kept beside the database (store/kept_views.py)."""

from __future__ import annotations

import json
import re

from tests.conftest import complete_events, empty_kept_file, kept_files, run_cli, shared_or_skip, trace_file
from trace_report.analyses.roofline.estimate import _COUNTED_ARGS, ESTIMATED_OPS
from trace_report.store.kept_views import KIND_PREFIX
from trace_report.store.views import sql_text


def _view_sql() -> str:
    text = sql_text("views_ops.sql")
    return text[text.index("VIEW estimate_op_args"):]


def test_view_names_the_estimated_operators_and_counted_args() -> None:
    body = _view_sql()
    names = set(re.findall(r"'(aten::[^']+)'", body[body.index("name IN"):]))
    assert names == ESTIMATED_OPS
    assert re.findall(r"try\(json_extract\(args, '\$\.\"([^\"]+)\"'\)\) AS a(\d)", body) == [
        (k, str(i)) for i, k in enumerate(_COUNTED_ARGS)]


def test_rows_are_the_json_operators_with_their_args() -> None:
    """Against a plain pass over the JSON: every cpu_op of those names with a duration, with its
    "Input Dims" as JSON."""
    import trace_report as tr

    shared_or_skip()
    path = trace_file("tracelens_h100_bert_small")
    with tr.open(path) as db:
        rows = db.con.execute("SELECT name, a0 FROM estimate_op_args ORDER BY ts_us, event_id").fetchall()
    expected = sorted(((e["ts"], e["name"], e["args"].get("Input Dims")) for e in complete_events(path)
                       if e.get("cat") == "cpu_op" and e.get("name") in ESTIMATED_OPS and "dur" in e),
                      key=lambda r: r[0])
    assert len(rows) == len(expected) > 0
    assert [r[0] for r in rows] == [n for _, n, _ in expected]
    assert [json.loads(r[1]) if r[1] is not None else None for r in rows] == [d for _, _, d in expected]


def test_estimate_from_the_kept_file_is_the_computed_one(tmp_path) -> None:
    """The first roofline estimate on a database computes the view and keeps its file; the next
    connection's estimate reads that file (emptied, and the estimate's own kept rows removed, it
    finds no operator) and gives the same rows."""
    import pandas as pd

    import trace_report as tr
    from trace_report.analyses.roofline.estimate import estimate_ops

    shared_or_skip()
    db_path = tmp_path / "bert.duckdb"
    code, _, err = run_cli(["ingest", trace_file("tracelens_h100_bert_small"), "-o", db_path, "-q"])
    assert code == 0, err
    with tr.open(db_path) as db:
        first = estimate_ops(db.con)
    files = kept_files(db_path, KIND_PREFIX + "estimate_op_args")
    assert len(files) == 1 and len(first) > 0
    with tr.open(db_path) as db:
        pd.testing.assert_frame_equal(estimate_ops(db.con), first)
    empty_kept_file(files[0])  # the same file without rows: the estimate reads it, not the events
    for kept_estimate in kept_files(db_path, "roofline_estimate"):  # computed again, from the view's file
        kept_estimate.unlink()
    with tr.open(db_path) as db:
        assert estimate_ops(db.con).empty
