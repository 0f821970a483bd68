"""The ``trace-report sql`` sandbox writes no file, whatever a statement wraps.

Each known way to write (COPY TO, EXPORT, PREPARE/EXECUTE of COPY, EXPLAIN ANALYZE COPY, CREATE
TABLE AS then COPY, profiling and log output, settings, ATTACH, IMPORT, extensions) exits 1 with
one ``Error:`` line and leaves every byte of the database's folder as it was; ``--write`` scripts
are one transaction; ``--unsafe`` warns that the sandbox is off. On a database ingested from this
project's own trace (``traces/h100-2026-11-25``)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO, invoke
from trace_report.errors import InputError
from trace_report.store.sandbox import check_statements

TRACE_DIR = REPO / "traces" / "h100-2026-11-25" / "baseline"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    traces = sorted(TRACE_DIR.glob("*.pt.trace.json*")) if TRACE_DIR.is_dir() else []
    if not traces:
        pytest.skip(f"{TRACE_DIR}: no trace")
    db = tmp_path_factory.mktemp("pristine") / "db.duckdb"
    result = invoke(["ingest", traces[0], "-o", db])
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the ingested database (its file and its events folder) of this test's own."""
    out = tmp_path / "db" / pristine.name
    shutil.copytree(pristine.parent, out.parent)
    return out


def events_dir(db: Path) -> Path:
    return db.with_name(db.name + ".events")


def folder_digest(db: Path) -> dict[str, str]:
    """SHA-256 of every file in the database's folder (the database, its events folder, anything new)."""
    root = db.parent
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def piece(db: Path) -> Path:
    """The largest event piece: the kernels live there."""
    return max(events_dir(db).glob("*.parquet"), key=lambda p: p.stat().st_size)


def error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def forge(p: Path) -> str:
    """A query that would rewrite piece ``p`` with every kernel renamed FORGED and made long."""
    return (f"SELECT * REPLACE (CASE WHEN cat = 'kernel' THEN 'FORGED' ELSE name END AS name, 1e9 AS dur_us) "
            f"FROM read_parquet('{p}')")


# Each: (the SQL, given the events folder E and the largest piece P; what the one Error line says)
EXPLOITS = [
    ("COPY ({forge}) TO '{P}' (FORMAT parquet)", "a COPY statement is not allowed here (add --unsafe"),
    ("COPY events TO '{E}/new.parquet' (FORMAT parquet)", "a COPY statement is not allowed here"),
    ("EXPORT DATABASE '{E}'", "an EXPORT statement is not allowed here"),
    ("PREPARE a AS COPY ({forge}) TO '{P}' (FORMAT parquet); EXECUTE a",
     "a COPY statement inside PREPARE is not allowed here (add --unsafe"),
    ("/* c */ PREPARE /* AS SELECT 1 */ \"a\" AS /* x */ COPY ({forge}) TO '{P}'; EXECUTE \"a\"",
     "a COPY statement inside PREPARE"),
    ("PREPARE a AS SELECT 1; PREPARE a AS COPY ({forge}) TO '{P}'; EXECUTE a", "a COPY statement inside PREPARE"),
    ("EXPLAIN ANALYZE COPY ({forge}) TO '{P}' (FORMAT parquet)", "a COPY statement inside EXPLAIN"),
    ("EXPLAIN ANALYSE COPY ({forge}) TO '{P}'", "a COPY statement inside EXPLAIN"),
    ("EXPLAIN (FORMAT json, ANALYZE) COPY ({forge}) TO '{P}'", "a COPY statement inside EXPLAIN"),
    ("EXPLAIN COPY ({forge}) TO '{P}'", "a COPY statement inside EXPLAIN"),  # would not run: refused alike
    ("EXPLAIN ANALYZE COPY events TO '{E}/new.parquet'", "a COPY statement inside EXPLAIN"),
    ("EXPLAIN PREPARE a AS COPY ({forge}) TO '{P}'", "a COPY statement inside EXPLAIN"),
    ("EXPLAIN PREPARE a AS SELECT 1; EXECUTE a", "a PREPARE statement inside EXPLAIN"),
    ("CREATE TEMP TABLE t AS {forge}; COPY t TO '{P}' (FORMAT parquet)", "a CREATE statement is not allowed"),
    # a data-modifying CTE: the statement is a SELECT (or CREATE, PREPARE, EXPLAIN) that runs a COPY
    ("WITH x AS (COPY ({forge}) TO '{P}' (FORMAT parquet)) SELECT 1", "a COPY statement inside SELECT"),
    ("WITH x AS MATERIALIZED (/* c */ COPY ({forge}) TO '{P}') SELECT 1", "a COPY statement inside SELECT"),
    ("WITH x AS (WITH y AS (COPY ({forge}) TO '{P}') SELECT 1) SELECT * FROM x", "a COPY statement inside SELECT"),
    ("WITH x AS (COPY events TO '{E}/new.csv' (RETURN_FILES)) FROM x", "a COPY statement inside SELECT"),
    ("CREATE TEMP TABLE v AS WITH x AS (COPY ({forge}) TO '{P}') SELECT 1", "a COPY statement inside CREATE"),
    ("PREPARE a AS WITH x AS (COPY ({forge}) TO '{P}') SELECT 1; EXECUTE a", "a COPY statement inside PREPARE"),
    ("EXPLAIN ANALYZE WITH x AS (COPY ({forge}) TO '{P}') SELECT 1", "a COPY statement inside EXPLAIN"),
    ("SELECT 1; COPY (SELECT 1) TO '{E}/x.csv'", "a COPY statement is not allowed here"),
    ("EXECUTE a", "EXECUTE a is not allowed here: only a statement PREPAREd earlier in the same script"),
    ("SET profiling_output = '{E}/profile.json'; SET enable_profiling = 'json'; SELECT 1",
     "the configuration has been locked"),
    ("PRAGMA enable_profiling", "PRAGMA enable_profiling is not allowed here"),
    ("PRAGMA enable_profiling = 'json'", "the configuration has been locked"),  # PRAGMA x = y is a SET
    ("PRAGMA profiling_output = '{E}/profile.json'", "the configuration has been locked"),
    ("SELECT * FROM enable_profiling()", "the configuration has been locked"),
    ("SELECT * FROM enable_logging(storage = 'file', storage_path = '{E}')", "the configuration has been locked"),
    ("CALL enable_logging(storage = 'file', storage_path = '{E}')",
     "a CALL statement is not allowed here (add --write"),
    ("SET logging_sink = 'file'", "the configuration has been locked"),
    ("SET log_query_path = '{E}/queries.log'", "the configuration has been locked"),
    ("SET temp_directory = '{E}'", "the configuration has been locked"),
    ("SET allowed_directories = ['/']", "the configuration has been locked"),
    ("RESET allowed_directories", "the configuration has been locked"),
    ("SET enable_external_access = true", "the configuration has been locked"),
    ("ATTACH '{E}/other.duckdb'", "an ATTACH statement is not allowed here"),
    ("IMPORT DATABASE '{E}'", "an IMPORT statement is not allowed here"),
    ("PRAGMA import_database('{E}')", "PRAGMA import_database is not allowed here"),
    ("COPY FROM DATABASE db TO other", "a COPY statement is not allowed here"),
    ("PRAGMA copy_database('db', 'other')", "PRAGMA copy_database is not allowed here"),
    ("PRAGMA force_checkpoint", "PRAGMA force_checkpoint is not allowed here"),
    ("INSTALL httpfs", "a LOAD statement is not allowed here"),
    ("LOAD parquet", "a LOAD statement is not allowed here"),
    ("UPDATE EXTENSIONS", "a statement of a kind the sandbox does not know is not allowed here"),
    ("SELECT * FROM read_text('/etc/hostname')", "Cannot access file"),
]


def _exploit(db: Path, sql: str) -> str:
    return sql.format(forge=forge(piece(db)), P=piece(db), E=events_dir(db))


CASES = [pytest.param(sql, message, [], id=f"read-only: {sql}") for sql, message in EXPLOITS] + [
    pytest.param(sql, message, ["--write"], id=f"write: {sql}") for sql, message in EXPLOITS
    if any(word in sql for word in ("COPY", "EXPORT", "ATTACH", "CALL"))]
"""Every exploit on a database opened read-only, and those that write a file or attach one again
with --write (the database read-write, changing statements allowed)."""


@pytest.mark.parametrize(("sql", "message", "mode"), CASES)
def test_each_write_path_is_refused_and_nothing_changes(db: Path, sql: str, message: str, mode: list[str]) -> None:
    if mode and "add --write" in message:
        message = "the configuration has been locked"  # with --write, CALL runs and meets the lock
    if mode and sql.startswith("CREATE TEMP TABLE t "):
        message = "a COPY statement is not allowed here"
    before = folder_digest(db)
    result = invoke(["sql", db, _exploit(db, sql), *mode])
    assert result.exit_code == 1, result.output
    assert message in error_line(result.stderr)
    assert folder_digest(db) == before
    if "{forge}" in sql:
        assert "FORGED" not in invoke(["top-kernels", db, "--full-names", "-f", "csv"]).stdout


@pytest.mark.parametrize("sql", [
    "WITH x AS (DELETE FROM traces RETURNING *) SELECT * FROM x",
    "WITH x AS (UPDATE traces SET label = 'changed' RETURNING *) SELECT * FROM x",
    "WITH x AS (INSERT INTO event_files SELECT * FROM event_files RETURNING *) SELECT count(*) FROM x",
    "EXPLAIN ANALYZE DELETE FROM traces",
    "PREPARE d AS DELETE FROM traces; EXECUTE d",
])
def test_a_change_inside_a_query_needs_write(db: Path, sql: str) -> None:
    before = folder_digest(db)
    result = invoke(["sql", db, sql])
    assert result.exit_code == 1
    assert "not allowed here (add --write to change the database" in error_line(result.stderr)
    assert folder_digest(db) == before


def test_a_name_spelled_like_a_statement_is_quoted(db: Path) -> None:
    result = invoke(["sql", db, "SELECT 1 AS load"])
    assert result.exit_code == 1 and 'a name spelled load is to be quoted: "load"' in error_line(result.stderr)
    result = invoke(["sql", db, 'SELECT 1 AS "load", \'COPY x TO y\' AS "copy"', "-f", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == [{"load": 1, "copy": "COPY x TO y"}]


def test_the_forging_payload_is_real_under_unsafe(db: Path) -> None:
    """The same PREPARE/EXECUTE forges a kernel with --unsafe (so the refusals above are what
    protect the pieces), and --unsafe says on one stderr line that the sandbox is off."""
    result = invoke(["sql", db, _exploit(db, EXPLOITS[3][0]), "--unsafe", "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: --unsafe: the sql sandbox is off (this SQL may read and write any file, attach databases, "
        "load extensions and change settings)"]
    top = invoke(["top-kernels", db, "--full-names", "-f", "csv"])
    assert "FORGED" in top.stdout


def test_a_normal_query_still_works(db: Path) -> None:
    before = folder_digest(db)
    result = invoke(["sql", db, "SELECT count(*) AS n, count(DISTINCT name) AS names FROM events "
                                "WHERE cat = 'kernel'", "-f", "json"])
    assert result.exit_code == 0 and result.stderr == "", result.output
    [row] = json.loads(result.stdout)
    assert row["n"] > 0 and row["names"] > 0
    assert folder_digest(db) == before


@pytest.mark.parametrize("sql", [
    "PREPARE k AS SELECT name FROM kernels ORDER BY dur_us DESC LIMIT 1; EXECUTE k",
    "prepare K as select name from kernels order by dur_us desc limit 1; EXECUTE \"k\"",
    "PREPARE k AS SELECT name FROM kernels ORDER BY dur_us DESC LIMIT $1; EXECUTE k(1)",
    "PREPARE k AS SELECT name FROM kernels ORDER BY dur_us DESC LIMIT 1; EXPLAIN ANALYZE EXECUTE k",
    "EXPLAIN ANALYZE SELECT count(*) FROM events",
    "EXPLAIN (FORMAT json) SELECT count(*) FROM events",
    "EXPLAIN SELECT count(*) FROM events",
    "PRAGMA table_info('traces')",
    "PRAGMA show_tables",
    "SHOW TABLES",
    "DESCRIBE events",
    "SUMMARIZE SELECT dur_us FROM kernels",
    "SET VARIABLE n = 3; SELECT name FROM kernels LIMIT getvariable('n')",
    "BEGIN; SELECT 1 AS x; COMMIT",
])
def test_reading_statements_pass(db: Path, sql: str) -> None:
    before = folder_digest(db)
    result = invoke(["sql", db, sql, "-f", "csv"])
    assert result.exit_code == 0, result.output
    assert folder_digest(db) == before


def test_a_prepared_statement_does_not_outlive_its_invocation(db: Path) -> None:
    """Each ``sql`` opens a connection of its own; EXECUTE of a name not PREPAREd in the same
    script is refused, whatever the connection holds."""
    assert invoke(["sql", db, "PREPARE a AS SELECT 1 AS x; EXECUTE a"]).exit_code == 0
    assert "EXECUTE a is not allowed here" in error_line(invoke(["sql", db, "EXECUTE a"]).stderr)
    con = duckdb.connect()
    con.execute("PREPARE a AS SELECT 1")  # a connection used before (a notebook's)
    with pytest.raises(InputError, match="EXECUTE a is not allowed here"):
        check_statements(con, "EXECUTE a", allow_changes=False)
    check_statements(con, "PREPARE a AS SELECT 2; EXECUTE a", allow_changes=False)


# ---------------------------------------------------------------- --write: one transaction


def _tables(db: Path) -> list[str]:
    result = invoke(["sql", db, "SELECT table_name FROM duckdb_tables() ORDER BY 1", "-f", "json"])
    assert result.exit_code == 0, result.output
    return [r["table_name"] for r in json.loads(result.stdout)]


@pytest.mark.parametrize("third", [
    "INSERT INTO no_such_table VALUES (3)",        # refused when it binds
    "INSERT INTO notes SELECT error('boom')",      # fails while it runs
    "SELECT error('boom') FROM notes",             # the last statement, run when its rows are fetched
])
def test_a_write_script_that_fails_changes_nothing(db: Path, third: str) -> None:
    tables = _tables(db)
    before = folder_digest(db)
    script = f"CREATE TABLE notes AS SELECT 1 AS a; UPDATE traces SET label = 'changed'; {third}"
    result = invoke(["sql", db, script, "--write"])
    assert result.exit_code == 1
    assert error_line(result.stderr).startswith("Error: SQL failed: ")
    assert _tables(db) == tables
    assert "changed" not in invoke(["sql", db, "SELECT label FROM traces", "-f", "csv"]).stdout
    assert folder_digest(db) == before


def test_a_write_script_commits_as_a_whole(db: Path) -> None:
    result = invoke(["sql", db, "CREATE TABLE notes AS SELECT 1 AS a; INSERT INTO notes VALUES (2); "
                                "SELECT count(*) AS n FROM notes", "--write", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 2}]
    assert "notes" in _tables(db)


def test_a_write_script_has_no_transaction_statements_of_its_own(db: Path) -> None:
    before = folder_digest(db)
    result = invoke(["sql", db, "CREATE TABLE notes AS SELECT 1 AS a; COMMIT; INSERT INTO nope VALUES (1)",
                     "--write"])
    assert result.exit_code == 1
    assert "--write runs the script as one transaction" in error_line(result.stderr)
    assert folder_digest(db) == before


def test_unsafe_warns_once_and_runs(db: Path) -> None:
    out = db.parent / "x.csv"
    result = invoke(["sql", db, f"COPY (SELECT 1 AS a) TO '{out}'", "--unsafe"])
    assert result.exit_code == 0 and out.is_file()
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: --unsafe: the sql sandbox is off"), result.stderr
