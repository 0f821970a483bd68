"""store.views.materialize: the rows of a view kept for the connection, never outliving its events."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TRACES, complete_events, run_cli, shared_or_skip, trace_file
from trace_report.store.events_view import empty_events_view
from trace_report.store.views import create_views, materialize


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
