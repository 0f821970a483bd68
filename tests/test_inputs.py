"""inputs.py: a file is an input because of its content, never its name or its neighbours;
every file seen and not used is listed with its reason; repeats are read once."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import SHARED, TRACES, invoke, shared_or_skip

from trace_report.errors import InputError
from trace_report.inputs import HEAD_BYTES, InputKind, detect, resolve

EXPECTED = {".ncu-rep": InputKind.ncu_report, ".sqlite": InputKind.nsys_sqlite, ".nsys-rep": InputKind.nsys_report,
            ".txt": InputKind.other, ".csv": InputKind.nsys_kernsum, ".tar.gz": InputKind.archive}


def _expected_kind(path: Path) -> InputKind:
    for suffix, kind in EXPECTED.items():
        if path.name.endswith(suffix):
            return kind
    return InputKind.trace  # every .json / .json.gz in ../shared/data is a trace (MANIFEST.tsv)


def test_every_shared_file_is_detected_by_content(shared: Path) -> None:
    files = sorted(p for p in (shared / "data").rglob("*") if p.is_file() and p.name != "MANIFEST.tsv")
    assert len(files) >= 30
    for path in files:
        assert detect(path).kind is _expected_kind(path), path


def test_detection_ignores_names(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]
    (tmp_path / "renamed.dat").write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    (tmp_path / "array.log").write_text(json.dumps(events))
    (tmp_path / "config.json").write_text(json.dumps({"lr": 0.1, "steps": 3}))
    (tmp_path / "notes.json").write_text("not json at all")
    assert detect(tmp_path / "renamed.dat").kind is InputKind.trace
    assert detect(tmp_path / "array.log").kind is InputKind.trace
    found = detect(tmp_path / "config.json")
    assert (found.kind, found.reason) == (InputKind.other, "a JSON object without traceEvents")
    assert detect(tmp_path / "notes.json").kind is InputKind.other


@pytest.mark.parametrize("gz", [False, True])
def test_detection_reads_on_to_a_late_events_key(tmp_path: Path, gz: bool) -> None:
    """The key may come after large metadata: found up to HEAD_BYTES into the content (read in
    growing steps), not after it; the same for a plain and a gzip file."""
    events = [{"ph": "X", "name": "k", "ts": 1, "dur": 2}]
    for pad, expected in [(0, InputKind.trace), (100_000, InputKind.trace), (1_500_000, InputKind.trace),
                          (HEAD_BYTES + 10, InputKind.other)]:
        text = json.dumps({"deviceProperties": "x" * pad, "traceEvents": events}).encode()
        path = tmp_path / f"t{pad}.json"
        path.write_bytes(gzip.compress(text) if gz else text)
        assert detect(path).kind is expected, pad
    array = tmp_path / "array.json"
    array.write_bytes(b" " * 200_000 + json.dumps(events).encode())
    assert detect(array).kind is InputKind.trace


def test_folder_keeps_every_trace_and_lists_the_rest() -> None:
    """The README's example: a folder with *.pt.trace.* files beside others loses none of them."""
    shared_or_skip()
    with resolve([TRACES]) as found:
        labels = {Path(s.label).name if "!" not in s.label else s.label.split("!")[1] for s in found.sources}
        skipped = dict(found.skipped)
    on_disk = [p for p in TRACES.rglob("*") if p.name.endswith((".json", ".json.gz"))]
    assert {p.name for p in on_disk} <= labels  # the A100 DDP, H100 and trace-diff traces included
    assert len(found.sources) == len(on_disk) + 8  # plus the 8 ranks of the DLRM archive
    assert skipped == {}


def test_skipped_files_are_listed_with_reasons(tmp_path: Path) -> None:
    shared_or_skip()
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(TRACES / "hta_triton_example" / "triton_example.json.gz", folder / "a.json.gz")
    shutil.copy(SHARED / "data" / "nsys" / "nvfuser_nsys_h100_matmul" / "report1.nsys-rep", folder)
    (folder / "results.json").write_text("{}")
    result = invoke(["ingest", folder, "-o", tmp_path / "x.duckdb"])
    assert result.exit_code == 0, result.stderr
    assert "1 trace(s) ingested, 2 skipped" in result.stderr
    assert f"skipped: {folder / 'results.json'} (a JSON object without traceEvents)" in result.stderr
    assert "nsys export --type sqlite" in result.stderr
    quiet = invoke(["ingest", folder, "-o", tmp_path / "y.duckdb", "--quiet"])
    assert "skipped:" not in quiet.stderr and "2 skipped" in quiet.stderr


def test_an_ncu_run_folder_reads_the_report_not_also_its_csv_export(tmp_path: Path) -> None:
    shared_or_skip()
    report = SHARED / "data" / "ncu" / "indexspaces_ncu_a40_frb" / "profile.ncu-rep"
    csv = Path(__file__).resolve().parents[1] / "traces" / "h100-2026-11-25" / "ncu-forward" / "ncu.ncu.csv"
    run = tmp_path / "run"  # what `capture --ncu --run-id r` leaves: r.ncu-rep and r.ncu.csv
    run.mkdir()
    shutil.copy(report, run / "r.ncu-rep")
    shutil.copy(csv, run / "r.ncu.csv")
    with resolve([run]) as found:
        assert [s.path.name for s in found.sources] == ["r.ncu-rep"]
        assert found.skipped == [(str(run / "r.ncu.csv"), "the CSV export of r.ncu-rep beside it, "
                                                        "which is read instead")]
    (run / "r.ncu.csv").rename(run / "other.ncu.csv")  # not the report's export: both are read
    with resolve([run]) as found:
        assert sorted(s.path.name for s in found.sources) == ["other.ncu.csv", "r.ncu-rep"]
    with resolve([run / "other.ncu.csv"]) as found:  # named on its own, a CSV is always read
        assert [s.path.name for s in found.sources] == ["other.ncu.csv"]
    (run / "sub").mkdir()  # a report of that name in another folder is another run's
    (run / "other.ncu.csv").rename(run / "sub" / "r.ncu.csv")
    with resolve([run]) as found:
        assert sorted(s.label for s in found.sources) == [str(run / "r.ncu-rep"), str(run / "sub" / "r.ncu.csv")]
    archive = tmp_path / "runs.tar"
    with tarfile.open(archive, "w") as tar:  # the same rule inside an archive
        tar.add(run / "r.ncu-rep", "a/r.ncu-rep")
        tar.add(run / "sub" / "r.ncu.csv", "a/r.ncu.csv")
        tar.add(run / "sub" / "r.ncu.csv", "b/r.ncu.csv")
    with resolve([archive]) as found:
        assert sorted(s.label for s in found.sources) == [f"{archive}!a/r.ncu-rep", f"{archive}!b/r.ncu.csv"]
        assert [label for label, _ in found.skipped] == [f"{archive}!a/r.ncu.csv"]


def test_repeats_are_read_once(tmp_path: Path) -> None:
    shared_or_skip()
    trace = TRACES / "hta_trace_diff" / "control.json.gz"
    with resolve([trace, trace, trace.parent]) as found:
        assert [s.label for s in found.sources].count(str(trace)) == 1
        assert len(found.sources) == 2
        kinds = [n.split(": ", 1)[1].split(" (")[0] for n in found.notes]
        assert kinds == ["given more than once", "overlaps inputs given before"]
    out = invoke(["top-kernels", trace, trace, "-f", "json", "-n", "3"])
    single = invoke(["top-kernels", trace, "-f", "json", "-n", "3"])
    assert out.exit_code == 0 and json.loads(out.stdout) == json.loads(single.stdout)
    assert "given more than once" in out.stderr


def test_tar_members_and_errors(tmp_path: Path) -> None:
    archive = tmp_path / "ranks.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        readme = tmp_path / "README"
        readme.write_text("hello")
        tar.add(readme, arcname="README")
    with pytest.raises(InputError, match="no traces in this archive"):
        resolve([archive])
    with pytest.raises(InputError, match="no such file"):
        resolve([tmp_path / "absent.json"])
    with pytest.raises(InputError, match="not both"):
        resolve([TRACES / "hta_triton_example", _database(tmp_path)])


def _database(tmp_path: Path) -> Path:
    shared_or_skip()
    db = tmp_path / "one.duckdb"
    assert invoke(["ingest", TRACES / "hta_triton_example", "-o", db]).exit_code == 0
    return db
