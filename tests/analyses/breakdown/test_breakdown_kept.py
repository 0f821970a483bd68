"""The breakdown's per-trace rows kept beside a database (trace_report.store.cache): a query
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
from conftest import kept_traces, run_cli

import trace_report as tr
from trace_report.analyses.breakdown import BreakdownOptions, breakdown, region_table, selected_traces
from trace_report.analyses.common import breakdown_regions as regions
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.store import cache
from trace_report.store.events_view import events_dir_for
from trace_report.store.layout import DERIVED_FOLDER

OPTIONS = [BreakdownOptions(), BreakdownOptions(by_step=True), BreakdownOptions(by_rank=True),
           BreakdownOptions(by_step=True, by_rank=True), BreakdownOptions(trace_ids=(2,))]

pytestmark = pytest.mark.skipif(not H100.is_dir(), reason="traces/h100-2026-11-25 is not present")


@pytest.fixture
def db_path(h100_db: Path) -> Path:
    """The three H100 runs ingested (a copy of the database ingested once per test process)."""
    return h100_db


def derived_files(db_path: Path) -> list[Path]:
    """Every file of the derived folder (kept parts and temporary files)."""
    folder = events_dir_for(db_path) / DERIVED_FOLDER
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def kept_files(db_path: Path) -> list[Path]:
    return kept_of_kind(db_path, regions.KEPT.kind)


def current_pieces(db_path: Path) -> dict[int, str]:
    with tr.open(db_path) as db:
        return cache.trace_pieces(db.con)


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
    assert len(files) == 1 and kept_traces(files[0]) == current_pieces(db_path)  # one part: the 3 traces
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
    (part,) = kept_files(db_path)
    ingest_to_database([H100 / "baseline"], db_path, IngestOptions(workers=1, force=True))  # new pieces for trace 1
    assert kept_files(db_path) == [part]  # it still holds two current traces
    stale = {t for t, p in kept_traces(part).items() if current_pieces(db_path).get(t) != p}
    assert len(stale) == 1  # the replaced trace's rows no longer count

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
    assert len(kept_files(db_path)) == 2
    read = cache._read_source
    monkeypatch.setattr(cache, "_read_source", lambda path: read(path) + b"# another trace-report")
    cache._cached_key.cache_clear()
    try:
        with tr.open(db_path) as db:
            breakdown(db)
    finally:
        cache._cached_key.cache_clear()
    assert sorted(calls[1]) == sorted(ids)
    (again,) = kept_files(db_path)  # one key kept: the older key's folder removed
    assert again.parent.name != part.parent.name and kept_traces(again) == current_pieces(db_path)


def test_damaged_or_unwritable_kept_tables_are_ignored(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = computed(db_path, BreakdownOptions())
    with tr.open(db_path) as db:
        breakdown(db)
    victim = kept_files(db_path)[0]
    victim.write_bytes(victim.read_bytes()[:100])  # truncated (a full disk, a killed copy)
    with tr.open(db_path) as db:
        got = breakdown(db)
    pd.testing.assert_frame_equal(got.frame, expected.frame, check_exact=True)
    (again,) = kept_files(db_path)  # computed again and kept again, the damaged part removed
    assert again != victim and not victim.exists() and pq.read_table(again).num_rows > 0

    shutil.rmtree(events_dir_for(db_path) / DERIVED_FOLDER)

    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Read-only file system")

    for target in ("pyarrow.parquet.write_table", "os.replace"):  # nothing written / written, not renamed
        with monkeypatch.context() as m:
            m.setattr(target, refused)
            with tr.open(db_path) as db:
                got = breakdown(db)
        pd.testing.assert_frame_equal(got.frame, expected.frame, check_exact=True)
        assert kept_files(db_path) == []
        assert derived_files(db_path) == []  # no temporary file left behind


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
    shutil.rmtree(events_dir_for(db_path) / DERIVED_FOLDER)
    with tr.open(db_path) as db:
        db.con.execute("CREATE OR REPLACE TEMP VIEW region_rules AS SELECT 'all' AS rule_id, 1 AS priority, "
                       "'forward' AS region, '.*' AS pattern, 'any' AS scope, '' AS rationale, '' AS source")
        breakdown(db)
    assert kept_files(db_path) == []
    with tr.open(db_path) as db:
        pd.testing.assert_frame_equal(breakdown(db).frame, expected.frame, check_exact=True)


def test_the_next_ingest_removes_parts_of_pieces_no_longer_listed(db_path: Path) -> None:
    with tr.open(db_path) as db:
        breakdown(db)
    (current,) = kept_files(db_path)
    table = pq.read_table(current)
    meta = {**table.schema.metadata,
            b"trace_report.cache": table.schema.metadata[b"trace_report.cache"].replace(b'": "', b'": "dead')}
    stale = current.with_name("part-0-stale.parquet")  # pieces this database never had
    pq.write_table(table.replace_schema_metadata(meta), stale)
    leftover = current.with_name(".part-1.parquet.tmp-1")  # a write that was killed
    leftover.write_bytes(b"partial")
    assert set(kept_traces(stale).values()).isdisjoint(current_pieces(db_path).values())
    ingest_to_database([H100 / "baseline"], db_path, IngestOptions(workers=1))  # skipped: already ingested
    assert kept_files(db_path) == [current]
    assert not leftover.exists()


def test_a_database_in_memory_keeps_rows_for_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[int]] = []
    compute = regions.compute_region_parts

    def counting(con: object, ids: list[int]) -> dict:
        calls.append(ids)
        return compute(con, ids)

    monkeypatch.setattr(regions, "compute_region_parts", counting)
    with tr.open([H100 / "baseline"]) as db:
        first = breakdown(db).frame
        assert first["kernels"].sum() > 0
        pd.testing.assert_frame_equal(breakdown(db).frame, first, check_exact=True)
    assert len(calls) == 1  # the second read the connection's rows
    with tr.open([H100 / "baseline"]) as db:
        pd.testing.assert_frame_equal(breakdown(db).frame, first, check_exact=True)
    assert len(calls) == 2  # a new connection computes again


# ------------------------------------------------------------------ kept by the ingest


compute = regions.compute_region_parts  # the real one, for stand-ins that monkeypatch it


def ingest_cli(targets: list[Path], db: Path, *flags: str) -> tuple[int, str]:
    code, _, err = run_cli(["ingest", *map(str, targets), "-o", str(db), "--no-progress", *flags])
    return code, err


def test_ingest_precompute_keeps_the_rows_and_they_are_the_computed_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "k.duckdb"
    code, err = ingest_cli([H100 / r for r in RUNS], db, "--precompute")
    assert code == 0, err
    (part,) = kept_files(db)
    assert kept_traces(part) == current_pieces(db) and len(kept_traces(part)) == len(RUNS)
    assert "computed the breakdown of traces 1, 2, 3" in err

    expected = {repr(o): computed(db, o) for o in OPTIONS}

    def nothing(con: object, ids: list[int]) -> dict:
        raise AssertionError("the rows kept at ingest were not read")

    monkeypatch.setattr(regions, "compute_region_parts", nothing)
    with tr.open(db) as handle:
        for o in OPTIONS:
            pd.testing.assert_frame_equal(breakdown(handle, o).frame, expected[repr(o)].frame, check_exact=True)


def test_ingest_keeps_rows_only_when_asked(tmp_path: Path) -> None:
    code, err = ingest_cli([H100 / "baseline"], tmp_path / "a.duckdb")
    assert code == 0 and derived_files(tmp_path / "a.duckdb") == [] and "computed the" not in err
    code, err = ingest_cli([H100 / "baseline"], tmp_path / "b.duckdb", "--precompute")
    assert code == 0 and len(kept_files(tmp_path / "b.duckdb")) == 1 and "computed the breakdown of trace 1" in err


def test_a_failed_or_interrupted_keep_leaves_the_ingested_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write = pq.write_table
    results = []
    for failure, code_wanted in ((PermissionError(13, "Read-only file system"), 0), (KeyboardInterrupt(), 130)):
        db = tmp_path / f"{code_wanted}.duckdb"

        def fail_kept(table: object, where: object, *a: object, exc: BaseException = failure, **k: object) -> None:
            if DERIVED_FOLDER not in Path(str(where)).parts:  # the events' pieces are written
                return write(table, where, *a, **k)
            Path(str(where)).write_bytes(b"PAR1")  # half a kept table, then the failure
            raise exc

        with monkeypatch.context() as m:
            m.setattr(pq, "write_table", fail_kept)
            code, err = ingest_cli([H100 / "baseline"], db, "--precompute")
        assert code == code_wanted, err
        assert ("the traces are ingested" in err) if code_wanted else ("Traceback" not in err)
        assert derived_files(db) == []  # no temporary file left behind
        results.append(computed(db, BreakdownOptions()))  # the database is whole and answers
    pd.testing.assert_frame_equal(results[0].frame, results[1].frame, check_exact=True)
    pd.testing.assert_frame_equal(results[0].frame, computed_from(H100 / "baseline").frame, check_exact=True)
    assert results[0].frame["kernels"].sum() > 1000


def computed_from(trace: Path) -> regions.BreakdownResult:
    """The breakdown of a trace opened straight from its folder (in memory, nothing kept)."""
    with tr.open(trace) as db:
        return breakdown(db)
