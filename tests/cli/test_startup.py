"""Start-up stays light: importing the CLI, and ``top-kernels`` on a database, load
neither pandas nor pyarrow nor numpy (nor altair, torch, hta, ncu_report); the rows printed
without pandas are the ones a plain pass over the trace gives, and notebooks still get frames
with the dtypes DuckDB's ``.df()`` gives. Not timed: docs/benchmarks.md has the timings."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import REPO, CliResult, invoke, run_cli, trace_file
from test_cli import plain_gpu_ops

import trace_report as tr
from trace_report.analyses.top_kernels import CPU_COLUMNS, TopKernelsOptions, cpu_self_time, top_kernels_sql
from trace_report.formats.schema import EVENTS_SCHEMA
from trace_report.present.format import Format
from trace_report.present.tables import render
from trace_report.store.database import create_schema
from trace_report.store.events_view import EVENTS_COLUMNS
from trace_report.store.runs import RUN_COLUMNS, attach_runs
from trace_report.store.views import sql_text

HEAVY = ("pandas", "pyarrow", "numpy", "altair", "torch", "hta", "ncu_report", "vl_convert", "ray")


def _modules_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=False)
    loaded = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
    return [m for m in loaded.split(",") if m]


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    trace = trace_file("hta_ns_resolution")
    db = tmp_path_factory.mktemp("startup") / "small.duckdb"
    code, _, err = run_cli(["ingest", str(trace), "-o", str(db)])
    assert code == 0, err
    return trace, db


def test_import_cli_loads_no_heavy_module() -> None:
    assert _modules_after("import trace_report.cli.app") == []


def test_the_start_of_an_ingest_loads_no_duckdb(tmp_path: Path) -> None:
    """``trace-report ingest`` resolves, locks and submits a new database's jobs before DuckDB is
    imported (:mod:`trace_report.ingest.start`): it loads while they run."""
    traces = sorted(map(str, (REPO / "traces" / "h100-2026-11-25").glob("*/*.pt.trace.json.gz")))
    probe = ("import sys\nfrom pathlib import Path\nfrom trace_report.ingest import start\n"
             "start.PARALLEL_MIN_BYTES = 0  # decoding threads for these small traces too\n"
             f"paths, db = [Path(p) for p in {traces!r}], Path({str(tmp_path / 'new.duckdb')!r})\n"
             "with start.begin_ingest(paths, db, lambda path: []) as started:\n"
             "    print(len(started.early.futures), 'duckdb' in sys.modules)\n"
             "    raise SystemExit(0)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    jobs, loaded = out.stdout.split()
    assert int(jobs) == 4 and loaded == "False"
    assert not list(tmp_path.rglob("*.parquet"))  # left by SystemExit: the pieces written are removed


def test_import_cli_loads_no_rich() -> None:
    """stderr lines are written without rich (a visible part of start-up); rich loads for tables and bars."""
    probe = "import sys, trace_report.cli.app\nprint('rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_messages_cannot_drive_the_terminal(tmp_path: Path) -> None:
    missing = tmp_path / "a\x1b[2Jb\rc\x07.json"  # clear screen, carriage return, bell in a file name
    code, _, err = run_cli(["ingest", str(missing), "-o", str(tmp_path / "x.duckdb")])
    assert code == 1
    line = err.strip().splitlines()[-1]
    assert line.startswith("Error: ") and "a\\x1b[2Jb\\x0dc\\x07.json" in line  # shown as escapes
    assert not {"\x1b", "\r", "\x07"} & set(err)


UNUSED_BY_TOP_KERNELS = ("trace_report.capture", "trace_report.ingest", "trace_report.analyses.breakdown",
                         "trace_report.analyses.common.distributed", "trace_report.formats.nsys")
"""Packages and modules ``top-kernels`` on a database does not use: the capture
layer (its config compiles the secret patterns), the ingest (``--engine local`` reads the
database as it is; the SHA-256 of traces ahead is not started for a database), other analyses."""


def test_top_kernels_on_a_database_loads_no_heavy_module(small_db: tuple[Path, Path]) -> None:
    """Nor any other command's module, nor the layers it does not use (:data:`UNUSED_BY_TOP_KERNELS`):
    ``trace-report COMMAND`` imports that command's module alone (cli.app.load_commands)."""
    trace, db = small_db
    code = ("import io, json, contextlib\nfrom trace_report.cli.app import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            f"    try: main(['top-kernels', {str(db)!r}, '-n', '5', '-f', 'json'])\n"
            "    except SystemExit as exc: assert not exc.code, exc.code\n"
            "print(buf.getvalue())")
    probe = (f"{code}\nimport sys\n"
             "print('ours:', *sorted(m for m in sys.modules if m.startswith('trace_report.')), file=sys.stderr)\n"
             f"print('heavy:', *(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    *_, ours, heavy = out.stderr.strip().splitlines()
    assert heavy == "heavy:", out.stderr
    loaded = ours.split()[1:]
    commands = {m for m in loaded if m.startswith("trace_report.cli.")}
    cli = ("app", "declared", "options", "registry")
    assert commands == {f"trace_report.cli.{m}" for m in cli}
    unused = [m for m in loaded if any(m == u or m.startswith(f"{u}.") for u in UNUSED_BY_TOP_KERNELS)]
    assert unused == []
    rows = json.loads(out.stdout)
    expected = plain_gpu_ops(trace)  # kernels, memcpy and memset, per (kind, name)
    ranked = sorted(expected.items(), key=lambda kv: (-kv[1][1], kv[0][1], kv[0][0]))[:5]
    assert [(r["kind"], r["name"]) for r in rows] == [k for k, _ in ranked]
    for row in rows:
        n, t = expected[row["kind"], row["name"]]
        assert (row["count"], row["total_us"]) == (n, pytest.approx(t))


@pytest.mark.parametrize("by_rank", [False, True])
def test_notebook_frame_has_the_dtypes_of_duckdb_df(small_db: tuple[Path, Path], by_rank: bool) -> None:
    _, path = small_db
    with tr.open(path) as db:
        frame = db.top_kernels(limit=10, by_rank=by_rank)
        cols = (["rank"] if by_rank else []) + ["name", "count", "total_us", "mean_us", "min_us", "max_us",
                                                 "pct_of_gpu_time", "kind"]
        old = db.con.execute(top_kernels_sql(False), {"rank": None, "by_rank": by_rank, "limit": 10,
                                                      "trace_ids": None}).df()
        old = old[cols].astype({"count": "int64", **({"rank": "int64"} if by_rank else {})})
        pd.testing.assert_frame_equal(frame, old)
        result = db.top_kernels_result(limit=10, by_rank=by_rank)  # rows and frame of one query
        # (two runs of a query can differ in the last bits of a sum: DuckDB adds in parallel)
        for fmt in Format:
            assert render(result.rows, fmt, "t") == render(result.frame, fmt, "t"), fmt


def test_cpu_fallback_rows_print_as_the_frame() -> None:
    with tr.open(trace_file("hta_cpu_only")) as db:
        result = db.top_kernels_result(limit=8)
        assert result.note and len(result.rows) >= 1
        old = cpu_self_time(db.con, TopKernelsOptions(limit=8))[CPU_COLUMNS].astype({"count": "int64"})
        pd.testing.assert_frame_equal(result.frame, old.reset_index(drop=True))
        for fmt in Format:
            assert render(result.rows, fmt) == render(result.frame, fmt), fmt
        assert pd.read_csv(io.StringIO(render(result.rows, Format.csv)))["count"].dtype == "int64"


def test_empty_events_view_has_the_arrow_schema_columns() -> None:
    con = duckdb.connect()
    con.register("arrow_empty", EVENTS_SCHEMA.empty_table())
    arrow_cols = [(n, t) for n, t, *_ in con.execute("DESCRIBE arrow_empty").fetchall()]
    assert arrow_cols == EVENTS_COLUMNS
    con = duckdb.connect()
    create_schema(con, with_views=True)  # what a database without traces gets
    attach_runs(con, [])
    assert [(n, t) for n, t, *_ in con.execute("DESCRIBE events").fetchall()] == EVENTS_COLUMNS
    runs = dict((n, t) for n, t, *_ in con.execute("DESCRIBE runs").fetchall())
    assert list(runs) == RUN_COLUMNS and runs["run_key"] == "VARCHAR" and runs["seed"] == "BIGINT"
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_ingest_loads_no_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas on its first ``pa.array`` of a list and its first type inference
    (time and tens of MB per process); the ingest command and each decoding worker skip that
    (sysutil.skip_pandas_probe), and pyarrow's own pandas conversions still work afterwards.
    The command also has Arrow allocate with malloc (sysutil.system_arrow_allocator)."""
    trace = trace_file("hta_ns_resolution")
    db = tmp_path / "t.duckdb"
    code = ("from trace_report.cli.app import main\n"
            f"try: main(['ingest', {str(trace)!r}, '-o', {str(db)!r}, '--workers', '1', '-q'])\n"
            "except SystemExit as exc: assert not exc.code, exc.code\n"
            "import sys; print('pandas' in sys.modules)\n"
            "import pyarrow as pa, pandas as pd\n"
            "print(pa.default_memory_pool().backend_name)\n"
            "frame = pd.DataFrame({'a': [1, None], 'b': ['x', None]})\n"
            "back = pa.Table.from_pandas(frame).to_pandas()\n"
            "print(back['a'].isna().tolist(), back['b'].isna().tolist(), pa.array(pd.Series([1.0, None])).null_count)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    # and Arrow allocates with malloc (sysutil.system_arrow_allocator)
    assert out.stdout.split("\n")[:3] == ["False", "system", "[False, True] [False, True] 1"], \
        out.stdout + out.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM traces").fetchone() == (1,)


def test_ingest_loads_no_pyarrow_compute(tmp_path: Path) -> None:
    """``import pyarrow.compute`` costs 25-30 ms of every ingest's serial start: the ingest calls
    Arrow's functions through trace_report.arrowcalls instead. This project's own gzip captures,
    through the command (small: decoded in its own thread) and on two decoding threads (one
    whole-file job per trace, the path of a folder of ranks)."""
    traces = str(REPO / "traces")
    code = ("from trace_report.cli.app import main\n"
            f"try: main(['ingest', {traces!r}, '-o', {str(tmp_path / 'a.duckdb')!r}, '-q'])\n"
            "except SystemExit as exc: assert not exc.code, exc.code\n"
            "from pathlib import Path\n"
            "from trace_report.ingest.engine import ThreadEngine\n"
            "from trace_report.ingest.pipeline import ingest_to_database\n"
            f"ingest_to_database([Path({traces!r})], Path({str(tmp_path / 'b.duckdb')!r}), engine=ThreadEngine(2))\n"
            "import sys; print('pyarrow.compute' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
    for name in ("a.duckdb", "b.duckdb"):
        with duckdb.connect(str(tmp_path / name), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM traces").fetchone()[0] >= 4


def test_decoding_worker_loads_no_pandas() -> None:
    trace = trace_file("hta_ns_resolution")
    code = ("from pathlib import Path\nfrom trace_report.ingest.engine import _worker_init\n"
            "import os\n_worker_init(os.getppid())\n"
            "from trace_report.ingest.decoding import Job, run_job\n"
            f"result = run_job(Job('file', 1, 0, 'x', path=Path({str(trace)!r})))\n"
            "assert result.ok and result.table.num_rows > 0, result\n"
            "import sys; print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def _full_app(args: list[str]) -> tuple[int, str, str]:
    """``trace-report ARGS`` through the app with every command registered (no main())."""
    from trace_report.cli.app import app, run

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(lambda: app(args=args, standalone_mode=False, prog_name="trace-report"))
    return code, out.getvalue(), err.getvalue()


def test_a_command_run_alone_parses_and_helps_as_in_the_full_app() -> None:
    """main() imports and registers only the command named first (typer builds every registered
    command on each start); its help and usage errors are those of the full app, and all commands
    loaded are registered again afterwards."""
    from trace_report.cli.app import COMMAND_ORDER, app
    from trace_report.declare import commands

    every = sorted({*COMMAND_ORDER, *commands()})
    for args in (["top-kernels", "--help"], ["ingest", "--help"], ["top-kernels", "--bogus"],
                 ["kernel-variance", "--help"], ["breakdown"], ["--help"], ["no-such-command"]):
        alone = invoke(args)
        code, out, err = _full_app(args)
        assert (alone.exit_code, alone.stdout, alone.stderr) == (code, out, err), args
        assert sorted(c.name for c in app.registered_commands) == every
    assert all(name in invoke(["--help"]).stdout for name in every)


def test_the_console_script_exits_without_teardown_and_loses_no_output(tmp_path: Path) -> None:
    """Run as a program, ``main()`` ends with ``os._exit`` after flushing (cli.app._exit_now):
    every row still reaches a pipe, a closed pipe (| head) is no error, and exit codes and the
    one ``Error:`` line are those of the command."""
    db = tmp_path / "t.duckdb"
    assert invoke(["ingest", trace_file("hta_ns_resolution"), "-o", db, "-q"]).exit_code == 0
    cmd = [sys.executable, "-m", "trace_report.cli.app"]
    out = subprocess.run([*cmd, "sql", str(db), "SELECT range AS i FROM range(200000)", "-f", "csv"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "i" and len(lines) == 200_001 and lines[-1] == "199999"
    piped = subprocess.run(f"'{sys.executable}' -m trace_report.cli.app sql '{db}' "
                           "'SELECT range FROM range(500000)' -f csv | head -2", shell=True,
                           capture_output=True, text=True, cwd=REPO)
    assert piped.stdout.splitlines() == ["range", "0"] and "Traceback" not in piped.stderr
    bad = subprocess.run([*cmd, "top-kernels", str(tmp_path / "absent.duckdb")], capture_output=True, text=True,
                         cwd=REPO)
    assert bad.returncode == 1 and bad.stderr.startswith("Error: ") and len(bad.stderr.splitlines()) == 1


TOP_KERNELS_VIEWS = {"events", "gpu_ops"}
"""What top_kernels.sql reads (``gpu_ops``; the CPU fallback ``events``)."""
STEPS_ONLY_VIEWS = {"events", "gpu_ops", "steps", "steps_only_gpu_ops", "gpu_op_launches_hta", "gpu_op_launches",
                    "last_step_starts", "gpu_op_kinds", "gpu_op_kind_names", "runtime_calls"}
"""With ``--steps-only``: top_kernels.sql over ``steps_only_gpu_ops``, ``steps`` (its check) and the
views those read, by hand from store/sql/views.sql and views_comm.sql."""


def _temp_views(con: duckdb.DuckDBPyConnection, column: str = "view_name", listing: str = "duckdb_views()") -> set[str]:
    """The names of the connection's TEMP views (or of what ``listing`` lists in the TEMP catalog)."""
    return {n for (n,) in con.execute(f"SELECT {column} FROM {listing} WHERE database_name = 'temp'").fetchall()}


def _temp_views_of_top_kernels(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], CliResult]:
    """The TEMP views on the connection of ``trace-report top-kernels ARGS``, as it closes, and
    what the command printed."""
    from trace_report.store.tracedb import TraceDB

    seen: set[str] = set()
    close = TraceDB.close

    def closing(db: TraceDB) -> None:
        seen.update(_temp_views(db.con))
        close(db)

    monkeypatch.setattr(TraceDB, "close", closing)
    return seen, invoke(["top-kernels", *args])


def test_top_kernels_on_a_database_creates_only_the_views_it_reads(small_db: tuple[Path, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding every analysis view (~60) was most of the command's start-up on a small database;
    it makes those it reads alone. The notebook handle still gets them all."""
    _, db = small_db
    views, result = _temp_views_of_top_kernels([str(db), "-n", "3", "-f", "json"], monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert views == TOP_KERNELS_VIEWS and len(json.loads(result.stdout)) == 3
    views, result = _temp_views_of_top_kernels([str(db), "-n", "3", "--steps-only", "-f", "json"], monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert views == STEPS_ONLY_VIEWS and len(json.loads(result.stdout)) == 3
    with tr.open(db) as handle:
        every = _temp_views(handle.con)
    assert every > TOP_KERNELS_VIEWS and {"regions", "kernel_classes", "gpu_utilization", "launch_bound"} <= every


def _same_rows(a: str, b: str) -> bool:
    """Two JSON outputs hold the same rows (floats to 1e-9: DuckDB sums in parallel pieces)."""
    rows_a, rows_b = json.loads(a), json.loads(b)
    return len(rows_a) == len(rows_b) and all(
        x.keys() == y.keys() and all(x[k] == (pytest.approx(y[k], rel=1e-9) if isinstance(y[k], float) else y[k])
                                     for k in x)
        for x, y in zip(rows_a, rows_b, strict=True))


def _check_same_as_with_every_view(db: Path, options: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    for opts in options:
        few = invoke(["top-kernels", str(db), *opts, "-f", "json"])
        with monkeypatch.context() as m:
            m.setattr(TopKernelsOptions, "views", lambda self: None)  # every view, as before commands asked for theirs
            every = invoke(["top-kernels", str(db), *opts, "-f", "json"])
        assert (few.exit_code, few.stderr) == (every.exit_code, every.stderr), opts
        assert few.exit_code or _same_rows(few.stdout, every.stdout), opts


def test_top_kernels_with_its_views_alone_prints_what_it_did_with_all(small_db: tuple[Path, Path],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _, db = small_db
    _check_same_as_with_every_view(db, [["--steps-only", "--by-rank", "-n", "3"], ["--kernels-only", "--rank", "0"],
                                        ["--rank", "7"]], monkeypatch)


@pytest.mark.slow
def test_top_kernels_with_its_views_alone_on_runs_ncu_and_cpu_only(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Several capture runs (run.json: the run tables, a scope per run), Nsight Compute tables
    beside them, and a trace without GPU operations (the CPU fallback)."""
    runs, cpu = tmp_path / "runs.duckdb", tmp_path / "cpu.duckdb"
    assert invoke(["ingest", REPO / "traces" / "h100-2026-11-25", "-o", runs, "-q"]).exit_code == 0
    assert invoke(["ingest", trace_file("hta_cpu_only"), "-o", cpu, "-q"]).exit_code == 0
    _check_same_as_with_every_view(runs, [[], ["--merge-runs", "--steps-only"], ["--run", "ddp", "--by-rank"],
                                          ["--run", "nope"], ["--kernels-only", "-n", "2"]], monkeypatch)
    _check_same_as_with_every_view(cpu, [[], ["--by-rank", "-n", "4"]], monkeypatch)
    views, result = _temp_views_of_top_kernels([str(runs), "-n", "1"], monkeypatch)
    assert result.exit_code == 0 and views == TOP_KERNELS_VIEWS  # no roofline views over the ncu tables


def _created_alone(name: str) -> set[str]:
    """What ``create_views(con, [name])`` makes on a database without traces (views, macros and
    tables of the TEMP catalog). ``name``, a view, is then bound (views are created unbound,
    ``views.deferred``): an object it reads that was not created is a Catalog Error."""
    from trace_report.store.events_view import empty_events_view
    from trace_report.store.views import create_views

    with duckdb.connect() as con:
        create_schema(con)
        con.execute(sql_text("tables_ncu.sql"))
        empty_events_view(con)
        create_views(con, [name])
        if name in _temp_views(con):
            con.execute(f"SELECT * FROM {name} LIMIT 0").fetchall()
        return _temp_views(con) | _temp_views(con, "function_name", "duckdb_functions()") | \
            _temp_views(con, "table_name", "duckdb_tables()")


def test_a_view_created_alone_gets_every_view_it_reads() -> None:
    """create_views(only=...) finds what a view reads in its SQL: views, macros (``kernel_classes``
    reads ``gpu_op_names`` through a table macro given its name), the ncu views over the ncu tables;
    and makes no more: ``steps`` alone is ``steps``."""
    from trace_report.store.views import create_views

    assert _created_alone("steps") == {"events", "steps"}
    assert _created_alone("steps_only_gpu_ops") == STEPS_ONLY_VIEWS
    assert {"kernel_class_rules", "kernel_class_matches", "kernel_classes_of", "gpu_op_names", "gpu_ops"} < \
        _created_alone("kernel_classes")
    assert {"roof_for", "roof_bound", "roof_pct", "roofline_peaks", "ncu_launch_basics"} < _created_alone("roofline")
    with duckdb.connect() as con, pytest.raises(ValueError, match="no view or macro named nope"):
        create_views(con, ["nope"])


@pytest.mark.slow
def test_every_view_created_alone_gets_every_view_it_reads() -> None:
    from trace_report.store.views import statements

    names = [s.name for s in statements()]
    assert len(names) == len(set(names)) > 50
    for name in names:
        assert name in _created_alone(name)


def test_the_console_script_tunes_the_collector_before_the_app_imports() -> None:
    """The ``trace-report`` script (``trace_report.cli.entry``) raises the youngest generation's
    threshold before typer, DuckDB and the command modules load (their objects live until exit:
    the default threshold walked them again and again, a tenth of ``breakdown`` on a large
    database); a program that calls ``app.main`` itself keeps its own thresholds."""
    import tomllib

    from trace_report.sysutil import GC_YOUNG_THRESHOLD

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["trace-report"] == "trace_report.cli.entry:main"
    code = ("import gc, sys, importlib.abc\n"
            "class Watch(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name in ('typer', 'duckdb', 'trace_report.cli.app'):\n"
            "            print(name, gc.get_threshold()[0], flush=True)\n"
            "sys.meta_path.insert(0, Watch())\n"
            "sys.argv = ['trace-report', '--version']\n"
            "from trace_report.cli.entry import main\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    watched = ("typer", "trace_report.cli.app")
    lines = dict(line.split() for line in out.stdout.splitlines() if line.split()[0] in watched)
    assert out.returncode == 0 and "trace-report " in out.stdout, out.stderr
    assert lines == {"trace_report.cli.app": str(GC_YOUNG_THRESHOLD), "typer": str(GC_YOUNG_THRESHOLD)}
    library = subprocess.run([sys.executable, "-c", "import gc\nfrom trace_report.cli.app import main\n"
                              "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\nprint(gc.get_threshold())"],
                             capture_output=True, text=True, cwd=REPO, check=False)
    assert library.stdout.strip().splitlines()[-1] == "(700, 10, 10)", library.stderr
