"""Ctrl-C and SIGTERM stop a running DuckDB query at once (``Interrupted``, exit
130 / 143, no traceback), and ``--engine ray`` fails or stops within seconds where Ray itself
would retry for minutes and ignore Ctrl-C.

The command line runs in a child process started as a terminal starts it (SIGINT raising
KeyboardInterrupt even when this test process runs in the background, where a shell without job
control ignores SIGINT for its children). Timings here (2 cores, shared): a query on
``range(10^13)`` takes hours, so a command that ends within seconds of the signal was stopped.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from conftest import REPO, TRACES, invoke, shared_or_skip

from trace_report import interrupts
from trace_report.errors import EngineError
from trace_report.ingest.engine_ray import effective_address, host_port, probe_address

TRACE = TRACES / "hta_triton_example" / "triton_example.json.gz"
ENDLESS = "SELECT count(*) FROM range(10000000000000) a"
"""A query that runs for hours (DuckDB counts ~2-4e9 rows a second here)."""
STOPPED_WITHIN_S = 5.0
"""Seconds from the signal to the end of the process that count as "at once" (the stop itself is
quick; the rest is the process's exit on a loaded machine)."""

AS_A_TERMINAL = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                 "from trace_report.cli.app import main; main()")
"""``trace-report ARGS`` as the console script runs it, with SIGINT as an interactive shell leaves it."""


def _ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


@contextmanager
def _command(args: list[object]) -> Iterator[subprocess.Popen[str]]:
    """``trace-report ARGS`` in a child process (killed if the test leaves it running)."""
    proc = subprocess.Popen([sys.executable, "-c", AS_A_TERMINAL, *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    killer = threading.Timer(120, proc.kill)  # a hung child must not hang the test run
    killer.start()
    try:
        yield proc
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for_line(proc: subprocess.Popen[str], text: str) -> list[str]:
    """stderr lines up to and with the first one holding ``text`` (the command reached that point)."""
    assert proc.stderr is not None
    lines: list[str] = []
    while line := proc.stderr.readline():
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"the command ended before printing {text!r}: {''.join(lines)}")


def _stop(proc: subprocess.Popen[str], sig: int) -> tuple[float, str]:
    """Send ``sig``; (seconds until the process ended, the rest of its stderr)."""
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, rest = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the command ignored {signal.Signals(sig).name} for 60 s") from None
    return time.monotonic() - sent, rest


# ---------------------------------------------------------------- the command line, end to end


@pytest.mark.parametrize(("sig", "code", "last"), [
    (signal.SIGINT, 130, "Interrupted"),
    pytest.param(signal.SIGTERM, 143, "Interrupted (SIGTERM)", marks=pytest.mark.slow)])
def test_a_signal_stops_a_long_query_at_once(sig: int, code: int, last: str) -> None:
    """``sql`` on a real trace, signalled 1 s into a query of hours: it ends within seconds with
    the exit status of the signal and ``Interrupted`` as the last line (before: the query ran on,
    then a ``RuntimeError`` traceback)."""
    shared_or_skip()
    with _command(["sql", TRACE, ENDLESS, "--unsafe"]) as proc:
        _wait_for_line(proc, "sandbox is off")  # printed just before the query runs
        time.sleep(1.0)
        assert proc.poll() is None
        took, rest = _stop(proc, sig)
    assert proc.returncode == code, rest
    assert "Traceback" not in rest and "Error" not in rest
    assert rest.strip().splitlines()[-1] == last
    assert took < STOPPED_WITHIN_S, f"{took:.1f} s after the signal"


@pytest.mark.slow
def test_an_interrupted_write_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    """``sql --write`` stopped by Ctrl-C in the middle of a statement that would add a table: exit
    130, and the database has no such table and still reads (the transaction was rolled back)."""
    shared_or_skip()
    db = tmp_path / "runs.duckdb"
    assert invoke(["ingest", TRACE, "-o", db]).exit_code == 0
    tables = "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name = 'big'"
    with _command(["sql", db, f"CREATE TABLE big AS {ENDLESS}", "--write", "--unsafe"]) as proc:
        _wait_for_line(proc, "sandbox is off")
        time.sleep(1.0)
        took, rest = _stop(proc, signal.SIGINT)
    assert proc.returncode == 130, rest
    assert took < STOPPED_WITHIN_S
    after = invoke(["sql", db, tables, "-f", "csv"])
    assert after.exit_code == 0, after.stderr
    assert after.stdout.split() == ["n", "0"]
    assert invoke(["top-kernels", db, "-f", "csv"]).exit_code == 0


@pytest.mark.skipif(not _ray_installed(), reason="Ray is not installed")
def test_ray_at_an_address_nothing_listens_on_is_one_error_line_at_once() -> None:
    """``--ray-address 127.0.0.1:1``: one ``Error:`` line naming the address, exit 1, within
    seconds (before: Ray retried for 10+ minutes, ignoring Ctrl-C)."""
    shared_or_skip()
    start = time.monotonic()
    with _command(["top-kernels", TRACE, "--engine", "ray", "--ray-address", "127.0.0.1:1"]) as proc:
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the command still waited for Ray after 60 s") from None
    took = time.monotonic() - start
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "127.0.0.1:1" in lines[0], err
    assert "connection refused" in lines[0]
    assert took < 15, f"{took:.1f} s"


@contextmanager
def _not_a_ray_cluster() -> Iterator[tuple[int, list[socket.socket]]]:
    """A TCP port on every interface that accepts connections and never answers (as a wrong port
    does): (port, the connections accepted so far)."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                accepted.append(server.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        done.set()
        thread.join()
        for s in [*accepted, server]:
            s.close()


@pytest.mark.slow
@pytest.mark.skipif(not _ray_installed(), reason="Ray is not installed")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_ray_connect_that_hangs(sig: int, code: int) -> None:
    """A port that accepts connections but is no Ray cluster: Ray retries for ever inside C++,
    where Python runs no handler; a signal sent once Ray connects (the second connection the port
    sees, after the reachability probe) ends the command within seconds with ``Interrupted``.
    About 15-25 s here, most of it ``import ray``."""
    shared_or_skip()
    with _not_a_ray_cluster() as (port, accepted), \
            _command(["top-kernels", TRACE, "--engine", "ray", "--ray-address", f"127.0.0.1:{port}"]) as proc:
        deadline = time.monotonic() + 90
        while len(accepted) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(accepted) >= 2 and proc.poll() is None, "Ray never connected"
        time.sleep(0.5)
        took, rest = _stop(proc, sig)
    assert proc.returncode == code, rest
    assert "Traceback" not in rest and rest.strip().splitlines()[-1].startswith("Interrupted")
    assert took < STOPPED_WITHIN_S + 5, f"{took:.1f} s after the signal"  # Ray's exit handlers add a few s


@pytest.mark.slow
@pytest.mark.skipif(not _ray_installed(), reason="Ray is not installed")
def test_a_ray_connect_that_hangs_fails_after_its_timeout() -> None:
    """The same port without a signal: :func:`ray_runtime` gives up after ``connect_timeout_s`` with
    an :class:`EngineError` naming the time (in a child process: the abandoned connect stays there)."""
    with _not_a_ray_cluster() as (port, _):
        code = ("import time\nfrom trace_report.ingest.engine_ray import ray_runtime, require_ray\n"
                "require_ray()\nstart = time.monotonic()\n"
                "try:\n"
                f"    with ray_runtime('127.0.0.1:{port}', connect_timeout_s=3):\n"
                "        print('connected')\n"
                "except Exception as exc:\n"
                "    print(type(exc).__name__, round(time.monotonic() - start), exc)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    kind, seconds, message = out.stdout.strip().split(" ", 2)
    assert kind == "EngineError", out.stdout + out.stderr
    assert 3 <= int(seconds) <= 6 and "no Ray cluster answered within 3 s" in message


# ---------------------------------------------------------------- the pieces, in this process


def test_every_open_duckdb_connection_is_found_and_a_query_on_it_stopped() -> None:
    """:func:`interrupts.interrupt_queries` (what the handler calls) from another thread stops a
    query of hours on a connection nobody registered, within a second; the connection then runs
    the next query."""
    con = duckdb.connect(":memory:")
    assert any(c is con for c in interrupts.open_connections())
    told: list[int] = []
    timer = threading.Timer(0.3, lambda: told.append(interrupts.interrupt_queries()))
    start = time.monotonic()
    timer.start()
    with pytest.raises(duckdb.InterruptException):
        con.execute(ENDLESS).fetchall()
    stopped_s = time.monotonic() - start
    timer.join(5.0)  # the query can end before the timer thread has appended what it told
    assert stopped_s < 2.0 and told and told[0] >= 1
    assert con.execute("SELECT 42").fetchall() == [(42,)]
    con.close()


def test_checked_turns_what_follows_a_signal_into_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a signal, whatever the command raised (DuckDB's ``Query interrupted``, our error
    wrapping it) or returned is :class:`interrupts.Interrupted` with 128 + the signal; before it,
    errors pass unchanged."""
    def fails() -> None:
        raise RuntimeError("Query interrupted")

    with pytest.raises(RuntimeError):
        interrupts.checked(fails)
    assert interrupts.checked(lambda: 7) == 7
    monkeypatch.setattr(interrupts._state, "signum", int(signal.SIGTERM))
    with pytest.raises(interrupts.Interrupted) as caught:
        interrupts.checked(fails)
    assert caught.value.exit_code == 143 and caught.value.message == "Interrupted (SIGTERM)"
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(interrupts.Interrupted):
        interrupts.checked(lambda: 0)
    monkeypatch.setattr(interrupts._state, "signum", int(signal.SIGINT))
    with pytest.raises(interrupts.Interrupted) as caught:
        interrupts.checked(fails)
    assert caught.value.exit_code == 130 and caught.value.message == "Interrupted"


def test_handling_restores_the_handlers_and_keeps_an_ignored_sigint_ignored() -> None:
    """The handlers are in place inside the block (again after a library replaced them:
    :func:`interrupts.reinstall`), an ignored SIGINT stays ignored, and the old ones are back after."""
    before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    with interrupts.handling():
        assert signal.getsignal(signal.SIGTERM) is interrupts._on_signal
        assert interrupts.received() is None
    assert {s: signal.getsignal(s) for s in interrupts.SIGNALS} == before
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts.handling():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # what ray.init does
            interrupts.reinstall()
            assert signal.getsignal(signal.SIGTERM) is interrupts._on_signal
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert {s: signal.getsignal(s) for s in interrupts.SIGNALS} == before


def _terminate_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)


def test_a_forked_process_ends_quietly_on_sigterm() -> None:
    """A process forked while the handlers are installed (a decoding worker, HTA's pool, which
    stop with SIGTERM) dies of the signal as without a handler, not with a Terminated traceback."""
    import multiprocessing

    with interrupts.handling():
        child = multiprocessing.get_context("fork").Process(target=_terminate_self)
        child.start()
        child.join(30)
    assert child.exitcode == -signal.SIGTERM


def test_the_probe_refuses_an_address_nothing_listens_on_at_once() -> None:
    start = time.monotonic()
    with pytest.raises(EngineError, match=r"cannot reach Ray at 127\.0\.0\.1:1 \(connection refused\)"):
        probe_address("127.0.0.1:1")
    assert time.monotonic() - start < 2.0
    with _not_a_ray_cluster() as (port, _):
        probe_address(f"ray://localhost:{port}")  # something listens: left to Ray
    probe_address("auto")  # no port: left to Ray


def test_addresses_as_ray_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    assert host_port("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert host_port("ray://head.example:10001") == ("head.example", 10001)
    assert host_port("[::1]:6379") == ("::1", 6379)
    assert host_port("auto") is None and host_port("head:port") is None
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert effective_address(None) is None and effective_address("auto") == "auto"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert effective_address(None) == effective_address("auto") == "10.0.0.5:6379"
    assert effective_address("ray://other:10001") == "ray://other:10001"
