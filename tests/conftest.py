"""Shared fixtures: the real traces in ../shared (tests skip cleanly without them)."""

from __future__ import annotations

import contextlib
import csv
import gc
import gzip
import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trace_report.sysutil import tune_gc

if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest-xdist workers get COLUMNS=80 LINES=24 from their pty
    os.environ.pop("COLUMNS", None)  # set-up: output is piped, as in a serial run (PIPE_WIDTH)
    os.environ.pop("LINES", None)

tune_gc()  # the collector settings of the command's own process (cli.entry), where the tests run it in-process

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TRACE_REPORT_SHARED", REPO.parent / "shared"))
TRACES = SHARED / "data" / "traces"


def shared_or_skip() -> Path:
    if not (SHARED / "data" / "MANIFEST.tsv").is_file():
        pytest.skip(f"{SHARED} is absent: real traces unavailable")
    return SHARED


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_or_skip()


@dataclass
class CliResult:
    """What one run of the real ``trace-report`` command line printed and returned."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def invoke(args: list[object]) -> CliResult:
    """Run ``trace-report ARGS`` in this process on the real app (``trace_report.cli.app.main``),
    capturing stdout and stderr."""
    from trace_report.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return CliResult(code, out.getvalue(), err.getvalue())


def run_cli(args: list[object], capsys: object = None) -> tuple[int, str, str]:
    """Run ``trace-report ARGS`` in this process: (exit code, stdout, stderr)."""
    result = invoke(args)
    return result.exit_code, result.stdout, result.stderr


def manifest_rows() -> list[dict[str, str]]:
    path = SHARED / "data" / "MANIFEST.tsv"
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def trace_file(name: str) -> Path:
    """The (first) trace file of a folder in ../shared/data/traces."""
    folder = shared_or_skip() / "data" / "traces" / name
    files = sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))
    return files[0]


def load_json(path: Path) -> Any:
    """Plain-Python decode of a trace file: the independent reference for tests. The cyclic
    collector is paused meanwhile: a decoded document holds no cycle, and its hundreds of
    thousands of new dicts would otherwise make it walk the whole heap several times."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    enabled = gc.isenabled()
    gc.disable()
    try:
        with opener(path, "rt") as fh:
            return json.load(fh)
    finally:
        if enabled:
            gc.enable()


def events_of(doc: Any) -> list[dict[str, Any]]:
    return doc["traceEvents"] if isinstance(doc, dict) else doc


KERNEL_CATS = {"kernel", "Kernel"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
GPU_OP_CATS = KERNEL_CATS | {"gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
"""Category spellings of the JSON itself (2021 capitalised and PyTorch 2.x), for plain passes."""


def complete_events(path: Path) -> list[dict[str, Any]]:
    """The complete (``ph: X``) events of one trace file, by a plain pass over the JSON."""
    return [e for e in events_of(load_json(path)) if e.get("ph") == "X"]


def folder_events(folder: str) -> list[dict[str, Any]]:
    """Complete events of every trace file of a folder in ../shared/data/traces, in name order."""
    files = sorted(p for p in (TRACES / folder).iterdir() if p.name.endswith((".json", ".json.gz")))
    return [e for p in files for e in complete_events(p)]


def tar_ranks(path: Path) -> dict[int, list[dict[str, Any]]]:
    """Complete events of each rank's trace in a tar archive (rank from distributedInfo)."""
    out = {}
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith(".json"):
                doc = json.load(tar.extractfile(m))
                out[doc["distributedInfo"]["rank"]] = [e for e in events_of(doc) if e.get("ph") == "X"]
    return out


def manifest_by_dir() -> dict[str, dict[str, str]]:
    """MANIFEST.tsv rows keyed by their ``dir`` column."""
    return {row["dir"]: row for row in manifest_rows()}


def kernel_stats(events: list[dict[str, Any]]) -> tuple[int, float]:
    """(count, total µs) of GPU kernel events, by a plain pass over the JSON."""
    ks = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
    return len(ks), sum(float(e["dur"]) for e in ks)


@pytest.fixture(scope="module")
def a100() -> Any:
    """The A100 DDP training trace (hta_a100_ddp_nccl) opened with trace_report.open."""
    import trace_report as tr

    shared_or_skip()
    with tr.open(TRACES / "hta_a100_ddp_nccl") as db:
        yield db


@pytest.fixture(scope="module")
def a100_events() -> list[dict[str, Any]]:
    """Its complete events, by a plain pass over the JSON."""
    shared_or_skip()
    return folder_events("hta_a100_ddp_nccl")


# ---------------------------------------------------------------- capture runs shared by tests

TINY = ["--steps", "2", "--batch-size", "8", "--image-size", "16", "--wait", "0", "--warmup", "1", "--active", "1",
        "--synthetic-test", "16", "--threads", "1", "--no-progress", "--format", "csv"]
RUNS = {  # run id -> experiment and its own options
    "base": ("baseline", ["--steps", "3"]),
    "opt": ("optimizers", ["--epochs", "2"]),
    "wk": ("workers", ["--workers-list", "0,1", "--no-profile"]),
    "dev": ("devices", ["--no-profile"]),
    "amp": ("amp", ["--batch-sizes", "2,3"]),  # bf16 backward on CPU: slow per sample here
    "cmp": ("compile", ["--steps", "1", "--timed-runs", "2", "--no-profile"]),
}


def captured_runs(factory: pytest.TempPathFactory) -> Path:
    """Capture every experiment of :data:`RUNS` once per session (slow: real captures), in a
    folder every pytest-xdist worker shares: the first worker to ask captures, the others wait
    for it under a file lock (xdist's own recipe, "Making session-scoped fixtures execute only
    once"); each capturing on its own kept both cores busy several times longer. Tests only read it.

    ``compile`` runs torch.compile with the ``eager`` backend (Dynamo captures the graph,
    Inductor does not generate code): a cold Inductor compile of ResNet-18 is too slow for a test.
    """
    from filelock import FileLock

    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "captured-runs"
    with FileLock(str(shared / "captured-runs.lock")):
        if not (root / "done").is_file():
            _capture_runs(root)
    return root


def _capture_runs(root: Path) -> None:
    import functools
    import shutil
    from unittest import mock

    import torch

    from trace_report.capture.__main__ import main

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    eager = functools.partial(torch.compile, backend="eager")
    out = io.StringIO()
    with mock.patch.object(torch, "compile", eager), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            for run_id, (experiment, extra) in RUNS.items():
                code = main([experiment, *TINY, *extra, "--out-dir", str(root), "--run-id", run_id])
                assert code == 0, out.getvalue()[-2000:]
        finally:
            torch._dynamo.reset()  # leave no eager-backend graphs behind for other tests
    (root / "done").write_text("")


H100_CAPTURES = REPO / "traces" / "h100-2026-11-25"
"""This project's own H100 captures (baseline, amp-bf16, ddp): the kept-rows tests read them."""
H100_RUNS = ("baseline", "amp-bf16", "ddp")  # three traces: the rows of each must stay its own


def ingest_h100_runs(path: Path) -> Path:
    """A database at ``path`` with the three :data:`H100_RUNS`, decoded in this process."""
    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    ingest_to_database([H100_CAPTURES / r for r in H100_RUNS], path, IngestOptions(workers=1))
    return path


@pytest.fixture(scope="session")
def h100_pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The :data:`H100_RUNS` ingested once per test process (:func:`ingest_h100_runs`);
    never changed: tests take a copy each (:func:`h100_db`)."""
    if not H100_CAPTURES.is_dir():
        pytest.skip(f"{H100_CAPTURES} is not present")
    return ingest_h100_runs(tmp_path_factory.mktemp("h100-pristine") / "t.duckdb")


@pytest.fixture
def h100_db(h100_pristine: Path, tmp_path: Path) -> Path:
    """This test's own copy of :func:`h100_pristine` (the database file and its events folder, the
    files kept at ingest among them): ``tmp_path / "t.duckdb"``, as a fresh ingest writes it."""
    import shutil

    shutil.copytree(h100_pristine.parent, tmp_path, dirs_exist_ok=True)
    return tmp_path / h100_pristine.name


def kept_files(db_path: Path, kind: str) -> list[Path]:
    """The parts of one derived ``kind`` kept beside the database (:mod:`trace_report.store.cache`:
    ``derived/<kind>/<key>/part-*.parquet``), oldest first."""
    from trace_report.store.events_view import events_dir_for
    from trace_report.store.layout import DERIVED_FOLDER

    folder = events_dir_for(db_path) / DERIVED_FOLDER / kind
    return sorted(folder.glob("*/part-*.parquet")) if folder.is_dir() else []


def kept_traces(path: Path) -> dict[int, str]:
    """``{trace_id: pieces}`` of the traces a kept part holds (its Parquet metadata)."""
    import json

    import pyarrow.parquet as pq

    return {int(t): p for t, p in json.loads(pq.read_schema(path).metadata[b"trace_report.cache"])["traces"].items()}


def empty_kept_file(path: Path) -> None:
    """Replace a kept part by one with the same columns, traces and metadata and no row: what reads
    it then finds nothing, which shows that it reads the file and not the events."""
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"trace_report.cache"])
    meta["rows"] = dict.fromkeys(meta["rows"], 0)  # what the part says it holds: no row
    new = path.with_name(path.name + ".new")
    pq.write_table(table.slice(0, 0).replace_schema_metadata(
        {**table.schema.metadata, b"trace_report.cache": json.dumps(meta).encode()}), new)
    new.replace(path)


# Tests that run only with the slow ones (./run test-all), by node id prefix: each is a second,
# larger case of a capability the default run already covers with a small end-to-end test (named
# after the arrow), so that the default run stays under 10 minutes on 2 cores.
SLOW_CASES = {
    "tests/present/test_charts.py::test_top_kernels_chart_on_a_cpu_capture": "test_top_kernels_chart",
    "tests/present/test_charts.py::test_regions_chart_cpu_only_capture": "test_regions_chart_stacks_each_step",
    "tests/present/test_charts.py::test_timeline_of_a_cpu_capture": "test_timeline_chart_of_one_step",
    "tests/present/test_charts.py::test_worker_sweep_chart": "tests/present/test_report.py (captured runs)",
    "tests/present/test_charts.py::test_optimizer_epochs_chart": "tests/present/test_report.py (captured runs)",
    "tests/present/test_charts.py::test_speedup_chart_cpu_threads": "tests/present/test_report.py (captured runs)",
    "tests/present/test_charts.py::test_amp_sweep_chart": "tests/present/test_report.py (captured runs)",
    "tests/present/test_charts.py::test_compile_chart": "tests/present/test_report.py (captured runs)",
    "tests/present/test_charts.py::test_no_chart_makes_an_altair_converter": "the charts' a100 cases",
    "tests/test_redact.py::test_end_to_end_every_stored_string_is_screened":
        "test_end_to_end_nothing_planted_is_written",
    "tests/store/test_kept_views.py::test_the_report_keeps_region_markers_before_its_timeline_reads_them":
        "test_kept_views' other cases",
    "tests/store/test_kept_views.py::test_kept_rows_are_the_views_rows_from_any_later_connection":
        "test_kept_views' other cases",
    "tests/store/test_run_identity.py::test_each_run_of_a_folder_equals_that_trace_alone": "test_run_identity's others",
    "tests/ingest/test_chunking.py::test_property_ingest_preserves_kernel_time": "test_chunking's real traces",
    "tests/formats/test_scan_screen.py::test_every_row_re2_flags_is_marked": "test_scan_screen's others",
    "tests/formats/test_scan.py::test_every_piece_of_every_real_trace_decodes_as_msgspec_does": "test_scan's others",
    "tests/store/test_cache.py::test_many_traces_keep_one_part_per_kind": "test_cache's others",
    "tests/store/test_cache.py::test_a_command_gives_the_same_rows_on_first_and_second_run[breakdown]":
        "the same test for the other commands",
    "tests/present/test_box_table.py::test_real_long_tables_as_rich_draws_them": "test_box_table's others",
    "tests/test_api_runs.py::test_each_run_gets_its_own_rows[advise]": "the same test for the other methods",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_ingest_precompute_keeps_the_rows":
        "test_kept_tables_give_the_computed_breakdown",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_redefined_views_neither_read_nor_keep_rows":
        "test_kept_tables_give_the_computed_breakdown",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_damaged_or_unwritable_kept_tables_are_ignored":
        "test_kept_tables_give_the_computed_breakdown",
    "tests/present/test_report_browser.py::test_report_of_captured_runs_renders": "test_report_first_screen",
    "tests/present/test_report_browser.py::test_report_of_real_trace_fits_1280_px": "test_report_first_screen",
    "tests/capture/test_capture_gpucheck.py::test_run_script_dry_run": "test_capture_gpucheck's others",
    "tests/storage/test_storage_inputs.py::test_endpoint_down": "test_no_bucket (one Error: line per failure)",
    "tests/present/test_report_consistency.py::test_no_number_on_the_page_contradicts_another[param_dlrm":
        "the same test on hta_a100_ddp_nccl",
    "tests/present/test_report_more.py::test_timeline_names_the_slice_command_that_writes_its_step":
        "test_report_more's others",
    "tests/analyses/test_kept_results.py::test_kept_calls_give_the_computed_tree": "test_kept_results' others",
    "tests/analyses/test_kept_results.py::test_kept_estimate_gives_the_computed_roofline": "test_kept_results' others",
    "tests/present/test_names_tables.py::test_compare_regions_is_per_step_by_default_and_says_so":
        "the compare tests of tests/analyses/compare",
    "tests/present/test_chart_loading.py::test_altair_import_skips_the_rfc3987_grammars":
        "test_preload_then_altair_at_once_gives_the_whole_module",
    "tests/ingest/test_duplicates.py::test_duplicates_of_real_traces_match_a_plain_count[kineto_rn50_nw4_2021jun":
        "the same test on the other traces",
    "tests/present/test_report_sections.py::test_experiment_kernel_classes_one_bar_per_run":
        "tests/present/test_report.py (captured runs)",
    "tests/cli/test_cli.py::test_api_analyses_match_cli": "tests/test_declare.py (methods print what commands print)",
    "tests/analyses/kernel_variance/test_kernel_variance.py::test_notebook_method_keeps_unrelated_runs_apart":
        "tests/test_api_runs.py::test_each_run_gets_its_own_rows[kernel_variance] and the plain-pass rows test",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark :data:`SLOW_CASES` slow."""
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix in SLOW_CASES):
            item.add_marker(pytest.mark.slow)
