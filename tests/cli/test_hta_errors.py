"""`trace-report hta` failures are one `Error:` line (HTA's message kept, its traceback behind
--debug); HTA's warnings, log lines and pool workers' signals stay off the user's terminal."""

from __future__ import annotations

import multiprocessing
import signal
import warnings
from types import FrameType

import pytest
from conftest import TRACES, invoke, shared_or_skip

TRITON = "tracelens_mi300_torch_compile_triton"
"""A 6 KB MI300 trace on which HTA 0.6.1 under pandas 3 fails while parsing: its
``transform_correlation_to_index`` writes correlation indices 160-182 into an int8 column
(TypeError: Invalid value '[160 ... 182]' for dtype 'int8'); found by running every hta analysis
on every folder of ../shared/data/traces."""


@pytest.fixture(autouse=True)
def _needs_hta_and_traces() -> None:
    pytest.importorskip("hta")
    shared_or_skip()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("analysis", ["temporal", "idle", "launch"])
def test_an_hta_failure_is_one_error_line_with_htas_message(analysis: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = invoke(["hta", analysis, TRACES / TRITON])
    assert out.exit_code == 1
    assert out.stdout == ""
    lines = _lines(out.stderr)
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("Error: HTA cannot read these traces (TypeError: Invalid value")
    assert "for dtype 'int8'" in lines[0] and "transform_correlation_to_index" in lines[0]
    assert "Traceback" not in out.output and "Warning" not in out.output
    assert caught == []


def test_debug_shows_htas_traceback_above_the_error_line() -> None:
    out = invoke(["hta", "temporal", TRACES / TRITON, "--debug"])
    assert out.exit_code == 1
    lines = _lines(out.stderr)
    assert lines[0] == "Traceback (most recent call last):"
    assert any("hta/common/trace.py" in line for line in lines)
    assert lines[-2].startswith("TypeError: Invalid value")
    assert lines[-1].startswith("Error: HTA cannot read these traces (TypeError:")


def test_a_successful_run_prints_no_hta_output_or_warnings() -> None:
    """HTA prints progress ("Parsed ... in 0.13 seconds"), logs and raises 7 Pandas4Warnings on
    this 7 KB MI250 trace; only the table comes out."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = invoke(["hta", "temporal", TRACES / "hta_amd_mi250", "-f", "csv"])
    assert out.exit_code == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.splitlines()[0].startswith("rank,idle_us,compute_us,non_compute_us,span_us")
    assert len(out.stdout.splitlines()) == 2  # the header and rank 0: no "Parsed ..." lines
    assert caught == []


def test_launch_without_launches_htas_knows_says_so() -> None:
    """HTA pairs only cudaLaunchKernel(ExC) and mtiaLaunchKernel calls with kernels; the MI250
    trace launches its 14 kernels with hipLaunchKernel (12) and hipExtModuleLaunchKernel (2), so
    HTA has no rows: a note says why instead of an empty output and exit 0 alone."""
    out = invoke(["hta", "launch", TRACES / "hta_amd_mi250"])
    assert out.exit_code == 0, out.stderr
    assert out.stdout == ""
    lines = _lines(out.stderr)
    assert len(lines) == 1 and lines[0].startswith("note: HTA paired no launch call with a GPU op")
    assert "hipLaunchKernel" in lines[0]


def _worker_signals(_: int) -> tuple[bool, bool]:
    return signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def _raise(signum: int, frame: FrameType | None) -> None:
    raise RuntimeError("the parent's SIGTERM handler")


def _pool_signals() -> list[tuple[bool, bool]]:
    pool = multiprocessing.get_context("fork").Pool(1)
    try:
        return pool.map(_worker_signals, [0])
    finally:
        pool.close()
        pool.join()


def test_htas_pool_workers_get_the_default_sigterm_not_the_clis_handler() -> None:
    """HTA parses ranks in a fork pool and ends it with SIGTERM: a worker that inherited the
    CLI's raising handler printed a traceback ("Process ForkPoolWorker-1: ... Terminated") under
    the table of hta_trace_diff and param_dlrm_kineto_v100x8."""
    from trace_report.analyses.hta import _quiet

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        with _quiet():
            inside = _pool_signals()
        outside = _pool_signals()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert inside == [(True, True)]
    assert outside[0][0] is False  # forks outside HTA keep the process's handler
