"""View ``op_costs`` (store/sql/views_op_cost.sql), the operator calls the roofline's FLOP estimate,
``ops`` and ``modules`` count: written once in SQL so that the rows can be kept beside the
database (store/kept_views.py)."""

from __future__ import annotations

import json

from tests.conftest import complete_events, empty_kept_file, kept_files, run_cli, shared_or_skip, trace_file
from trace_report.store.kept_views import KIND_PREFIX

MODEL_OPERATORS = {
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::conv1d",
    "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
    "aten::miopen_convolution", "aten::mkldnn_convolution", "aten::convolution_backward",
    "aten::cudnn_convolution_backward", "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward",
    "aten::_scaled_dot_product_flash_attention_backward", "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward", "aten::_flash_attention_backward"}
"""The operators of the model (its header): GEMMs, convolutions, scaled-dot-product attention."""


def test_rows_are_the_json_operators_with_their_shapes() -> None:
    """Against a plain pass over the JSON: every cpu_op of the model's operators, with its
    "Input Dims" as JSON."""
    import trace_report as tr

    shared_or_skip()
    path = trace_file("tracelens_h100_bert_small")
    with tr.open(path) as db:
        rows = db.con.execute("SELECT name, input_dims_json FROM op_costs ORDER BY ts_us, event_id").fetchall()
        kinds = dict(db.con.execute("SELECT n, op_cost_kind(n) FROM unnest($n) AS t(n)",
                                    {"n": sorted(MODEL_OPERATORS | {"aten::add", "aten::softmax"})}).fetchall())
    assert {n for n, k in kinds.items() if k is not None} == MODEL_OPERATORS
    expected = sorted(((e["ts"], e["name"], e["args"].get("Input Dims")) for e in complete_events(path)
                       if e.get("cat") == "cpu_op" and e.get("name") in MODEL_OPERATORS), key=lambda r: r[0])
    assert len(rows) == len(expected) > 0
    assert [r[0] for r in rows] == [n for _, n, _ in expected]
    assert [json.loads(r[1]) if r[1] is not None else None for r in rows] == [d for _, _, d in expected]
    assert "aten::scaled_dot_product_attention" in {r[0] for r in rows}


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
    files = kept_files(db_path, KIND_PREFIX + "op_costs")
    assert len(files) == 1 and len(first) > 0
    with tr.open(db_path) as db:
        pd.testing.assert_frame_equal(estimate_ops(db.con), first)
    empty_kept_file(files[0])  # the same file without rows: the estimate reads it, not the events
    for kept_estimate in kept_files(db_path, "roofline_estimate"):  # computed again, from the view's file
        kept_estimate.unlink()
    with tr.open(db_path) as db:
        assert estimate_ops(db.con).empty
