"""The breakdown's per-trace tables kept beside a database (trace_report.store.derived): a query
that reads them gives exactly what computing from the events gives, and a kept table is never
read once the events or the code it came from changed.

Real data: this project's own H100 captures (traces/h100-2026-11-25), so nothing here needs
../shared. What computing from the events gives is itself checked against plain-Python passes
over the trace JSON in tests/analyses/test_h100_captures.py and test_breakdown_*.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import H100_CAPTURES as H100
from conftest import H100_RUNS as RUNS
from conftest import kept_files as kept_of_kind
from conftest import run_cli

import trace_report as tr
from trace_report.analyses import breakdown as regions
from trace_report.analyses.breakdown import BreakdownOptions, breakdown, region_table, selected_traces
from trace_report.analyses.breakdown.kept import DERIVED_KIND
from trace_report.cli import ingest as ingest_cli_module
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.store import derived
from trace_report.store.events_view import events_dir_for
from trace_report.store.kept_views import KIND_PREFIX

OPTIONS = [BreakdownOptions(), BreakdownOptions(by_step=True), BreakdownOptions(by_rank=True),
           BreakdownOptions(by_step=True, by_rank=True), BreakdownOptions(trace_ids=(2,))]

pytestmark = pytest.mark.skipif(not H100.is_dir(), reason="traces/h100-2026-11-25 is not present")


@pytest.fixture
def db_path(h100_db: Path) -> Path:
    """The three H100 runs ingested (a copy of the database ingested once per test process)."""
    return h100_db


def not_views(db_path: Path) -> list[Path]:
    """The files of the derived folder but the kept views' (written by DuckDB, not by the Parquet
    writer these tests make fail: store/kept_views.py)."""
    folder = events_dir_for(db_path) / derived.FOLDER
    return [p for p in sorted(folder.iterdir()) if not p.name.startswith(KIND_PREFIX)] if folder.is_dir() else []


def kept_files(db_path: Path) -> list[Path]:
    return kept_of_kind(db_path, DERIVED_KIND)


def computed(db_path: Path, opts: BreakdownOptions) -> regions.BreakdownResult:
    """The breakdown computed from the events, nothing read from or written to the kept tables."""
    with tr.open(db_path) as db:
        traces = regions.breakdown_traces(db.con, opts)
        table, facts = region_table(db.con, traces, keep=False)
        spans = regions.step_spans(db.con, regions.trace_ids(traces))
        return regions.breakdown_from(table, facts, traces, opts, spans)


def test_kept_tables_give_the_computed_breakdown(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = {repr(o): computed(db_path, o) for o in OPTIONS}
    assert kept_files(db_path) == []
    with tr.open(db_path) as db:  # read-only, as every query opens it
        first = breakdown(db, BreakdownOptions())
    files = kept_files(db_path)
    assert [f.name.split("-")[1] for f in files] == ["t000001", "t000002", "t000003"]
    pd.testing.assert_frame_equal(first.frame, expected[repr(BreakdownOptions())].frame, check_exact=True)

    def no_events(*_: object) -> None:
        raise AssertionError("the kept tables were not read")

    monkeypatch.setattr(regions, "compute_region_parts", no_events)
    with tr.open(db_path) as db:
        for o in OPTIONS:
            got = breakdown(db, o)
            pd.testing.assert_frame_equal(got.frame, expected[repr(o)].frame, check_exact=True)
            assert got.notes == expected[repr(o)].notes
    assert expected[repr(BreakdownOptions())].frame["kernels"].sum() > 1000  # real steps, real kernels


def test_a_changed_trace_or_code_is_computed_again(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with tr.open(db_path) as db:
        breakdown(db)
    before = {f.name for f in kept_files(db_path)}
    ingest_to_database([H100 / "baseline"], db_path, IngestOptions(workers=1, force=True))  # new pieces for trace 1
    after_ingest = {f.name for f in kept_files(db_path)}
    assert len(after_ingest) == 2 and after_ingest < before  # the replaced trace's table went with its pieces

    calls: list[list[int]] = []
    compute = regions.compute_region_parts

    def counting(con: object, ids: list[int]) -> dict:
        calls.append(ids)
        return compute(con, ids)

    monkeypatch.setattr(regions, "compute_region_parts", counting)
    with tr.open(db_path) as db:
        ids = selected_traces(db.con, None)["trace_id"].tolist()
        breakdown(db)
    assert len(calls) == 1 and sorted(calls[0]) == [ids[-1]]  # only the re-ingested trace
    monkeypatch.setattr(regions, "CODE_VERSION", "0123456789ab")  # another trace-report
    with tr.open(db_path) as db:
        breakdown(db)
    assert sorted(calls[1]) == sorted(ids)
    assert all(f.name.endswith("-0123456789ab.parquet") for f in kept_files(db_path))  # one version kept per trace
    assert len(kept_files(db_path)) == 3


def test_damaged_or_unwritable_kept_tables_are_ignored(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = computed(db_path, BreakdownOptions())
    with tr.open(db_path) as db:
        breakdown(db)
    victim = kept_files(db_path)[0]
    victim.write_bytes(victim.read_bytes()[:100])  # truncated (a full disk, a killed copy)
    with tr.open(db_path) as db:
        got = breakdown(db)
    pd.testing.assert_frame_equal(got.frame, expected.frame, check_exact=True)
    assert victim.stat().st_size > 100  # computed again and kept again

    shutil.rmtree(events_dir_for(db_path) / derived.FOLDER)

    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Read-only file system")

    for target in ("pyarrow.parquet.write_table", "os.replace"):  # nothing written / written, not renamed
        with monkeypatch.context() as m:
            m.setattr(target, refused)
            with tr.open(db_path) as db:
                got = breakdown(db)
        pd.testing.assert_frame_equal(got.frame, expected.frame, check_exact=True)
        assert kept_files(db_path) == []
        assert not_views(db_path) == []  # no temporary file left behind


def test_redefined_views_neither_read_nor_keep_rows(db_path: Path) -> None:
    """A notebook that redefines a view the breakdown reads (here every annotation is 'forward')
    gets the breakdown of its own views, and the database's kept rows stay the database's own."""
    expected = computed(db_path, BreakdownOptions())
    with tr.open(db_path) as db:
        breakdown(db)  # kept
    before = {f: f.stat().st_mtime_ns for f in kept_files(db_path)}
    with tr.open(db_path) as db:
        db.con.execute("CREATE OR REPLACE TEMP VIEW region_rules AS SELECT 'all' AS rule_id, 1 AS priority, "
                       "'forward' AS region, '.*' AS pattern, 'any' AS scope, '' AS rationale, '' AS source")
        mine = breakdown(db).frame.set_index("region")
    assert mine.loc["forward", "wall_pct"] > 90 > expected.frame.set_index("region").loc["forward", "wall_pct"]
    assert {f: f.stat().st_mtime_ns for f in kept_files(db_path)} == before
    shutil.rmtree(events_dir_for(db_path) / derived.FOLDER)
    with tr.open(db_path) as db:
        db.con.execute("CREATE OR REPLACE TEMP VIEW region_rules AS SELECT 'all' AS rule_id, 1 AS priority, "
                       "'forward' AS region, '.*' AS pattern, 'any' AS scope, '' AS rationale, '' AS source")
        breakdown(db)
    assert kept_files(db_path) == []
    with tr.open(db_path) as db:
        pd.testing.assert_frame_equal(breakdown(db).frame, expected.frame, check_exact=True)


def test_the_next_ingest_removes_tables_of_pieces_no_longer_listed(db_path: Path) -> None:
    with tr.open(db_path) as db:
        breakdown(db)
    folder = events_dir_for(db_path) / derived.FOLDER
    stale = folder / "breakdown-t000001-deadbeef-0123456789ab.parquet"  # pieces this database never had
    leftover = folder / ".breakdown-t000002-x.parquet.tmp-1-abc"  # a write that was killed
    shutil.copyfile(kept_files(db_path)[0], stale)
    leftover.write_bytes(b"partial")
    current = set(kept_files(db_path)) - {stale}
    ingest_to_database([H100 / "baseline"], db_path, IngestOptions(workers=1))  # skipped: already ingested
    assert set(kept_files(db_path)) == current
    assert not leftover.exists()


def test_a_database_in_memory_keeps_nothing(tmp_path: Path) -> None:
    with tr.open([H100 / "baseline"]) as db:
        assert derived.derived_store(db.con) is None
        assert breakdown(db).frame["kernels"].sum() > 0


# ------------------------------------------------------------------ kept by the ingest


compute = regions.compute_region_parts  # the real one, for stand-ins that monkeypatch it


def ingest_cli(targets: list[Path], db: Path, *flags: str) -> tuple[int, str]:
    code, _, err = run_cli(["ingest", *map(str, targets), "-o", str(db), "--no-progress", *flags])
    return code, err


def test_ingest_keeps_the_rows_of_large_traces_and_they_are_the_computed_ones(
        db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with tr.open(db_path) as probe:
        stored = dict(probe.con.execute("SELECT trace_id, n_complete_events FROM traces").fetchall())
    threshold = max(stored.values())  # the threshold between the traces' sizes
    large = sorted(t for t, n in stored.items() if n >= threshold)
    assert 0 < len(large) < len(stored)
    monkeypatch.setattr(ingest_cli_module, "KEEP_AT_INGEST_MIN_EVENTS", threshold)
    db = tmp_path / "k.duckdb"
    code, err = ingest_cli([H100 / r for r in RUNS], db)
    assert code == 0, err
    assert [int(f.name.split("-")[1][1:]) for f in kept_files(db)] == large
    assert f"kept the breakdown of trace {large[0]}" in err and len(large) == 1

    expected = {repr(o): computed(db, o) for o in OPTIONS}

    def only_small(con: object, ids: list[int]) -> dict:
        assert not set(ids) & set(large), "the rows kept at ingest were not read"
        return compute(con, ids)

    monkeypatch.setattr(regions, "compute_region_parts", only_small)
    with tr.open(db) as handle:
        for o in OPTIONS:
            pd.testing.assert_frame_equal(breakdown(handle, o).frame, expected[repr(o)].frame, check_exact=True)



def test_ingest_keeps_rows_when_asked_and_never_when_told_not_to(tmp_path: Path) -> None:
    code, err = ingest_cli([H100 / "baseline"], tmp_path / "a.duckdb")  # 1 M events: far above this trace
    assert code == 0 and kept_files(tmp_path / "a.duckdb") == [] and "kept the" not in err
    code, err = ingest_cli([H100 / "baseline"], tmp_path / "b.duckdb", "--keep-breakdown")
    assert code == 0 and len(kept_files(tmp_path / "b.duckdb")) == 1 and "kept the breakdown of trace 1" in err
    code, _ = ingest_cli([H100 / "baseline"], tmp_path / "c.duckdb", "--no-keep-breakdown")
    assert code == 0 and kept_files(tmp_path / "c.duckdb") == []


def test_a_failed_or_interrupted_keep_leaves_the_ingested_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write = pq.write_table
    results = []
    for failure, code_wanted in ((PermissionError(13, "Read-only file system"), 0), (KeyboardInterrupt(), 130)):
        db = tmp_path / f"{code_wanted}.duckdb"

        def fail_kept(table: object, where: object, *a: object, exc: BaseException = failure, **k: object) -> None:
            if derived.FOLDER not in Path(str(where)).parts:  # the events' pieces are written
                return write(table, where, *a, **k)
            Path(str(where)).write_bytes(b"PAR1")  # half a kept table, then the failure
            raise exc

        with monkeypatch.context() as m:
            m.setattr(pq, "write_table", fail_kept)
            code, err = ingest_cli([H100 / "baseline"], db, "--keep-breakdown")
        assert code == code_wanted, err
        assert ("the traces are ingested" in err) if code_wanted else ("warning:" in err)
        assert not_views(db) == []  # no temporary file left behind
        results.append(computed(db, BreakdownOptions()))  # the database is whole and answers
    pd.testing.assert_frame_equal(results[0].frame, results[1].frame, check_exact=True)
    pd.testing.assert_frame_equal(results[0].frame, computed_from(H100 / "baseline").frame, check_exact=True)
    assert results[0].frame["kernels"].sum() > 1000


def computed_from(trace: Path) -> regions.BreakdownResult:
    """The breakdown of a trace opened straight from its folder (in memory, nothing kept)."""
    with tr.open(trace) as db:
        return breakdown(db)
