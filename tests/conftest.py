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

import duckdb
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


def catalog_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the database file ``db``, opened read-only and closed again."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


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
    # Second cases of 2 s or more (measured on a quiet 2-core run of the default suite), each file
    # keeping its faster cases (the value: one of them) in the default run; ./run test-all runs them.
    "tests/analyses/advise/test_advise.py::test_each_finding_fires_where_it_should_and_only_there[host_sync]":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_each_finding_fires_where_it_should_and_only_there[no_tensor_cores]":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_a_sync_that_only_waits_for_busy_gpu_is_no_finding[hta_ns_resolution]":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_deep_queue_is_never_launch_bound":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_each_finding_fires_where_it_should_and_only_there[data_loading]":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_nothing_below_two_percent_unless_all":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_report_headline_names_the_biggest_finding":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_cli_prints_blocks_and_json_keeps_every_field":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_data_loading_per_iteration_without_profiler_steps":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_eight_rank_dlrm_is_exposed_communication_first":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_gpu_bound_trace_says_so":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise.py::test_each_finding_fires_where_it_should_and_only_there[low_gpu_utilization]":
        "test_each_finding_fires_where_it_should_and_only_there (its cases)",
    "tests/analyses/advise/test_advise_rules.py::test_findings_ranked_by_saving_and_small_ones_only_with_all":
        "test_builder_writes_what_the_ingest_reads",
    "tests/analyses/advise/test_anchors.py::test_matmul_dims_on_real_traces[tracelens_mi300_resnet18_ddp_train-False]":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_grad_not_set_to_none_on_real_traces[tracelens_mi300_resnet18_ddp_train-False]":  # noqa: E501
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_kernel_variance_needs_ten_calls_and_cv_over_one":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_stragglers_on_the_dlrm_ranks":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_long_gpu_gaps_on_real_traces[kineto_rn50_autograd_api_nw0-True]":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_kernel_variance_on_real_traces[kineto_rn50_autograd_api_nw0-True]":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_small_synchronous_host_to_device_copies_are_no_sync_memcpy":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_grad_not_set_to_none_on_real_traces[param_linear_kineto_2080ti-True]":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_anchors.py::test_kernel_variance_leaves_collectives_to_the_communication_findings":
        "test_long_gpu_gaps_over_500_ms (its cases)",
    "tests/analyses/advise/test_cpu_wait.py::test_preprocessing_before_the_first_kernel_is_cpu_bound":
        "test_a_window_that_recorded_almost_nothing_says_so",
    "tests/analyses/advise/test_gpu_bound.py::test_gpu_bound_trace_gets_its_finding_with_busy_share_and_fusion_saving":
        "test_kernel_labels (its cases)",
    "tests/analyses/advise/test_gpu_bound.py::test_compiled_run_gets_cuda_graph_advice_not_torch_compile":
        "test_kernel_labels (its cases)",
    "tests/analyses/advise/test_gpu_bound.py::test_straggler_advice_only_with_several_ranks":
        "test_kernel_labels (its cases)",
    "tests/analyses/advise/test_gpu_bound.py::test_eager_softmax_is_a_finding_with_half_its_time_saved":
        "test_kernel_labels (its cases)",
    "tests/analyses/advise/test_startup_window.py::test_steady_real_traces_have_none[tracelens_mi300_resnet18_ddp_train]":  # noqa: E501
        "test_constructed_rules",
    "tests/analyses/advise/test_startup_window.py::test_startup_before_the_first_inferred_iteration_comes_first":
        "test_constructed_rules",
    "tests/analyses/advise/test_steady_part.py::test_window_findings_on_the_steady_part":
        "test_a_single_window_has_no_steady_part",
    "tests/analyses/advise/test_window_gpu.py::test_no_share_passes_100_percent[kineto_rn50_nw4_2021jun]":
        "test_plain_reference_reads_the_steps",
    "tests/analyses/advise/test_window_gpu.py::test_no_share_passes_100_percent[kineto_rn50_autograd_api_nw0]":
        "test_plain_reference_reads_the_steps",
    "tests/analyses/advise/test_window_gpu.py::test_no_share_passes_100_percent[hta_trace_diff]":
        "test_plain_reference_reads_the_steps",
    "tests/analyses/advise/test_window_gpu.py::test_no_share_passes_100_percent[tracelens_h100_timesformer]":
        "test_plain_reference_reads_the_steps",
    "tests/analyses/breakdown/test_breakdown_in_memory.py::test_report_on_a_trace_file_computes_its_breakdown_rows_once":  # noqa: E501
        "test_breakdowns_on_one_connection_compute_each_trace_once_and_equal_plain_ones",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_a_failed_or_interrupted_keep_leaves_the_ingested_database":
        "test_ingest_keeps_rows_only_when_asked",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_a_changed_trace_or_code_is_computed_again":
        "test_ingest_keeps_rows_only_when_asked",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_kept_tables_give_the_computed_breakdown":
        "test_ingest_keeps_rows_only_when_asked",
    "tests/analyses/breakdown/test_step_time.py::test_gate_sees_a_slower_gpu[step_time>+5%-deep_queue]":
        "test_step_time_view_matches_the_json (its cases)",
    "tests/analyses/common/test_iterations.py::test_advise_and_breakdown_on_2080ti_say_per_iteration":
        "test_forward_range_marks_the_start_outermost_only",
    "tests/analyses/compare/test_compare.py::test_kernel_diff_matches_the_json":
        "test_sorted_by_impact_with_statuses",
    "tests/analyses/compare/test_compare.py::test_notebook_method_gives_the_commands_rows[kwargs2-args2]":
        "test_sorted_by_impact_with_statuses",
    "tests/analyses/compare/test_compare.py::test_notebook_method_gives_the_commands_rows[kwargs0-args0]":
        "test_sorted_by_impact_with_statuses",
    "tests/analyses/compare/test_compare.py::test_compare_command":
        "test_sorted_by_impact_with_statuses",
    "tests/analyses/compare/test_compare_gate.py::test_headline_matches_the_json":
        "test_bad_rules_are_usage_errors_stating_the_grammar (its cases)",
    "tests/analyses/critical_path/test_critical_path.py::test_each_trace_of_a_database_is_read_from_its_own_pieces":
        "test_longest_path_needs_topological_order",
    "tests/analyses/critical_path/test_critical_path.py::test_no_path_is_longer_than_its_step_span[hta_trace_diff/control.json.gz]":  # noqa: E501
        "test_longest_path_needs_topological_order",
    "tests/analyses/critical_path/test_critical_path.py::test_no_path_is_longer_than_its_step_span[hta_trace_diff/test.json.gz]":  # noqa: E501
        "test_longest_path_needs_topological_order",
    "tests/analyses/flags/test_flag_classes.py::test_report_reads_the_kernel_classes_kept_once":
        "test_flags_equal_with_the_kept_classes_on_a_trace_opened_directly",
    "tests/analyses/flags/test_kernel_classes.py::test_flags_summary_alone_is_the_summary_of_flags[param_dlrm_kineto_v100x8]":  # noqa: E501
        "test_every_rule_is_tested_and_documented",
    "tests/analyses/hta/test_hta_bridge.py::test_launch_stats_count_every_launched_gpu_op":
        "test_cpu_only_and_missing_rank_are_input_errors",
    "tests/analyses/hta/test_hta_bridge.py::test_capitalised_2021_trace_agrees_exactly":
        "test_cpu_only_and_missing_rank_are_input_errors",
    "tests/analyses/ops/test_ops_nesting_kept.py::test_kept_rows_give_the_computed_operator_view":
        "test_a_trace_given_directly_keeps_nothing",
    "tests/analyses/roofline/test_roofline_runs.py::test_forward_region_flop_per_image_matches_flop_counter[alex]":
        "test_cli_region_errors",
    "tests/analyses/slice/test_slice.py::test_kept_steps_breakdown_equals_whole_trace":
        "test_a_failed_write_leaves_nothing",
    "tests/analyses/test_definitions.py::test_report_headline_and_advise_show_the_same_utilisation[a100]":
        "test_steps_only_is_htas_kernel_selection",
    "tests/analyses/test_h100_captures.py::test_advise_names_the_layout_conversions_and_not_after_channels_last":
        "test_ncu_region_profiled_only_the_forward_pass",
    "tests/analyses/test_hta_agreement.py::test_kernel_breakdown_equals_hta[hta_a100_ddp_nccl]":
        "test_kernel_breakdown_equals_hta (its cases)",
    "tests/analyses/test_hta_agreement.py::test_kernel_breakdown_equals_hta[hta_ns_resolution]":
        "test_kernel_breakdown_equals_hta (its cases)",
    "tests/analyses/test_kept_results.py::test_kept_calls_give_the_computed_sequences":
        "test_each_file_holds_its_traces_calls",
    "tests/analyses/test_shares.py::test_no_share_exceeds_100[hta_ns_resolution]":
        "test_shares_are_found",
    "tests/capture/test_capture_gpucheck.py::test_a_timeout_reaches_workers_in_their_own_session_through_sigterm":
        "test_ddp_world_sizes_follow_the_gpu_count",
    "tests/capture/test_capture_gpucheck.py::test_a_step_over_its_timeout_is_stopped_with_its_children":
        "test_ddp_world_sizes_follow_the_gpu_count",
    "tests/capture/test_capture_options.py::test_image_folder_takes_its_class_count_from_the_folder":
        "test_amp_dtype_defaults_and_choices",
    "tests/capture/test_capture_runs.py::test_no_bn":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/capture/test_capture_runs.py::test_results_as_json_on_stdout":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/capture/test_capture_runs.py::test_repeats_give_median_min_and_max_per_row":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/capture/test_capture_runs.py::test_workers":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/capture/test_capture_runs.py::test_optimized_against_baseline":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/capture/test_capture_runs.py::test_loss_falls_on_the_synthetic_set":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/capture/test_capture_runs.py::test_devices":
        "test_synthetic_data_is_deterministic_and_class_dependent",
    "tests/cli/test_first_steps.py::test_run_trace_report_passes_arguments_from_the_callers_folder":
        "test_readme_keeps_two_setup_commands",
    "tests/cli/test_first_steps.py::test_analysis_side_needs_no_torch":
        "test_readme_keeps_two_setup_commands",
    "tests/cli/test_report_default.py::test_report_without_output":
        "test_default_names",
    "tests/cli/test_startup.py::test_ingest_loads_no_pyarrow_compute":
        "test_messages_cannot_drive_the_terminal",
    "tests/cli/test_startup.py::test_the_console_script_exits_without_teardown_and_loses_no_output":
        "test_messages_cannot_drive_the_terminal",
    "tests/formats/test_scan_screen.py::test_real_traces_marked_rows_cover_re2":
        "test_kinetos_own_args_are_not_marked_and_secrets_are",
    "tests/ingest/test_engine.py::test_the_scan_runs_without_the_gil":
        "test_default_workers_are_the_usable_cpus_and_no_more_than_the_jobs",
    "tests/ingest/test_engine.py::test_each_engine_writes_the_rows_of_the_serial_ingest[processes]":
        "test_default_workers_are_the_usable_cpus_and_no_more_than_the_jobs",
    "tests/ingest/test_engine.py::test_each_engine_writes_the_rows_of_the_serial_ingest[threads]":
        "test_default_workers_are_the_usable_cpus_and_no_more_than_the_jobs",
    "tests/ingest/test_ingest_real.py::test_memory_events_reach_the_memory_advice":
        "test_rocm_trace_links_hip_launches",
    "tests/present/test_chart_loading.py::test_bundle_built_once_then_read_from_the_cache":
        "test_damaged_cache_file_is_rebuilt_and_unwritable_cache_is_no_error",
    "tests/present/test_chart_loading.py::test_altair_left_as_it_is_when_jsonschema_is_loaded":
        "test_damaged_cache_file_is_rebuilt_and_unwritable_cache_is_no_error",
    "tests/present/test_chart_loading.py::test_preload_then_altair_at_once_gives_the_whole_module":
        "test_damaged_cache_file_is_rebuilt_and_unwritable_cache_is_no_error",
    "tests/present/test_charts.py::test_compare_chart_names_a_and_b":
        "test_short_names",
    "tests/present/test_names_tables.py::test_compare_match_short_pairs_kernels_across_pytorch_versions":
        "test_short_kernel_name_on_real_names (its cases)",
    "tests/present/test_report.py::test_failed_report_cancels_its_queued_specs":
        "test_urls_are_links_and_nothing_else_is",
    "tests/present/test_report.py::test_report_command":
        "test_urls_are_links_and_nothing_else_is",
    "tests/present/test_report.py::test_every_name_is_escaped":
        "test_urls_are_links_and_nothing_else_is",
    "tests/present/test_report.py::test_report_of_a_gpu_trace":
        "test_urls_are_links_and_nothing_else_is",
    "tests/present/test_report.py::test_report_of_an_experiment_folder_without_results_csv":
        "test_urls_are_links_and_nothing_else_is",
    "tests/present/test_report.py::test_report_of_captured_runs":
        "test_urls_are_links_and_nothing_else_is",
    "tests/present/test_report_more.py::test_no_section_without_gpu_work":
        "test_deeper_section_shows_the_commands_numbers",
    "tests/present/test_report_ranks_runs.py::test_multi_rank_headline_counts_steps_per_rank":
        "test_multi_rank_regions_chart_has_one_bar_per_rank_and_step",
    "tests/storage/test_storage_datasets_runs.py::test_hta_on_urls_matches_local_and_leaves_no_copies":
        "test_database_object_is_one_error_line",
    "tests/storage/test_storage_inputs.py::test_prefix_of_gzip_trace_same_as_local[advise]":
        "test_url_with_credentials_refused",
    "tests/storage/test_storage_outputs.py::test_export_to_prefix_reads_back_as_the_local_export":
        "test_report_to_object_needs_html_suffix",
    "tests/storage/test_storage_outputs.py::test_export_to_prefix_overwrite_rules":
        "test_report_to_object_needs_html_suffix",
    "tests/storage/test_storage_pieces.py::test_jobs_write_their_pieces_to_the_bucket[files]":
        "test_a_first_ingest_killed_before_its_catalog_is_cleaned_up",
    "tests/storage/test_storage_pieces.py::test_sql_reads_exactly_the_pieces_prefix":
        "test_a_first_ingest_killed_before_its_catalog_is_cleaned_up",
    "tests/storage/test_storage_pieces.py::test_partitions_and_per_trace_reads_use_the_remote_pieces":
        "test_a_first_ingest_killed_before_its_catalog_is_cleaned_up",
    "tests/storage/test_storage_pieces.py::test_later_ingests_use_the_recorded_prefix_and_replace_pieces":
        "test_a_first_ingest_killed_before_its_catalog_is_cleaned_up",
    "tests/storage/test_storage_pieces.py::test_remote_pieces_read_as_local_pieces":
        "test_a_first_ingest_killed_before_its_catalog_is_cleaned_up",
    "tests/storage/test_storage_stream.py::test_large_object_streams_at_the_default_head[gzip]":
        "test_object_changed_while_streamed_is_not_stored",
    "tests/storage/test_storage_stream.py::test_large_object_streams_at_the_default_head[plain]":
        "test_object_changed_while_streamed_is_not_stored",
    "tests/store/test_cache.py::test_another_databases_parts_and_a_linked_folder_are_not_read":
        "test_split_gives_each_trace_its_rows_in_table_order",
    "tests/store/test_kept_views.py::test_a_scope_reads_its_traces_kept_rows_alone":
        "test_the_views_kept_as_tables_are_marked_in_their_sql",
    "tests/store/test_notebook.py::test_readme_sql_magic_form_works":
        "test_tour_notebook_is_saved_with_outputs",
    "tests/store/test_notebook.py::test_tour_finds_shared_beside_its_repository":
        "test_tour_notebook_is_saved_with_outputs",
    "tests/store/test_op_cost.py::test_flop_equals_flop_counter[aten::mm-[[512, 1000], [1000, 512]]]":
        "test_trace_cases_cover_every_family",
    "tests/test_api_runs.py::test_each_run_gets_its_own_rows[breakdown]":
        "test_merge_runs_sums_as_the_command_does",
    "tests/test_declare.py::test_options_the_methods_lacked_give_what_the_command_prints":
        "test_the_method_keywords_are_the_options_fields (its cases)",
    "tests/test_golden.py::test_golden_fast[traces/param_dlrm_kineto_v100x8/dlrm_kineto.tar.gz::advise]":
        "test_golden_cases_exist",
    "tests/test_hostile_bounds.py::test_step_numbers_that_are_none_are_skipped[report-ProfilerStep#abc]":
        "test_module_path_ids_keep_equal_texts_apart",
    "tests/test_hostile_bounds.py::test_step_numbers_that_are_none_are_skipped[report-ProfilerStep#2147483648]":
        "test_module_path_ids_keep_equal_texts_apart",
    "tests/test_hostile_bounds.py::test_nan_in_the_middle_of_a_big_trace":
        "test_module_path_ids_keep_equal_texts_apart",
    "tests/test_hostile_bounds.py::test_step_numbers_that_are_none_are_skipped[report-ProfilerStep#-5]":
        "test_module_path_ids_keep_equal_texts_apart",
    "tests/test_hostile_bounds.py::test_deep_module_nesting_in_linear_memory":
        "test_module_path_ids_keep_equal_texts_apart",
    "tests/test_hostile_inputs.py::test_disk_full_on_output[report]":
        "test_archive_ratio_rule_is_the_gzip_traces",
    "tests/test_hostile_inputs.py::test_deep_nesting_is_one_error[events]":
        "test_archive_ratio_rule_is_the_gzip_traces",
    "tests/test_interrupts.py::test_a_signal_stops_a_long_query_at_once[2-130-Interrupted]":
        "test_addresses_as_ray_reads_them",
    "tests/test_outputs.py::test_a_full_disk_is_one_error_line":
        "test_write_atomic_keeps_regular_files_atomic",
    "tests/test_outputs.py::test_a_closed_pipe_is_a_quiet_exit_141":
        "test_write_atomic_keeps_regular_files_atomic",
    "tests/test_reliability.py::test_changed_file_replaces_its_trace":
        "test_max_ratio_must_be_finite_and_above_one (its cases)",
    "tests/test_reliability.py::test_interrupt_cleans_up_and_says_so[2-130-threads]":
        "test_max_ratio_must_be_finite_and_above_one (its cases)",
    "tests/test_reliability.py::test_interrupt_cleans_up_and_says_so[15-143-processes]":
        "test_max_ratio_must_be_finite_and_above_one (its cases)",
    "tests/test_style.py::test_no_timings_dates_or_issue_numbers_in_comments_and_docstrings":
        "test_the_patterns_tell_measurements_from_units_and_names",
    # and those of 1.5-2 s, by the same rule
    "tests/analyses/advise/test_advise.py::test_each_finding_fires_where_it_should_and_only_there[fp32_without_tf32]":
        "test_each_finding_fires_where_it_should_and_only_there",
    "tests/analyses/advise/test_advise.py::test_findings_sorted_by_saving_and_verdict_names_the_first":
        "test_each_finding_fires_where_it_should_and_only_there",
    "tests/analyses/advise/test_advise.py::test_each_finding_fires_where_it_should_and_only_there[cpu_bound]":
        "test_each_finding_fires_where_it_should_and_only_there",
    "tests/analyses/advise/test_advise_rules.py::test_data_loading_while_the_gpu_is_busy_saves_nothing":
        "test_builder_writes_what_the_ingest_reads",
    "tests/analyses/advise/test_anchors.py::test_single_tensor_optimizer":
        "test_long_gpu_gaps_over_500_ms",
    "tests/analyses/advise/test_anchors.py::test_sync_memset_only_on_pinned_or_managed_memory":
        "test_long_gpu_gaps_over_500_ms",
    "tests/analyses/advise/test_launch_split.py::test_layout_names_the_operator_that_launched_the_conversions":
        "test_launch_bound_names_the_launching_operator",
    "tests/analyses/advise/test_launch_split.py::test_hipfree_names_the_cpu_work":
        "test_launch_bound_names_the_launching_operator",
    "tests/analyses/advise/test_launch_split.py::test_one_bert_workload_one_name_on_both_vendors":
        "test_launch_bound_names_the_launching_operator",
    "tests/analyses/advise/test_startup_window.py::test_steady_real_traces_have_none[hta_a100_ddp_nccl]":
        "test_constructed_rules",
    "tests/analyses/advise/test_startup_window.py::test_constructed_advise_finding_first_when_dominant":
        "test_constructed_rules",
    "tests/analyses/breakdown/test_breakdown_kept.py::test_the_next_ingest_removes_parts_of_pieces_no_longer_listed":
        "test_ingest_keeps_rows_only_when_asked",
    "tests/analyses/breakdown/test_regions.py::test_capitalised_2021_trace_uses_tb_profiler_conventions":
        "test_unknown_rank_is_an_input_error",
    "tests/analyses/breakdown/test_step_time.py::test_gate_sees_a_slower_gpu[gpu_time>+5%-deep_queue]":
        "test_step_time_view_matches_the_json",
    "tests/analyses/breakdown/test_step_time.py::test_step_time_view_matches_the_json[hta_trace_diff/control.json.gz]":
        "test_step_time_view_matches_the_json",
    "tests/analyses/common/test_gpu_op_names.py::test_a_damaged_kept_file_is_computed_again[another trace]":
        "test_the_view_counts_and_sums_as_the_json_does",
    "tests/analyses/common/test_gpu_op_names.py::test_flags_from_kept_rows_equal_flags_from_the_events[FlagsOptions(rank=None, by_rank=False, classes=('tensor_core',), explain=False, summary=False, limit=3, trace_ids=None)]":  # noqa: E501
        "test_the_view_counts_and_sums_as_the_json_does",
    "tests/analyses/common/test_gpu_op_names.py::test_a_damaged_kept_file_is_computed_again[other columns]":
        "test_the_view_counts_and_sums_as_the_json_does",
    "tests/analyses/common/test_gpu_op_names.py::test_a_damaged_kept_file_is_computed_again[not parquet]":
        "test_the_view_counts_and_sums_as_the_json_does",
    "tests/analyses/compare/test_compare.py::test_notebook_method_gives_the_commands_rows[kwargs1-args1]":
        "test_sorted_by_impact_with_statuses",
    "tests/analyses/compare/test_compare.py::test_notebook_method_judges_the_rules_as_the_gate":
        "test_sorted_by_impact_with_statuses",
    "tests/analyses/compare/test_compare_mismatch.py::test_two_models_of_one_vendor_warn_once":
        "test_a_trace_against_itself_does_not_warn",
    "tests/analyses/critical_path/test_critical_path.py::test_equals_hta_small[hta_step_based_trace_gp100--None]":
        "test_longest_path_needs_topological_order",
    "tests/analyses/critical_path/test_critical_path.py::test_one_step_reads_only_its_cpu_events_and_equals_every_step_pass[hta_a100_ddp_nccl-False-True]":  # noqa: E501
        "test_longest_path_needs_topological_order",
    "tests/analyses/critical_path/test_critical_path.py::test_one_step_reads_only_its_cpu_events_and_equals_every_step_pass[hta_ns_resolution-True-False]":  # noqa: E501
        "test_longest_path_needs_topological_order",
    "tests/analyses/flags/test_flag_classes.py::test_flags_equal_with_the_kept_classes_on_a_database":
        "test_flags_equal_with_the_kept_classes_on_a_trace_opened_directly",
    "tests/analyses/flags/test_kernel_classes.py::test_rule_on_real_kernel_name[tf32_sm80_s1688gemm:cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4]":  # noqa: E501
        "test_every_rule_is_tested_and_documented",
    "tests/analyses/flags/test_kernel_classes.py::test_cli_flags_json_table_explain":
        "test_every_rule_is_tested_and_documented",
    "tests/analyses/hta/test_hta_bridge.py::test_integer_us_ranks_agree_exactly":
        "test_cpu_only_and_missing_rank_are_input_errors",
    "tests/analyses/ops/test_ops_memory.py::test_commands_end_to_end":
        "test_memory_peaks_against_json",
    "tests/analyses/roofline/test_roofline.py::test_chart_files_offline_and_escaped":
        "test_amd_rows_are_the_datasheet_figures_per_device",
    "tests/analyses/slice/test_slice.py::test_cli":
        "test_a_failed_write_leaves_nothing",
    "tests/analyses/test_comm_analyses.py::test_overlap_equals_hta":
        "test_dlrm_overlap_and_queue_per_rank",
    "tests/analyses/test_definitions.py::test_launch_bound_is_htas_rule":
        "test_steps_only_is_htas_kernel_selection",
    "tests/analyses/test_h200_captures.py::test_ops_replayed_from_cuda_graphs_are_not_counted_as_launch_bound[max-autotune]":  # noqa: E501
        "test_torchscript_on_cuda_keeps_the_accuracy_and_its_speedup_is_the_latency_ratio",
    "tests/analyses/top_kernels/test_top_kernels_memcpy.py::test_cli_kernels_only":
        "test_limit_ranks_memcpy_with_kernels",
    "tests/cli/test_cli.py::test_top_kernels_json_matches_plain_pass":
        "test_every_command_has_help",
    "tests/cli/test_cli.py::test_ingest_then_query_and_skip":
        "test_every_command_has_help",
    "tests/cli/test_startup.py::test_a_command_run_alone_parses_and_helps_as_in_the_full_app":
        "test_messages_cannot_drive_the_terminal",
    "tests/ingest/test_chunking.py::test_tiny_pieces_and_workers_give_the_same_rows[zoology_a100_no_kernels]":
        "test_streamed_end_cut_before_the_last_event",
    "tests/ingest/test_duplicates.py::test_duplicates_of_real_traces_match_a_plain_count[hta_a100_ddp_nccl]":
        "test_keys_made_while_finalizing_equal_keys_made_from_the_stored_rows",
    "tests/present/test_report_sections.py::test_operators_section_is_the_ops_command":
        "test_memory_section_peak_and_chart",
    "tests/storage/test_storage_datasets_runs.py::test_run_folder_in_a_bucket_gives_its_runs_rows":
        "test_database_object_is_one_error_line",
    "tests/storage/test_storage_inputs.py::test_prefix_of_gzip_trace_same_as_local[top-kernels]":
        "test_url_with_credentials_refused",
    "tests/storage/test_storage_pieces.py::test_missing_and_damaged_pieces_are_one_error_line":
        "test_a_first_ingest_killed_before_its_catalog_is_cleaned_up",
    "tests/store/test_export.py::test_round_trip_keeps_kernel_counts_and_sums":
        "test_readable_by_duckdb_pyarrow_and_pandas",
    "tests/store/test_notebook_errors.py::test_sql_from_threads_answers_every_call":
        "test_empty_path_is_an_input_error",
    "tests/test_api_runs.py::test_each_run_gets_its_own_rows[ops]":
        "test_merge_runs_sums_as_the_command_does",
    "tests/test_api_runs.py::test_top_kernels_per_run_is_the_plain_pass_of_each_file":
        "test_merge_runs_sums_as_the_command_does",
    "tests/test_declare.py::test_roofline_method_is_the_command_and_reads_si_text":
        "test_the_method_keywords_are_the_options_fields",
    "tests/test_golden.py::test_golden_fast[traces/tracelens_mi300_resnet18_ddp_train/train_resnet18.json.gz::advise]":
        "test_golden_cases_exist",
    "tests/test_golden.py::test_golden_fast[traces/hta_a100_ddp_nccl/nccl_data.json.gz::hta-temporal]":
        "test_golden_cases_exist",
    "tests/test_golden.py::test_golden_fast[compare::trace-diff::region]":
        "test_golden_cases_exist",
    "tests/test_golden.py::test_golden_fast[traces/hta_a100_ddp_nccl/nccl_data.json.gz::advise]":
        "test_golden_cases_exist",
    "tests/test_hostile_bounds.py::test_step_numbers_that_are_none_are_skipped[report-ProfilerStep#99999999999999999999]":  # noqa: E501
        "test_module_path_ids_keep_equal_texts_apart",
    "tests/test_hostile_db.py::test_a_kept_file_of_another_database_renamed_into_place_is_ignored":
        "test_outputs_never_replace_a_recorded_trace_or_land_in_an_events_folder",
    "tests/test_redact.py::test_compiled_screen_marks_every_row_re2_flags_for_the_new_rules":
        "test_a_secret_dict_key_is_replaced_too",
    "tests/test_reliability.py::test_a_byte_order_mark_before_a_json_trace_is_accepted":
        "test_max_ratio_must_be_finite_and_above_one",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark :data:`SLOW_CASES` slow."""
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix in SLOW_CASES):
            item.add_marker(pytest.mark.slow)
