"""Analysis rows kept per trace beside a database through store/cache.py's PerTrace: the
module calls (analyses/modules/tree.py, module_calls), the launching operator calls of the kernel
sequences (analyses/sequences/__init__.py, call_rows) and the roofline estimate's operators
(analyses/roofline/estimate.py, estimate_ops). The Operator view's nesting rows, kept the same way,
are tested on this project's own captures (test_ops_nesting_kept.py).

Two shared traces in one database: the H100 BERT trace (nn.Module events, one ProfilerStep) and
the MI250 trace (no nn.Module event, so it has no row among the kept module calls). Each command from
kept rows against the same command computed from the events, the kept rows against a plain pass
over the JSON, and the files' life cycle.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import (
    GPU_OP_CATS,
    RUNTIME_CATS,
    complete_events,
    empty_kept_file,
    kept_files,
    kept_traces,
    run_cli,
    shared_or_skip,
    trace_file,
)

import trace_report as tr
from trace_report.analyses.modules import ModuleOptions, modules
from trace_report.analyses.modules import tree as modules_tree
from trace_report.analyses.roofline import estimate as estimate_module
from trace_report.analyses.roofline.estimate import estimate_ops
from trace_report.analyses.roofline.measured import RooflineOptions, roofline
from trace_report.analyses.sequences import SequenceOptions, sequence_calls, sequences
from trace_report.store import cache

TRACES = ("tracelens_h100_bert_small", "hta_amd_mi250")
OPTIONS = [ModuleOptions(), ModuleOptions(by_step=True), ModuleOptions(depth=2), ModuleOptions(rank=0)]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    shared_or_skip()
    path = tmp_path / "two.duckdb"
    code, _, err = run_cli(["ingest", *(trace_file(t) for t in TRACES), "-o", path, "-q"])
    assert code == 0, err
    return path


def files(db_path: Path) -> list[Path]:
    return kept_files(db_path, modules_tree.KEPT.kind)


def nothing_kept(m: pytest.MonkeyPatch) -> None:
    """Every declared table computed from the events, nothing read or kept."""
    m.setattr(cache.PerTrace, "rows", lambda self, con, ids, **_: self.compute(con, ids))


def computed(db_path: Path, opts: ModuleOptions, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """`modules` with the calls computed from the events: no kept file read or written."""
    with monkeypatch.context() as m, tr.open(db_path) as db:
        nothing_kept(m)
        return modules(db, opts).frame


def json_calls(name: str) -> int:
    """nn.Module events and ``## ... ##`` annotations of a trace, from its JSON: one call each."""
    return sum(1 for e in complete_events(trace_file(name))
               if (e.get("cat") == "python_function" and str(e.get("name", "")).startswith("nn.Module:"))
               or (e.get("cat") in ("user_annotation", "cpu_op") and str(e.get("name", "")).startswith("## ")
                   and str(e.get("name", "")).endswith(" ##")))


def test_kept_calls_give_the_computed_tree(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = [computed(db_path, o, monkeypatch) for o in OPTIONS]
    assert files(db_path) == [] and not want[0].empty
    for _ in ("computed and kept", "read back"):
        for opts, frame in zip(OPTIONS, want, strict=True):
            with tr.open(db_path) as db:
                pd.testing.assert_frame_equal(modules(db, opts).frame, frame)
        (part,) = files(db_path)  # the traces computed together: one part
        assert len(kept_traces(part)) == len(TRACES)


def test_each_file_holds_its_traces_calls(db_path: Path) -> None:
    with tr.open(db_path) as db:
        modules(db, ModuleOptions())
        ids = {str(p): int(t) for t, p in db.con.execute("SELECT trace_id, path FROM traces").fetchall()}
    (path,) = files(db_path)
    kept_ids = pq.read_table(path)["trace_id"].to_pylist()
    assert set(kept_traces(path)) == set(ids.values())
    for name in TRACES:
        trace_id = next(t for p, t in ids.items() if name in p)
        assert kept_ids.count(trace_id) == json_calls(name)
    assert json_calls(TRACES[0]) > 0 and json_calls(TRACES[1]) == 0


def test_a_trace_without_calls_is_kept_once(db_path: Path) -> None:
    """Computed alone, its empty result (whose text columns come back typed null) is kept, then read
    back beside the other trace's calls, not written again."""
    with tr.open(db_path) as db:
        (mi250,) = [t for t, p in db.con.execute("SELECT trace_id, path FROM traces").fetchall() if TRACES[1] in p]
        with db.scope([mi250]):
            assert modules(db, ModuleOptions()).frame.empty
    (empty,) = files(db_path)
    assert pq.read_table(empty).num_rows == 0
    stamp = empty.stat().st_mtime_ns
    with tr.open(db_path) as db:
        assert not modules(db, ModuleOptions()).frame.empty
    assert len(files(db_path)) == 2 and empty.stat().st_mtime_ns == stamp


def test_the_files_are_what_is_read(db_path: Path) -> None:
    with tr.open(db_path) as db:
        assert not modules(db, ModuleOptions()).frame.empty
    for path in files(db_path):
        empty_kept_file(path)
    with tr.open(db_path) as db:
        assert modules(db, ModuleOptions()).frame.empty


def test_rank_comes_from_the_traces_table(db_path: Path) -> None:
    """The kept rows hold no rank: a rank changed in ``traces`` after they were kept is what shows."""
    with tr.open(db_path) as db:
        modules(db, ModuleOptions())
        sequence_calls(db)
    with duckdb.connect(str(db_path)) as con:
        con.execute("UPDATE traces SET rank = 7 WHERE path LIKE '%bert%'")
    with tr.open(db_path) as db:
        assert set(modules(db, ModuleOptions()).frame["rank"]) == {7}
        assert set(sequence_calls(db)["rank"]) == {0, 7}
        assert len(sequence_calls(db, SequenceOptions(rank=7))) > 0


def test_a_damaged_file_is_computed_and_written_again(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = computed(db_path, ModuleOptions(), monkeypatch)
    with tr.open(db_path) as db:
        modules(db, ModuleOptions())
    for path in files(db_path):
        path.write_bytes(b"PAR1 damaged")
    with tr.open(db_path) as db:
        pd.testing.assert_frame_equal(modules(db, ModuleOptions()).frame, want)
    (part,) = files(db_path)  # the damaged part replaced
    assert pq.read_table(part).column_names == ["trace_id", "event_id", "step", "path", "path_id", "depth", "name",
                                                 "kind", "ts_us", "cpu_us", "gpu_ops", "gpu_us", "flop_ops", "flop"]


# ---------------------------------------------------------------- kernel sequences

SEQUENCE_OPTIONS = [SequenceOptions(), SequenceOptions(rank=0, min_length=1, min_count=1, steps_only=False),
                    SequenceOptions(operator="aten::")]


def sequence_files(db_path: Path) -> list[Path]:
    return kept_files(db_path, "sequence_calls") + kept_files(db_path, "sequence_calls_all")


def computed_sequences(db_path: Path, opts: SequenceOptions, monkeypatch: pytest.MonkeyPatch) -> tuple:
    with monkeypatch.context() as m, tr.open(db_path) as db:
        nothing_kept(m)
        got = sequences(db, opts)
        return got.frame, got.notes


def launched_gpu_ops(name: str) -> int:
    """GPU operations of a trace with a runtime call of the same correlation, from its JSON."""
    events = complete_events(trace_file(name))
    calls = {e["args"]["correlation"] for e in events
             if e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    return sum(1 for e in events if e.get("cat") in GPU_OP_CATS and e.get("args", {}).get("correlation") in calls)


def test_kept_calls_give_the_computed_sequences(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = [computed_sequences(db_path, o, monkeypatch) for o in SEQUENCE_OPTIONS]
    assert sequence_files(db_path) == [] and any(not f.empty for f, _ in want)
    for _ in ("computed and kept", "read back"):
        for opts, (frame, notes) in zip(SEQUENCE_OPTIONS, want, strict=True):
            with tr.open(db_path) as db:
                got = sequences(db, opts)
            pd.testing.assert_frame_equal(got.frame, frame)
            assert got.notes == notes
        # one part for the steps-only calls and one for every step's; none for --operator
        assert len(kept_files(db_path, "sequence_calls")) == len(kept_files(db_path, "sequence_calls_all")) == 1


def test_kept_calls_hold_every_launched_gpu_operation_once(db_path: Path) -> None:
    """BERT has one ProfilerStep, so HTA's step selection keeps every GPU operation: the calls'
    lengths add up to the GPU operations with a launch call in the JSON."""
    with tr.open(db_path) as db:
        (bert,) = [t for t, p in db.con.execute("SELECT trace_id, path FROM traces").fetchall() if TRACES[0] in p]
        sequences(db, SequenceOptions())
    (path,) = kept_files(db_path, "sequence_calls")
    table = pq.read_table(path).to_pandas()
    assert table.loc[table["trace_id"] == bert, "length"].sum() == launched_gpu_ops(TRACES[0]) > 0
    with tr.open(db_path) as db:
        calls = sequence_calls(db)
    assert not calls.dropna(subset=["op_event_id"]).duplicated(["trace_id", "op_event_id"]).any()
    assert set(calls["rank"]) == {0}
    assert str(calls["op_event_id"].dtype) == "Int64"  # event ids stay integers beside the NULL row


def test_the_sequence_files_are_what_is_read(db_path: Path) -> None:
    with tr.open(db_path) as db:
        sequences(db, SequenceOptions())
    for path in sequence_files(db_path):
        empty_kept_file(path)
    with tr.open(db_path) as db:
        got = sequences(db, SequenceOptions())
    assert got.frame.empty and "no GPU operations launched by a runtime call in the selection" in got.notes


# ---------------------------------------------------------------- roofline estimate

ROOFLINE_OPTIONS = [RooflineOptions(), RooflineOptions(by_name=True), RooflineOptions(region="forward")]


def computed_roofline(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    with monkeypatch.context() as m, tr.open(db_path) as db:
        nothing_kept(m)
        return estimate_ops(db.con), [roofline(db, o).frame for o in ROOFLINE_OPTIONS]


def test_kept_estimate_gives_the_computed_roofline(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows, frames = computed_roofline(db_path, monkeypatch)
    assert kept_files(db_path, estimate_module.KEPT.kind) == [] and rows["flop"].notna().any()
    for _ in ("computed and kept", "read back"):
        with tr.open(db_path) as db:
            pd.testing.assert_frame_equal(estimate_ops(db.con), rows)
            for opts, frame in zip(ROOFLINE_OPTIONS, frames, strict=True):
                pd.testing.assert_frame_equal(roofline(db, opts).frame, frame)
        assert len(kept_files(db_path, estimate_module.KEPT.kind)) == 1


def test_the_estimate_files_are_what_is_read(db_path: Path) -> None:
    with tr.open(db_path) as db:
        assert not estimate_ops(db.con).empty
    for path in kept_files(db_path, estimate_module.KEPT.kind):  # one operator per trace left
        table = pq.read_table(path)
        first = table.to_pandas().groupby("trace_id").head(1).index.tolist()
        meta = json.loads(table.schema.metadata[b"trace_report.cache"])
        meta["rows"] = dict.fromkeys(meta["rows"], 1)
        pq.write_table(table.take(first).replace_schema_metadata(
            {**table.schema.metadata, b"trace_report.cache": json.dumps(meta).encode()}), path)
    with tr.open(db_path) as db:
        assert len(estimate_ops(db.con)) == len(TRACES)
