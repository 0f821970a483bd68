"""store.views.materialize: the rows of a view kept for the connection, never outliving its events."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TRACES, complete_events, run_cli, shared_or_skip, trace_file
from trace_report.store.events_view import empty_events_view
from trace_report.store.kept_views import SHARED_VIEWS, materialize, materialized
from trace_report.store.views import create_views, views_as_created


def _steps(con) -> list[tuple]:
    return con.execute("SELECT trace_id, step, event_id, ts_us, dur_us FROM steps ORDER BY ALL").fetchall()


def test_materialized_steps_are_the_views_rows_and_go_when_events_change(tmp_path: Path) -> None:
    import trace_report as tr

    shared_or_skip()
    path = trace_file("hta_a100_ddp_nccl")
    # independently: the ProfilerStep events of the JSON
    expected = sorted(float(e["dur"]) for e in complete_events(path) if str(e["name"]).startswith("ProfilerStep#"))
    assert expected
    with tr.open(path) as db:
        con = db.con
        before = _steps(con)
        assert sorted(r[4] for r in before) == expected
        materialize(con, "steps", "region_markers")
        materialize(con, "steps")  # idempotent: the table is not read again
        sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'steps'").fetchone()[0]
        assert "steps_materialized" in sql
        assert _steps(con) == before
        # the events change (a view over nothing, as an emptied store publishes): create_views restores
        # the plain views, which see the change
        empty_events_view(con)
        create_views(con)
        assert _steps(con) == []
        assert con.execute("SELECT count(*) FROM region_markers").fetchone()[0] == 0


def _view_sql(con, name: str) -> str:
    return con.execute("SELECT sql FROM duckdb_views() WHERE temporary AND view_name = ?", [name]).fetchone()[0]


def test_materialized_keeps_views_as_tables_for_the_block_only(tmp_path: Path) -> None:
    """materialized(): inside the block the shared views read their tables and give the plain
    views' rows (steps against the JSON's ProfilerSteps); after it they are the plain views again
    (same SQL, tables dropped, still "as created"), and a view kept before the block stays kept."""
    import trace_report as tr

    shared_or_skip()
    path = trace_file("hta_a100_ddp_nccl")
    expected = sorted(float(e["dur"]) for e in complete_events(path) if str(e["name"]).startswith("ProfilerStep#"))
    with tr.open(path) as db:
        con = db.con
        plain = {n: _view_sql(con, n) for n in SHARED_VIEWS}
        rows = {n: con.execute(f"SELECT * FROM {n} ORDER BY ALL").fetchall() for n in SHARED_VIEWS}
        materialize(con, "region_markers")  # kept before the block: stays kept
        with materialized(con, [*SHARED_VIEWS, "region_markers"]):
            for n in SHARED_VIEWS:
                assert f"{n}_materialized" in _view_sql(con, n)
                assert con.execute(f"SELECT * FROM {n} ORDER BY ALL").fetchall() == rows[n], n
            assert sorted(r[4] for r in _steps(con)) == expected
        assert {n: _view_sql(con, n) for n in SHARED_VIEWS} == plain
        assert not con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary AND "
                               "table_name LIKE '%materialized' AND table_name <> 'region_markers_materialized'"
                               ).fetchall()
        assert "region_markers_materialized" in _view_sql(con, "region_markers")
        assert views_as_created(con)
        # the plain views follow events again
        empty_events_view(con)
        assert _steps(con) == []


def test_materialize_works_on_a_read_only_database(tmp_path: Path) -> None:
    import trace_report as tr

    shared_or_skip()
    db_path = tmp_path / "one.duckdb"
    code, _, err = run_cli(["ingest", TRACES / "hta_a100_ddp_nccl", "-o", db_path])
    assert code == 0, err
    with tr.open(db_path) as db:  # read-only
        before = _steps(db.con)
        materialize(db.con, "steps")
        assert _steps(db.con) == before and before


def test_views_created_unbound_read_every_file(tmp_path: Path) -> None:
    """connect_existing creates the analysis views unbound (``views.deferred``: DuckDB binds each
    when a query reads it): none of them is bound after the open, and each then reads every
    Parquet file (the kernels and steps of the trace's JSON, cut into 1 MB pieces) and gives what
    the views created alone for those queries (``create_views(only=...)``) give."""
    import duckdb

    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
    from trace_report.store.database import connect_existing
    from trace_report.store.events_view import create_events_view_from_files, events_dir_for
    from trace_report.store.views import statements, views_as_created, views_named_in

    shared_or_skip()
    folder = TRACES / "hta_a100_ddp_nccl"
    db = tmp_path / "t.duckdb"
    ingest_to_database([folder], db, IngestOptions(workers=1, piece_bytes=1 << 20))
    traces = sorted(folder.rglob("*.json*"))
    events = [e for p in traces for e in complete_events(p)]
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    steps = sorted(float(e["dur"]) for e in events if str(e["name"]).startswith("ProfilerStep#"))
    queries = ["SELECT count(*) FROM gpu_ops WHERE cat = 'kernel'", "SELECT dur_us FROM steps ORDER BY dur_us",
               "SELECT * FROM gpu_op_names ORDER BY ALL", "SELECT * FROM kernel_classes ORDER BY ALL"]

    con = connect_existing(db)
    try:
        files = con.execute("SELECT count(*) FROM event_files").fetchone()[0]
        assert files >= 2 * len(traces)  # several pieces per trace: the first file is not all
        assert views_as_created(con)
        analysis = {s.name for s in statements()}
        bound = {n for (n,) in con.execute("SELECT view_name FROM duckdb_views() WHERE database_name = 'temp' "
                                           "AND is_bound").fetchall()}
        assert "events" in bound and not bound & {"gpu_op_names", "kernel_classes", "regions", "gpu_idle_by_cause"}
        assert len(analysis - bound) > 40
        assert con.execute(queries[0]).fetchone()[0] == kernels > 0
        assert [r[0] for r in con.execute(queries[1]).fetchall()] == steps
        got = [_rounded(con.execute(q).fetchall()) for q in queries]
    finally:
        con.close()
    with duckdb.connect(str(db), read_only=True) as alone:  # each query's views alone
        create_events_view_from_files(alone, events_dir_for(db))
        create_views(alone, views_named_in(*queries))
        assert [_rounded(alone.execute(q).fetchall()) for q in queries] == got


def _rounded(rows: list[tuple]) -> list[tuple]:
    """Rows with their floats to 6 decimals: DuckDB's parallel sums vary in the last bits."""
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows]


def test_views_named_in_a_query_are_the_views_it_reads() -> None:
    from trace_report.store.views import statements, views_named_in

    assert views_named_in("SELECT k.* FROM kernel_steps k JOIN steps s USING (trace_id)", "cpu_ops") == \
        ["cpu_ops", "kernel_steps", "steps"]
    assert views_named_in("SELECT name FROM traces") == []  # tables and columns are no views
    every = [s.name for s in statements()]
    assert views_named_in(" ".join(every)) == sorted(set(every))
