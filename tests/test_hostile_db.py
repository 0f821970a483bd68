"""A database is untrusted input; outputs never land on sources; an ingest stores one version of a file.

Each test changes a real database the way a hostile pass did (through ``sql --write`` or DuckDB
itself) and checks: one ``Error:`` line, no traceback, nothing read or deleted outside the
database's folders, the sources unchanged. Kernel counts are checked against a plain pass over
the trace's JSON.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import TRACES, invoke, shared_or_skip

SOURCE = "hta_a100_ddp_nccl/nccl_data.json.gz"


def one_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(("warning:", "note:"))]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


GPU_OPS = ("kernel", "gpu_memcpy", "gpu_memset")


def gpu_ops(trace: Path) -> int:
    """Kernels, memory copies and sets of the trace (``top-kernels``' rows), read from the JSON
    without trace-report."""
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    return sum(1 for e in events if isinstance(e, dict) and e.get("cat") in GPU_OPS and e.get("ph") == "X")


def counted(stdout: str) -> int:
    """The GPU operations ``top-kernels -f json`` counts (every row)."""
    return sum(r["count"] for r in json.loads(stdout))


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared_or_skip()
    folder = tmp_path_factory.mktemp("source")
    trace = folder / "t.json.gz"
    shutil.copyfile(TRACES / SOURCE, trace)
    db = folder / "db.duckdb"
    assert invoke(["ingest", trace, "-o", db]).exit_code == 0
    return db


@pytest.fixture()
def db(ingested: Path, tmp_path: Path) -> Path:
    """A copy of the ingested database (file and events folder) for one test; traces.path still
    names the module's trace."""
    out = tmp_path / "db.duckdb"
    shutil.copyfile(ingested, out)
    shutil.copytree(ingested.with_name(ingested.name + ".events"), tmp_path / "db.duckdb.events")
    return out


def source_of(db: Path) -> Path:
    with duckdb.connect(str(db), read_only=True) as con:
        return Path(con.execute("SELECT path FROM traces").fetchall()[0][0])


def change(db: Path, *sql: str) -> None:
    """What another program (the DuckDB shell) may do to the file."""
    with duckdb.connect(str(db), config={"autoinstall_known_extensions": False}) as con:
        for statement in sql:
            con.execute(statement)


# ------------------------------------------------------------------ H1: the catalog


@pytest.mark.parametrize("macro", [
    "CREATE MACRO avg(x, p := '/etc/passwd') AS (SELECT content FROM read_text(p))",
    "CREATE MACRO sum(x) AS 42",
    "CREATE MACRO count(x) AS 7",
    "CREATE MACRO round(x, n) AS 0",
    "CREATE MACRO lower(x) AS 'forged'",
    "CREATE MACRO regexp_matches(x, p) AS true",
    "CREATE MACRO avg(x, u := 'https://example.invalid/x') AS (SELECT content FROM read_text(u))",
    "CREATE FUNCTION main.helper(x) AS x + 1",
    "CREATE MACRO rows_of() AS TABLE SELECT 1",
    "CREATE TYPE ts_us AS VARCHAR",
    "CREATE TABLE log (n INT); CREATE TRIGGER piece_added AFTER INSERT ON event_files FOR EACH STATEMENT "
    "INSERT INTO log VALUES (1)",
])
def test_a_macro_in_the_database_is_refused_by_every_command(db: Path, macro: str) -> None:
    change(db, *macro.split(";"))
    words = macro.split(";")[-1].split("(")[0].split()
    kind = next(w for w in words if w in ("MACRO", "FUNCTION", "TYPE", "TRIGGER"))
    name = words[words.index(kind) + 1].split(".")[-1]
    for args in (["top-kernels", db, "-f", "json"], ["breakdown", db], ["sql", db, "SELECT 1"]):
        result = invoke(args)
        assert result.exit_code == 1, result.output
        line = one_error(result.stderr)
        assert f"main.{name}" in line and "did not create" in line
        assert "root:" not in result.stdout


@pytest.mark.parametrize("script", [
    "CREATE MACRO avg(x) AS 1",
    "CREATE OR REPLACE TEMP MACRO lower(x) AS 'forged'",
    "CREATE FUNCTION f(x) AS x",
    "CREATE TYPE rank AS VARCHAR",
    "CREATE TRIGGER t AFTER DELETE ON event_files FOR EACH STATEMENT DELETE FROM traces",
    "CREATE TABLE notes AS SELECT 1 AS n; CREATE OR REPLACE MACRO sum(x) AS 1",
])
def test_sql_write_creates_no_macro_function_or_type(db: Path, script: str) -> None:
    before = digest(db)
    result = invoke(["sql", db, script, "--write"])
    assert result.exit_code == 1
    assert "is not allowed" in one_error(result.stderr)
    assert digest(db) == before


@pytest.mark.parametrize(("script", "named"), [
    ("CREATE VIEW kernels AS SELECT 1 AS name", "view kernels"),
    ("CREATE TABLE events AS SELECT 1 AS x", "table events"),
    ("ALTER TABLE traces DROP COLUMN rank", "traces without its column rank"),
    ("ALTER TABLE traces ALTER rank TYPE VARCHAR", "traces.rank of type VARCHAR"),
    ("UPDATE traces SET rank = NULL", "have no trace_id or rank"),
    ("INSERT INTO event_files VALUES (1, '/elsewhere/notes.txt', 0)", "outside its events folder"),
])
def test_what_commands_refuse_is_rolled_back_by_sql_write(db: Path, script: str, named: str) -> None:
    before = digest(db)
    result = invoke(["sql", db, script, "--write"])
    assert result.exit_code == 1, result.output
    assert named in one_error(result.stderr)
    assert digest(db) == before
    change(db, script)  # the same change made by another program: every command refuses it
    result = invoke(["top-kernels", db, "-f", "json"])
    assert result.exit_code == 1 and named in one_error(result.stderr)


def test_tables_and_views_of_the_users_own_are_kept(db: Path) -> None:
    script = "CREATE TABLE notes AS SELECT 1 AS n; CREATE VIEW long_kernels AS SELECT * FROM kernels WHERE dur_us > 100"
    assert invoke(["sql", db, script, "--write"]).exit_code == 0
    result = invoke(["top-kernels", db, "-f", "json", "-n", "1000"])
    assert result.exit_code == 0, result.output
    assert counted(result.stdout) == gpu_ops(source_of(db))


def test_every_command_reads_no_file_outside_its_events_folder(db: Path) -> None:
    change(db, "CREATE VIEW secret AS SELECT content FROM read_text('/etc/hostname')")
    from trace_report.store.handle import open_database

    with open_database(db) as handle:
        assert handle.con.execute("SELECT current_setting('enable_external_access')").fetchall() == [(False,)]
        with pytest.raises(duckdb.PermissionException):
            handle.con.execute("SELECT * FROM secret").fetchall()
        with pytest.raises(duckdb.Error):
            handle.con.execute("SET enable_external_access = true")
    assert invoke(["top-kernels", db, "-n", "1"]).exit_code == 0  # a view of the user's own: left alone


# ------------------------------------------------------------------ H2, M8: event_files


def test_event_files_outside_the_folder_are_refused_and_nothing_is_deleted(db: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    notes = elsewhere / "notes.txt"
    notes.write_text("mine")
    victim = tmp_path / "victim"
    victim.mkdir()
    piece = next((tmp_path / "db.duckdb.events").glob("*.parquet"))
    important = victim / "important.parquet"
    shutil.copyfile(piece, important)  # a real Parquet file: read, it would double the kernels
    change(db, f"INSERT INTO event_files VALUES (1, '{notes}', 0), (1, '../victim/important.parquet', 0)")
    result = invoke(["top-kernels", db, "-f", "json"])
    assert result.exit_code == 1 and "outside its events folder" in one_error(result.stderr)
    result = invoke(["ingest", source_of(db), "-o", db, "--force"])
    assert result.exit_code == 1 and "outside its events folder" in one_error(result.stderr)
    assert notes.read_text() == "mine" and important.is_file()


def test_an_event_file_that_is_not_parquet_is_one_error(db: Path, tmp_path: Path) -> None:
    shutil.copyfile(source_of(db), tmp_path / "db.duckdb.events" / "zz.bin")  # read after the real pieces
    change(db, "INSERT INTO event_files VALUES (1, 'zz.bin', 0)")
    for args in (["top-kernels", db], ["breakdown", db]):
        result = invoke(args)
        assert result.exit_code == 1 and "zz.bin is damaged" in one_error(result.stderr)


# ------------------------------------------------------------------ H4: the derived folder


def test_a_derived_folder_linked_elsewhere_is_neither_written_nor_pruned(db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    keep = other / "x-t000001-00000000-000000000000.parquet"
    keep.write_text("mine")
    derived = tmp_path / "db.duckdb.events" / "derived"
    shutil.rmtree(derived, ignore_errors=True)
    derived.symlink_to(other)
    assert invoke(["breakdown", db]).exit_code == 0
    assert sorted(p.name for p in other.iterdir()) == [keep.name]
    assert invoke(["ingest", source_of(db), "-o", db, "--force"]).exit_code == 0
    assert keep.read_text() == "mine"


# ------------------------------------------------------------------ H3: outputs


def test_outputs_never_replace_a_recorded_trace_or_land_in_an_events_folder(db: Path, tmp_path: Path) -> None:
    source = source_of(db)
    before = digest(source)
    link = tmp_path / "link.json.gz"
    link.symlink_to(source)
    for args in (["slice", db, "--steps", "5", "-o", source], ["slice", db, "--steps", "5", "-o", link],
                 ["hta", "temporal", db, "-o", source, "-f", "csv"],
                 ["top-kernels", db, "-o", source, "-f", "csv"]):
        result = invoke(args)
        assert result.exit_code == 2, result.output
        assert "recorded in the input database" in one_error(result.stderr)
    assert digest(source) == before
    events = tmp_path / "db.duckdb.events"
    for args in (["memory", db, "--chart", events / "m.html"], ["top-kernels", db, "-o", events / "derived" / "x.csv"],
                 ["export", db, "-o", events / "ds"]):
        result = invoke(args)
        assert result.exit_code == 2, result.output
        assert "the events folder of the" in one_error(result.stderr)
    assert not (events / "m.html").exists() and not (events / "ds").exists()


def test_sql_on_a_trace_with_write_leaves_no_lock_file(tmp_path: Path) -> None:
    shared_or_skip()
    trace = tmp_path / "t.json.gz"
    shutil.copyfile(TRACES / SOURCE, trace)
    assert invoke(["sql", trace, "CREATE TABLE x AS SELECT 1 AS a", "--write"]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json.gz"]


# ------------------------------------------------------------------ M9: a file changed while read


def test_a_trace_replaced_while_it_is_read_stores_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    trace = tmp_path / "t.json.gz"
    shutil.copyfile(TRACES / SOURCE, trace)
    newer = tmp_path / "newer.json.gz"
    shutil.copyfile(TRACES / "hta_amd_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz", newer)
    from trace_report.ingest.pipeline import Ingest

    finish = Ingest._finish

    def replaced_midway(self: Ingest, *args: object, **kwargs: object) -> None:
        if newer.exists():
            os.replace(newer, trace)  # an atomic rename by the profiler, once the old bytes are decoded
        finish(self, *args, **kwargs)

    monkeypatch.setattr(Ingest, "_finish", replaced_midway)
    db = tmp_path / "db.duckdb"
    result = invoke(["ingest", trace, "-o", db])
    assert result.exit_code == 1
    assert "changed while it was read" in one_error(result.stderr)
    assert not db.exists() and not list((tmp_path / "db.duckdb.events").glob("*.parquet"))
    monkeypatch.undo()
    assert invoke(["ingest", trace, "-o", db]).exit_code == 0  # not "already ingested"
    result = invoke(["top-kernels", db, "-f", "json", "-n", "1000"])
    assert counted(result.stdout) == gpu_ops(trace)


# ------------------------------------------------------------------ M10: export --overwrite


def test_export_overwrite_keeps_files_it_did_not_write(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    assert invoke(["export", db, "-o", out]).exit_code == 0
    assert invoke(["export", db, "-o", out, "--overwrite"]).exit_code == 0  # its own dataset: replaced
    (out / "notes.md").write_text("mine")
    (out / "events" / "extra.parquet").write_text("mine too")
    result = invoke(["export", db, "-o", out, "--overwrite"])
    assert result.exit_code == 1 and "holds other files" in one_error(result.stderr)
    assert (out / "notes.md").read_text() == "mine" and (out / "events" / "extra.parquet").is_file()


# ------------------------------------------------------------------ kept files of another database


def test_a_kept_file_of_another_database_renamed_into_place_is_ignored(db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    trace = other / "mi250.json.gz"
    shutil.copyfile(TRACES / "hta_amd_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz", trace)
    assert invoke(["ingest", trace, "-o", other / "o.duckdb"]).exit_code == 0
    first = invoke(["breakdown", db, "-f", "json"])
    assert first.exit_code == 0 and invoke(["breakdown", other / "o.duckdb", "-f", "json"]).exit_code == 0
    derived = tmp_path / "db.duckdb.events" / "derived"
    ours = sorted(derived.glob("breakdown/*/part-*.parquet"))
    theirs = sorted((other / "o.duckdb.events" / "derived").glob("breakdown/*/part-*.parquet"))
    assert len(ours) == 1 and len(theirs) == 1
    shutil.copyfile(theirs[0], ours[0])  # the other database's rows under this one's name
    again = invoke(["breakdown", db, "-f", "json"])
    assert again.exit_code == 0 and json.loads(again.stdout) == json.loads(first.stdout)
