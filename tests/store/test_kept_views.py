"""store.kept_views: per-trace view rows kept beside a database and read back by later connections."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from tests.conftest import (
    GPU_OP_CATS,
    KERNEL_CATS,
    complete_events,
    empty_kept_file,
    events_of,
    kept_files,
    kept_traces,
    load_json,
    run_cli,
    shared_or_skip,
    trace_file,
)
from trace_report.store.database import create_schema
from trace_report.store.kept_views import (
    KIND_PREFIX,
    PER_TRACE_VIEWS,
    REPORT_VIEWS,
    SHARED_VIEWS,
    TABLE_MARKER,
    kept_as_table,
    kept_for,
    materialize,
    materialized,
)
from trace_report.store.views import needed_statements, statements

TRACES = ("tracelens_h100_bert_small", "hta_amd_mi250", "kineto_rn50_nw4_2021jun")
"""Three traces with ProfilerSteps and GPU operations, the first with [memory] events, the third with
DataLoader markers (``enumerate(DataLoader)#...``: view ``data_loading_intervals``)."""


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared_or_skip()
    path = tmp_path_factory.mktemp("kept") / "three.duckdb"
    code, _, err = run_cli(["ingest", *(trace_file(t) for t in TRACES), "-o", path, "-q"])
    assert code == 0, err
    return path


def _rows(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple]:
    return con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()


def _plan(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The text of DuckDB's plan for reading the view ``name``."""
    return "".join(r[1] for r in con.execute(f"EXPLAIN SELECT * FROM {name}").fetchall())


def _types(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple]:
    return [r[:2] for r in con.execute(f"DESCRIBE SELECT * FROM {name}").fetchall()]


def _clear(db_path: Path) -> None:
    for name in PER_TRACE_VIEWS:
        for p in kept_files(db_path, KIND_PREFIX + name):
            p.unlink()


def _plain_pass() -> dict[str, int]:
    """Independently, from the JSON: ProfilerSteps, GPU operations and [memory] events of the traces
    (2021 traces spell the CPU operators' category ``Operator``)."""
    steps = gpu = memory = 0
    for t in TRACES:
        path = trace_file(t)
        steps += sum(1 for e in complete_events(path) if e.get("cat") in ("user_annotation", "cpu_op", "Operator")
                     and str(e.get("name", "")).startswith("ProfilerStep#"))
        gpu += sum(1 for e in complete_events(path) if e.get("cat") in GPU_OP_CATS)
        memory += sum(1 for e in events_of(load_json(path)) if e.get("name") == "[memory]")
    return {"steps": steps, "gpu_ops": gpu, "memory_events": memory}


def test_kept_rows_are_the_views_rows_from_any_later_connection(database: Path) -> None:
    """The first connection computes each per-trace view and keeps one part for all the traces,
    with the view's types; a later one reads those parts (emptied, every view is empty) and gets the plain
    view's rows; a file that cannot be read means the view is computed and kept again."""
    import trace_report as tr

    _clear(database)
    names = sorted(PER_TRACE_VIEWS)
    with tr.open(database) as db:
        plain = {n: _rows(db.con, n) for n in names}
        types = {n: _types(db.con, n) for n in names}
        ids = [t for (t,) in db.con.execute("SELECT trace_id FROM traces ORDER BY 1").fetchall()]
    expected = _plain_pass()
    assert all(expected.values())
    for name, n in expected.items():
        assert len(plain[name]) == n, name
    assert len(ids) == len(TRACES)
    with tr.open(database) as db:
        materialize(db.con, *names)
        for n in names:
            assert _rows(db.con, n) == plain[n], n
    for n in names:
        files = kept_files(database, KIND_PREFIX + n)
        assert len(files) == 1 and set(kept_traces(files[0])) == set(ids), n
        with duckdb.connect() as con:  # each file: the view's columns and types (JSON stored as its text)
            as_text = [(c, "VARCHAR" if t == "JSON" else t) for c, t in types[n]]
            assert _types(con, f"read_parquet({[str(f) for f in files]})") == as_text, n
    with tr.open(database) as db:
        materialize(db.con, *names)
        for n in names:
            assert _rows(db.con, n) == plain[n], n
    # the rows come from the files: every view is empty once its files are (each has rows)
    for n in names:
        assert plain[n], n
        for f in kept_files(database, KIND_PREFIX + n):
            empty_kept_file(f)
    with tr.open(database) as db:
        materialize(db.con, *names)
        for n in names:
            assert _rows(db.con, n) == [], n
    # a file that is not Parquet: the view is computed again and its files kept again
    _clear(database)
    with tr.open(database) as db:
        materialize(db.con, "steps")
    steps_file = kept_files(database, KIND_PREFIX + "steps")[0]
    steps_file.write_bytes(b"not parquet")
    with tr.open(database) as db:
        materialize(db.con, "steps")
        assert _rows(db.con, "steps") == plain["steps"]
    (again,) = kept_files(database, KIND_PREFIX + "steps")  # the unreadable part removed
    with duckdb.connect() as con:
        assert con.execute(f"SELECT count(*) FROM read_parquet('{again}')").fetchone()[0] >= 1


def test_a_trace_missing_from_traces_keeps_its_rows(tmp_path: Path) -> None:
    """A ``traces`` row deleted by hand leaves that trace's events, and so its rows in the views:
    the kept files (which follow ``traces``) are not used then, and the rows stay the plain view's."""
    import trace_report as tr

    shared_or_skip()
    path = tmp_path / "two.duckdb"
    code, _, err = run_cli(["ingest", *(trace_file(t) for t in TRACES), "-o", path, "-q"])
    assert code == 0, err
    with tr.open(path) as db:
        materialize(db.con, "gpu_ops", "steps")  # every trace's files kept
    with duckdb.connect(str(path)) as con:
        con.execute("DELETE FROM traces WHERE trace_id = 2")
    with tr.open(path) as db:
        plain = {n: _rows(db.con, n) for n in ("gpu_ops", "steps")}
        assert {r[0] for r in plain["steps"]} == set(range(1, len(TRACES) + 1))
        materialize(db.con, "gpu_ops", "steps")
        for n, rows in plain.items():
            assert _rows(db.con, n) == rows, n


def test_a_scope_reads_its_traces_kept_rows_alone(database: Path) -> None:
    """Inside TraceDB.scope the tables hold the scoped trace's rows: those of a database holding
    that trace alone; its file is kept, and used again by the unscoped view."""
    import trace_report as tr

    _clear(database)
    with tr.open(database) as db:
        first = db.con.execute("SELECT min(trace_id) FROM traces").fetchone()[0]
        with db.scope([first]):
            plain = {n: _rows(db.con, n) for n in PER_TRACE_VIEWS}
            with materialized(db.con, sorted(PER_TRACE_VIEWS)):
                for n in PER_TRACE_VIEWS:
                    assert _rows(db.con, n) == plain[n], n
        everything = {n: _rows(db.con, n) for n in PER_TRACE_VIEWS}
        alone = {n: db.con.execute(f"SELECT * FROM {n} WHERE trace_id = {first} ORDER BY ALL").fetchall()
                 for n in PER_TRACE_VIEWS}
    assert plain == alone  # a trace's rows computed alone are its rows beside the other trace
    assert plain["steps"] and len(plain["steps"]) < len(everything["steps"])
    for n in PER_TRACE_VIEWS:
        assert [set(kept_traces(p)) for p in kept_files(database, KIND_PREFIX + n)] == [{first}], n
    with tr.open(database) as db, materialized(db.con, sorted(PER_TRACE_VIEWS)):
        for n in PER_TRACE_VIEWS:
            assert _rows(db.con, n) == everything[n], n


def test_redefined_views_keep_nothing(database: Path) -> None:
    """A notebook that redefines ``events`` gets its own rows, and no file is kept from them."""
    import trace_report as tr

    _clear(database)
    with tr.open(database) as db:
        body = db.con.execute("SELECT sql FROM duckdb_views() WHERE temporary AND view_name = 'events'").fetchone()[0]
        db.con.execute(re.sub(r"VIEW\s+events\s+AS", "VIEW all_events AS", body, count=1, flags=re.IGNORECASE))
        db.con.execute("CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM all_events WHERE dur_us > 100")
        materialize(db.con, "steps", "gpu_ops")
        assert all(d > 100 for (d,) in db.con.execute("SELECT dur_us FROM gpu_ops").fetchall())
    assert not kept_files(database, KIND_PREFIX + "steps")
    assert not kept_files(database, KIND_PREFIX + "gpu_ops")


def _names(sql: str) -> set[str]:
    """The words of ``sql`` outside comments and string literals."""
    code = re.sub(r"'(?:[^']|'')*'", "''", re.sub(r"--[^\n]*", "", sql))
    return set(re.findall(r"[A-Za-z_]\w*", code))


def test_per_trace_views_read_no_table_but_events(database: Path) -> None:
    """What makes a trace's kept rows valid under any scope and beside any other trace: each
    per-trace view, and every view it reads, names no table of the database but ``events`` (not
    ``traces``, whose rank a ``sql --write`` may change). The check can fail: ``gpu_utilization``
    reads ``traces``."""
    import trace_report as tr

    with tr.open(database) as db:
        tables = {t for (t,) in db.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "traces" in tables
    for name in PER_TRACE_VIEWS:
        for st in needed_statements([name]):
            words = _names(st.sql)
            assert not words & tables, (name, st.name, words & tables)
    # the check sees a table where a view reads one
    assert any("traces" in _names(st.sql) for st in needed_statements(["gpu_utilization"]))
    assert "gpu_utilization" not in PER_TRACE_VIEWS


def test_kernels_read_the_kept_gpu_ops(database: Path) -> None:
    """``kernels`` (read by ``kernel_steps``: the timeline, the breakdown's kernels) reads
    ``gpu_ops``: where a command keeps that as a table, the kernels come from its rows, with no
    scan of the events (half of ``kernel_steps`` on a large trace), and
    they are the same rows: every kernel event of the JSON (``kernel``, 2021's ``Kernel``), once."""
    import trace_report as tr

    expected = sum(1 for t in TRACES for e in complete_events(trace_file(t)) if e.get("cat") in KERNEL_CATS)
    with tr.open(database) as db:
        plain = _rows(db.con, "kernels")
        assert "READ_PARQUET" in _plan(db.con, "kernels")  # the events
        with materialized(db.con, ["gpu_ops", "runtime_calls"]):  # the launches: runtime calls
            kept = _rows(db.con, "kernels")
            plan = _plan(db.con, "kernels")
    assert len(plain) == expected > 0
    assert kept == plain
    assert "gpu_ops_materialized" in plan and "READ_PARQUET" not in plan


class _Recorder:
    """A connection that records the text of every statement it runs."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.texts = con, []

    def execute(self, query: str, *args: object) -> duckdb.DuckDBPyConnection:
        self.texts.append(query)
        return self.con.execute(query, *args)


def test_a_block_over_views_already_kept_checks_the_catalog_once(database: Path) -> None:
    """An analysis inside the report asks for views the report keeps already: one catalog query,
    and on exit nothing (the views' fingerprint was read and set again, 4 statements more)."""
    import trace_report as tr

    with tr.open(database) as db, materialized(db.con, ["gpu_ops", "steps"]):
        before = _rows(db.con, "gpu_ops")
        recorder = _Recorder(db.con)
        with materialized(recorder, ["gpu_ops", "steps"]):  # type: ignore[arg-type]
            inside = _rows(db.con, "gpu_ops")
        assert len(recorder.texts) == 1 and "duckdb_views()" in recorder.texts[0]
        assert before == inside == _rows(db.con, "gpu_ops")
        assert "gpu_ops_materialized" in _plan(db.con, "gpu_ops")  # still the outer block's table


def test_the_report_keeps_region_markers_before_its_timeline_reads_them(
        database: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The step timeline's regions, then the kernel regions of its step, read ``region_markers``
    (a regular expression per annotation name): kept by the report (REPORT_VIEWS), its rows are read
    once from the file beside the database; before, the timeline's query computed them from the
    events and the kernel regions kept them again. On a
    database whose breakdown rows are kept, nothing else has kept them by then."""
    import trace_report as tr
    from trace_report.present.charts import data
    from trace_report.present.report import write_report

    seen: list[bool] = []
    inner = data._region_partition

    def spy(con: duckdb.DuckDBPyConnection, window: object) -> object:
        seen.append(kept_as_table(con, "region_markers"))
        return inner(con, window)  # type: ignore[arg-type]

    monkeypatch.setattr(data, "_region_partition", spy)
    with tr.open(database) as db:  # the first report keeps the breakdown rows beside the database
        write_report(db, [str(database)], tmp_path / "first.html")
    seen.clear()
    with tr.open(database) as db:  # a new connection: nothing kept on it yet
        write_report(db, [str(database)], tmp_path / "second.html")
    assert seen and all(seen)  # one timeline per run


def test_views_are_kept_after_the_views_they_read_whatever_the_order_asked() -> None:
    """``materialized`` keeps each view after the ones it reads, so that it is computed from their
    copies: ``data_loading_intervals`` (the data-loading markers of ``region_markers``) asked for
    before ``region_markers`` computed that one from the events once more, on every trace opened
    directly. Order seen by the tables' catalog ids."""
    import trace_report as tr

    shared_or_skip()
    with tr.open(trace_file("kineto_rn50_nw4_2021jun")) as db, \
            materialized(db.con, ["data_loading_intervals", "steps", "region_markers"]):
        made = [n for (n,) in db.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE '%\\_materialized' "
            "ESCAPE '\\' ORDER BY table_oid").fetchall()]
        assert made.index("region_markers_materialized") < made.index("data_loading_intervals_materialized")


def test_the_views_kept_as_tables_are_marked_in_their_sql() -> None:
    """No hand list: advise's and the report's tables are the views whose ``CREATE`` line says
    ``a table in advise, report`` (or ``report``); the marks name commands that exist."""
    from trace_report.cli.app import COMMAND_ORDER

    marked: dict[str, set[str]] = {}
    for st in statements():
        found = TABLE_MARKER.search(st.sql.partition("\n")[0])
        for command in found.group(1).split(", ") if found else ():
            marked.setdefault(command, set()).add(st.name)
    assert set(marked) == {"advise", "report"} and set(marked) <= set(COMMAND_ORDER)
    assert set(SHARED_VIEWS) == marked["advise"] == set(kept_for("advise"))
    assert set(REPORT_VIEWS) == marked["report"] and set(SHARED_VIEWS) < set(REPORT_VIEWS)
    assert {"gpu_ops", "steps", "kernel_classes", "gpu_utilization"} <= set(SHARED_VIEWS)
    assert {"op_costs", "region_markers"} <= set(REPORT_VIEWS) - set(SHARED_VIEWS)


def test_the_marked_views_are_tables_for_the_block_only() -> None:
    con = duckdb.connect()
    create_schema(con, with_views=True)
    with materialized(con, kept_for("report")):
        assert all(kept_as_table(con, n) for n in REPORT_VIEWS)
    assert not any(kept_as_table(con, n) for n in REPORT_VIEWS)
