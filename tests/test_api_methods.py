"""The TraceDB methods of the analyses (critical path, sequences, modules, slice) give what
the commands print for the same options: each method against the command's JSON output on a
shared trace (so a wrong option passed through shows), and the slice written by the method
re-opened."""

from __future__ import annotations

import json

import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr

BERT = "tracelens_h100_bert_small"  # one ProfilerStep (6), nn.Module events, shapes


@pytest.fixture(scope="module")
def bert():
    shared_or_skip()
    with tr.open(TRACES / BERT) as db:
        yield db


def _cli_rows(*args: str) -> list[dict]:
    done = invoke([*args, "-f", "json"])
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def _rows(frame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


def test_critical_path_method_is_the_command(bert) -> None:
    path = str(TRACES / BERT)
    got = bert.critical_path(step=6, data_loading=(), infer_syncs=False, hta_rounding=True)
    want = _cli_rows("critical-path", path, "--step", "6", "--data-loading", "", "--no-infer-syncs", "--hta-rounding")
    assert [round(r["path_ms"], 9) for r in _rows(got)] == [round(r["path_ms"], 9) for r in want]
    assert got["step"].tolist() == [6]
    ops = bert.critical_path(step=6, operators=True, top=3)
    want = _cli_rows("critical-path", path, "--step", "6", "--operators", "--top", "3")
    assert [(r["kind"], r["name"]) for r in _rows(ops)] == [(r["kind"], r["name"]) for r in want] and len(want) > 0
    result = bert.critical_path_result(step=6, data_loading=(), infer_syncs=False, hta_rounding=True)
    assert result.frame["path_ms"].tolist() == got["path_ms"].tolist() and len(result.operators) > 0


def test_sequences_and_modules_methods_are_the_commands(bert) -> None:
    path = str(TRACES / BERT)
    seq = bert.sequences(min_count=1, max_length=4)
    want = _cli_rows("sequences", path, "--min-count", "1", "--max-length", "4", "-n", "1000")
    assert len(seq) == len(want) and [r["total_us"] for r in _rows(seq)] == pytest.approx([r["total_us"] for r in want])
    mods = bert.modules(depth=2)
    want = _cli_rows("modules", path, "--depth", "2")
    assert [r["path"] for r in _rows(mods)] == [r["path"] for r in want] and mods["depth"].max() == 2


def test_slice_method_writes_the_step(bert, tmp_path) -> None:
    out = tmp_path / "step6.json.gz"
    n = bert.slice(out, steps=6)
    assert n > 0 and out.is_file()
    with tr.open(out) as sliced:
        assert [s for (s,) in sliced.con.execute("SELECT step FROM steps").fetchall()] == [6]
        assert sliced.scalar("SELECT count(*) FROM kernels") == bert.scalar(
            "SELECT count(*) FROM kernels k JOIN steps s ON s.trace_id = k.trace_id AND k.ts_us >= s.ts_us "
            "AND k.ts_us < s.end_us WHERE s.step = 6")
