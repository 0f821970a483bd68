"""``kernel_class_regexp(kname, pattern)``, the rule table's patterns as constants
(trace_report/store/kernel_class_regexp.py): the generated SQL is current, and the macro is
``regexp_matches`` on real kernel names, checked against RE2 as pyarrow runs it (one compiled
pattern per call), for the rule table's patterns and for any other."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import GPU_OP_CATS, TRACES, folder_events

from trace_report.store import kernel_class_regexp as kcr
from trace_report.store.views import deferred, needed_statements, sql_text

FOLDERS = ["hta_a100_ddp_nccl", "tracelens_h100_timesformer", "tracelens_b200_vllm_eager",
           "tracelens_mi300_torch_compile_triton", "hta_amd_mi250"]
"""cuDNN/cuBLAS/CUTLASS and NCCL names on A100, H100 and B200, Triton kernels of torch.compile, AMD
names (the small traces of each kind: their JSON is read here)."""


def _connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for statement in needed_statements(["kernel_class_regexp", "kernel_class_rules"]):
        con.execute(deferred(statement.sql))
    return con


def _reference(names: list[str], patterns: list[str]) -> set[tuple[str, str]]:
    """(name, pattern) pairs where RE2 finds the pattern in the name, as pyarrow matches them."""
    arr = pa.array(names, pa.string())
    return {(n, p) for p in patterns
            for n, hit in zip(names, pc.match_substring_regex(arr, p).to_pylist(), strict=True) if hit}


def _ours(con: duckdb.DuckDBPyConnection, names: list[str]) -> set[tuple[str, str]]:
    """The pairs the macro finds, each pattern read from the rule table's column (as
    kernel_class_matches reads it), not given as a constant."""
    return set(con.execute("SELECT n, r.pattern FROM unnest($names) AS t(n), kernel_class_rules r "
                           "WHERE kernel_class_regexp(n, r.pattern)", {"names": names}).fetchall())


def test_the_generated_sql_is_what_the_rule_table_gives() -> None:
    patterns = kcr.rule_patterns()
    con = _connection()
    table = [p for (p,) in con.execute("SELECT DISTINCT pattern FROM kernel_class_rules").fetchall()]
    assert sorted(patterns) == sorted(table) and len(patterns) >= 20
    assert sql_text(kcr.OUTPUT) == kcr.macro_sql(patterns), (
        "run: python -m trace_report.store.kernel_class_regexp > trace_report/store/sql/" + kcr.OUTPUT)


def test_the_macro_is_regexp_matches_on_real_and_triton_names() -> None:
    if not TRACES.is_dir():
        pytest.skip("../shared/data is not present")
    names = sorted({e["name"] for f in FOLDERS for e in folder_events(f) if e.get("cat") in GPU_OP_CATS})
    names += [f"triton_poi_fused_add_mul_{i}" for i in range(500)]  # a torch.compile trace's many names
    con = _connection()
    patterns = [p for (p,) in con.execute("SELECT DISTINCT pattern FROM kernel_class_rules").fetchall()]
    expected = _reference(names, patterns)
    assert _ours(con, names) == expected
    assert len(expected) > 1000 and {p for _, p in expected} >= {"^triton_", "tensorop|MmaTensorOp"}


def test_a_pattern_outside_the_rule_table_is_matched_as_it_is() -> None:
    """A rule table redefined in a notebook (a pattern the generated list lacks) still matches."""
    con = _connection()
    con.execute("CREATE OR REPLACE TEMP VIEW kernel_class_rules AS SELECT * FROM (VALUES "
                "('my_fused_.*_kernel'), ('(?i)MYGEMM'), ('^absent$')) AS t(pattern)")
    names = ["my_fused_attention_kernel", "tiled_mygemm_v2", "ampere_sgemm_128x64_nn"]
    assert _ours(con, names) == _reference(names, ["my_fused_.*_kernel", "(?i)MYGEMM", "^absent$"])
    assert _ours(con, names) == {("my_fused_attention_kernel", "my_fused_.*_kernel"), ("tiled_mygemm_v2", "(?i)MYGEMM")}
