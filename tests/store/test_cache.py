"""store/cache.py: the key follows every module a declared table's code imports, found without a
hand list; a database of many traces keeps one part per kind, not one file per trace; another
database's parts and a derived folder that is a symbolic link are never read.

Traces here are small constructed Kineto traces (a ProfilerStep, kernels and their launches), so
that 200 of them ingest in seconds; the expected rows are counted from the JSON written."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import kept_files, kept_traces, run_cli

import trace_report as tr
from trace_report.analyses.breakdown import breakdown
from trace_report.analyses.common.gpu_op_names import KEPT as GPU_OP_NAMES
from trace_report.store import cache
from trace_report.store.layout import DERIVED_FOLDER

N_TRACES = 200


def _trace(rank: int, kernels: int) -> dict:
    """One rank's trace: one ProfilerStep, ``kernels`` launches and kernels (10 µs each)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
               "ts": 0, "dur": 1000}]
    for i in range(kernels):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 10 + 20 * i, "dur": 5, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i % 3}", "pid": 0, "tid": 7,
                       "ts": 20 + 20 * i, "dur": 10, "args": {"correlation": i + 1, "stream": 7, "device": 0}})
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": N_TRACES},
            "traceEvents": events}


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database of :data:`N_TRACES` constructed ranks (rank r launches r % 5 + 1 kernels)."""
    folder = tmp_path_factory.mktemp("many")
    run = folder / "run"
    run.mkdir()
    for rank in range(N_TRACES):
        (run / f"rank{rank}.pt.trace.json").write_text(json.dumps(_trace(rank, rank % 5 + 1)))
    db = folder / "many.duckdb"
    code, _, err = run_cli(["ingest", str(run), "-o", str(db), "-q"])
    assert code == 0, err
    return db


def _derived_files(db: Path) -> list[Path]:
    folder = db.with_name(db.name + ".events") / DERIVED_FOLDER
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def test_many_traces_keep_one_part_per_kind(many: Path) -> None:
    with tr.open(many) as db:
        first = breakdown(db).frame
        rows = GPU_OP_NAMES.rows(db.con, list(range(1, N_TRACES + 1)))
    # the kernels of every trace, counted from the JSON written: sum over ranks of (r % 5 + 1)
    assert int(first["kernels"].sum()) == sum(r % 5 + 1 for r in range(N_TRACES))
    assert sum(rows["ops"].to_pylist()) == sum(r % 5 + 1 for r in range(N_TRACES))
    kinds = {p.relative_to(many.with_name(many.name + ".events") / DERIVED_FOLDER).parts[0]
             for p in _derived_files(many)}
    assert len(_derived_files(many)) == len(kinds) < 20  # O(kinds), not O(traces x kinds)
    (part,) = kept_files(many, "breakdown")
    assert len(kept_traces(part)) == N_TRACES
    with tr.open(many) as db:  # the second run reads the part and gives the same rows
        assert breakdown(db).frame.equals(first)
    assert len(_derived_files(many)) == len(kinds)


def test_the_key_changes_with_any_module_the_compute_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    module = "trace_report.analyses.common.breakdown_regions"
    imported = cache.source_modules(module)
    assert "trace_report.analyses.common.intervals" in imported  # imported, not listed by hand
    assert "trace_report.store.views" in imported  # transitively
    assert "trace_report.cli.app" not in imported
    before = cache.code_key(module)
    read = cache._read_source
    target = imported["trace_report.analyses.common.intervals"]
    monkeypatch.setattr(cache, "_read_source", lambda p: read(p) + (b"# changed" if p == target else b""))
    assert cache.code_key(module) != before
    sql = Path(str(imported["trace_report.store.views"])).parent / "sql" / "views_regions.sql"
    monkeypatch.setattr(cache, "_read_source", lambda p: read(p) + (b"-- changed" if p == sql else b""))
    assert cache.code_key(module) != before
    monkeypatch.setattr(cache, "_read_source", read)
    assert cache.code_key(module) == before


def test_a_new_import_in_a_temporary_module_joins_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "trace_report_probe_pkg"
    monkeypatch.syspath_prepend(str(tmp_path))
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "compute.py").write_text("import json\n")
    # outside trace_report: only the module's own source counts; inside, its imports do
    plain = cache.code_key("trace_report_probe_pkg.compute")
    assert set(cache.source_modules("trace_report_probe_pkg.compute")) == {"trace_report_probe_pkg.compute"}
    (package / "compute.py").write_text("import json\nfrom trace_report.store import sql_quote\n")
    assert "trace_report.store.sql_quote" in cache.source_modules("trace_report_probe_pkg.compute")
    with_import = cache.code_key("trace_report_probe_pkg.compute")
    assert with_import != plain
    read = cache._read_source
    quote = cache.source_modules("trace_report_probe_pkg.compute")["trace_report.store.sql_quote"]
    monkeypatch.setattr(cache, "_read_source", lambda p: read(p) + (b"# changed" if p == quote else b""))
    assert cache.code_key("trace_report_probe_pkg.compute") != with_import  # the imported module's change
    sys.modules.pop("trace_report_probe_pkg", None)


def test_another_databases_parts_and_a_linked_folder_are_not_read(many: Path, tmp_path: Path) -> None:
    with tr.open(many) as db:
        want = GPU_OP_NAMES.rows(db.con, [1, 2])
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(many, copy)
    shutil.copytree(many.with_name(many.name + ".events"), copy.with_name(copy.name + ".events"))
    (part,) = kept_files(copy, GPU_OP_NAMES.kind)
    with tr.open(copy) as db:
        store = cache._store_for(db.con, GPU_OP_NAMES.kind, GPU_OP_NAMES.key())
        assert store is not None and store.parts() == []  # the original's part: another database
        assert GPU_OP_NAMES.rows(db.con, [1, 2]).equals(want)
    assert not part.exists()  # dropped by the copy's own write

    linked = tmp_path / "linked.duckdb"
    shutil.copyfile(many, linked)
    events = linked.with_name(linked.name + ".events")
    shutil.copytree(many.with_name(many.name + ".events"), events, ignore=shutil.ignore_patterns(DERIVED_FOLDER))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (events / DERIVED_FOLDER).symlink_to(elsewhere)
    with tr.open(linked) as db:
        assert GPU_OP_NAMES.rows(db.con, [1, 2]).equals(want)
    assert list(elsewhere.iterdir()) == []  # nothing written through the link


def test_a_read_only_folder_keeps_nothing(many: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Read-only file system")

    db_path = tmp_path / "ro.duckdb"
    shutil.copyfile(many, db_path)
    shutil.copytree(many.with_name(many.name + ".events"), db_path.with_name(db_path.name + ".events"),
                    ignore=shutil.ignore_patterns(DERIVED_FOLDER))
    monkeypatch.setattr(Path, "mkdir", refused)
    with tr.open(db_path) as db:
        got = GPU_OP_NAMES.rows(db.con, [3])
    assert isinstance(got, pa.Table) and got.num_rows > 0 and set(got["trace_id"].to_pylist()) == {3}
    assert _derived_files(db_path) == []


def test_the_views_a_table_reads_are_tables_while_it_computes(many: Path) -> None:
    from trace_report.store.kept_views import kept_as_table

    seen: list[bool] = []

    def compute(con: object, ids: list[int]) -> pa.Table:
        seen.append(kept_as_table(con, "steps"))  # type: ignore[arg-type]
        return pa.table({"trace_id": pa.array(ids, pa.int64())})

    probe = cache.PerTrace("probe_reads", compute, __name__, reads=("steps",))
    with tr.open(many) as db:
        assert probe.rows(db.con, [1, 2])["trace_id"].to_pylist() == [1, 2]
        assert seen == [True] and not kept_as_table(db.con, "steps")  # a table for the computation only
        probe.rows(db.con, [1, 2])
    assert seen == [True]  # the second read the part
    shutil.rmtree(many.with_name(many.name + ".events") / DERIVED_FOLDER / "probe_reads")



@pytest.mark.parametrize("command", ["breakdown", "flags", *(pytest.param(c, marks=pytest.mark.slow)
                                                            for c in ("ops", "modules", "sequences"))])
def test_a_command_gives_the_same_rows_on_first_and_second_run(many: Path, tmp_path: Path, command: str) -> None:
    db = tmp_path / "fresh.duckdb"
    shutil.copyfile(many, db)
    shutil.copytree(many.with_name(many.name + ".events"), db.with_name(db.name + ".events"),
                    ignore=shutil.ignore_patterns(DERIVED_FOLDER))
    first = run_cli([command, str(db), "-f", "json"])
    assert first[0] == 0, first[2]
    kept = _derived_files(db)
    second = run_cli([command, str(db), "-f", "json"])
    assert second[0] == 0 and second[1] == first[1]
    assert _derived_files(db) == kept  # read back, nothing written again
    if command == "breakdown":  # its rows: one per region, the kernels of every trace
        assert kept and sum(r["kernels"] for r in json.loads(first[1])) == sum(r % 5 + 1 for r in range(N_TRACES))


def test_split_gives_each_trace_its_rows_in_table_order() -> None:
    """Rows of interleaved traces, a NULL trace id and an id without rows: each id gets exactly its
    rows, in the order the table has them (the reference: a plain pass over the rows)."""
    ids = [3, 1, None, 3, 2, 1, 3]
    table = pa.table({"trace_id": pa.array(ids, pa.int32()), "row": list(range(len(ids)))})
    split = cache._split(table, [1, 2, 3, 4])
    for t in (1, 2, 3, 4):
        assert split[t]["row"].to_pylist() == [r for r, i in enumerate(ids) if i == t]
        assert split[t].schema == table.schema
