"""analyses.columns: Arrow query results as numpy columns and text codes."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa

from trace_report.analyses.common.columns import Columns, numpy_column, text_codes, text_vocabulary


def test_numbers_text_and_codes_from_a_duckdb_result() -> None:
    table = duckdb.connect().sql(
        "SELECT * FROM (VALUES (1::BIGINT, 'a', 2.5::DOUBLE, true), (NULL, NULL, NULL, NULL), (3, 'b', -1.0, false)) "
        "t(id, tid, ts_us, flag)").to_arrow_table()
    ids = numpy_column(table.column("id"), False)
    assert ids.dtype == np.float64 and ids[0] == 1.0 and math.isnan(ids[1]) and ids[2] == 3.0
    assert numpy_column(table.column("tid"), True).tolist() == ["a", None, "b"]
    assert numpy_column(table.column("flag"), False).tolist() == [True, False, False]  # NULL is not true
    vocabulary = text_vocabulary(pa.chunked_array([["b", None, "c"]]))
    assert sorted(vocabulary.to_pylist()) == ["b", "c"]
    codes = text_codes(table.column("tid"), vocabulary)
    assert codes.tolist() == [-1, -1, vocabulary.to_pylist().index("b")]  # 'a' absent, NULL -> -1
    cols = Columns.of(table, ["id", "ts_us"], ("tid",))
    picked = cols.take(np.array([2, 0]))
    assert len(picked) == 2 and picked["tid"].tolist() == ["b", "a"] and picked["ts_us"].tolist() == [-1.0, 2.5]


def test_empty_columns() -> None:
    empty = pa.chunked_array([], pa.string())
    assert numpy_column(empty, True).tolist() == [] and numpy_column(pa.chunked_array([], pa.int64()), False).size == 0
    assert text_vocabulary(empty).to_pylist() == [] and text_codes(empty, pa.array([], pa.string())).size == 0
