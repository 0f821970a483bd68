"""The Ray engine: decoding jobs and per-partition aggregations as Ray tasks (``docs/scaling.md``).

Optional: ``pip install "trace-report[ray]"``; ``import ray`` happens only here, inside the
functions that need it (:func:`require_ray`), so the local engine and the command line never load
it. Without Ray, asking for it raises :class:`~trace_report.errors.UsageError` with the install line.

- :func:`ray_runtime`: connect to a cluster (``address``: ``auto``, ``ray://host:10001``, or
  ``host:6379``) or start a local one; leave a runtime that was already up alone.
- :class:`RayEngine`: the :class:`~trace_report.ingest.engine.Engine` of the ingest pipeline.
  Each job (:class:`~trace_report.ingest.decoding.Job`: a small file, a piece of a large file, or a
  whole large file when there are at least as many large files as CPUs in the cluster) is one
  task that writes its own Parquet piece into the database's pieces folder: that folder and the
  inputs must be on a filesystem shared by the driver and every worker. A task whose worker dies
  is run again by Ray (``max_retries``); it rewrites the same piece paths, so a retry is harmless.
- :func:`map_tasks`: one task per item, results in order (the aggregations of
  :mod:`trace_report.analyses.common.distributed`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from trace_report import interrupts
from trace_report.errors import EngineError, UsageError
from trace_report.ingest.engine import INFLIGHT
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.storage import Location
from trace_report.store.tracedb import IngestSummary

INSTALL_HINT = 'pip install "trace-report[ray]"'
MAX_RETRIES = 3
"""Times Ray runs a task again after its worker process died (Ray's own default for tasks)."""
PROBE_TIMEOUT_S = 3.0
"""Seconds a TCP connection to a cluster's ``host:port`` may take before the address counts as
unreachable (:func:`probe_address`; a refused connection fails at once)."""
CONNECT_TIMEOUT_S = 30.0
"""Seconds ``ray.init`` may take to connect to a cluster (a port that accepts connections but is no
Ray cluster's makes Ray retry for ever, each round far longer than a caller waits)."""


def require_ray() -> Any:
    """The ``ray`` module, or :class:`UsageError` saying how to install it."""
    try:
        import ray  # heavy and optional: only the Ray engine loads it
    except ImportError as exc:
        raise UsageError(f"--engine ray needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


@contextmanager
def ray_runtime(address: str | None = None, num_cpus: int | None = None, *,
                connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """Yield the ``ray`` module with a runtime up: the one already initialised in this process,
    else a connection to ``address`` (``auto`` = the cluster this machine belongs to,
    ``ray://host:10001``, or ``host:6379``; ``$RAY_ADDRESS`` when ``address`` is None or ``auto``,
    Ray's own rule), else a new local runtime of ``num_cpus`` CPUs (default: all). A runtime
    started here is shut down on exit.

    Connecting is bounded and interruptible (Ray's own connect retries for minutes and ignores
    Ctrl-C): a ``host:port`` nothing listens on fails within :data:`PROBE_TIMEOUT_S`
    (:func:`probe_address`), before Ray is imported; any connect that takes longer than
    ``connect_timeout_s`` fails, and Ctrl-C or SIGTERM stops the wait (:func:`_init_bounded`).
    Raises :class:`EngineError` when the cluster cannot be reached, :class:`UsageError` without Ray."""
    address = address or None
    target = effective_address(address)
    if target not in (None, "auto", "local") and not _initialized():
        if not _ray_installed():
            require_ray()  # the install line, before any network wait
        probe_address(target)
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                  "log_to_driver": False}
        try:
            if target is not None and target != "local":
                _init_bounded(ray, address, kwargs, connect_timeout_s)
            else:
                _start_local(ray, address, num_cpus, kwargs)
        except EngineError:
            raise
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception when its local node does not start
            where = target or "a new local runtime"
            raise EngineError(f"cannot start Ray ({where}): {str(exc).splitlines()[0]}") from exc
        finally:
            interrupts.reinstall()  # ray.init's own SIGTERM handler exits with status 15, without "Interrupted"
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def _start_local(ray: Any, address: str | None, num_cpus: int | None, kwargs: dict[str, Any]) -> None:
    """``ray.init`` of a new local runtime, in this thread (it starts and waits for Ray's processes
    in Python, where Ctrl-C arrives). It installs a SIGTERM handler of its own at once, which
    exits with status 15: that exit is :class:`~trace_report.interrupts.Terminated`, reported as
    every SIGTERM is (``Interrupted``, 143)."""
    try:
        ray.init(address=address, num_cpus=num_cpus, **kwargs)
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        raise interrupts.Terminated() from exc


def effective_address(address: str | None) -> str | None:
    """The address ``ray.init(address=...)`` connects to before it resolves ``auto``:
    ``$RAY_ADDRESS`` when set and ``address`` is None or ``auto``, else ``address``; None (and
    ``local``) start a new local runtime."""
    env = os.environ.get("RAY_ADDRESS")
    return env if env and address in (None, "auto") else address


def _initialized() -> bool:
    """Whether Ray is imported and its runtime up in this process (then no address is used)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def _ray_installed() -> bool:
    """Whether ``import ray`` can work, without importing it (several seconds)."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


def host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``host:port``, ``[v6]:port`` or ``ray://host:port``, else None (no port:
    left to Ray's own error)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def _local_ips(host: str) -> list[str]:
    """The hosts a connection to ``host`` may go to: ``host`` itself and, for a loopback name, this
    machine's outward address, which Ray connects to instead (``resolve_ip_for_localhost``: the
    address of the interface a datagram to a public address would leave by; nothing is sent)."""
    if host not in ("localhost", "::1") and not host.startswith("127."):
        return [host]
    hosts = [host]
    with suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.connect(("8.8.8.8", 80))
        hosts.append(udp.getsockname()[0])
    return hosts


def probe_address(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`EngineError` unless something accepts a TCP connection at ``address``'s
    ``host:port`` within ``timeout_s`` (a refused connection fails at once). An address without a
    port is left to Ray. Interruptible (Ctrl-C and SIGTERM stop the wait)."""
    parsed = host_port(address)
    if parsed is None:
        return
    host, port = parsed
    why = "no answer"
    for candidate in _local_ips(host):
        try:
            with socket.create_connection((candidate, port), timeout=timeout_s):
                return
        except ConnectionRefusedError:
            why = "connection refused"
        except socket.gaierror as exc:
            why = f"unknown host: {exc.strerror or exc}"
        except TimeoutError:
            why = f"no answer within {timeout_s:g} s"
        except OSError as exc:
            why = exc.strerror or str(exc)
    raise EngineError(f"cannot reach Ray at {address} ({why}): is a cluster running there? "
                      "(`ray start --head` prints its address; --ray-address auto finds this machine's)")


def _init_bounded(ray: Any, address: str | None, kwargs: dict[str, Any], timeout_s: float) -> None:
    """``ray.init(address=address, **kwargs)`` in a helper thread, waited for at most ``timeout_s``
    in this one, where Ctrl-C and SIGTERM still arrive (``ray.init`` blocks in C++, where Python
    runs no signal handler). A connect that does not end in time raises :class:`EngineError`;
    its thread is left behind (a daemon: it does not keep the process alive)."""
    outcome: dict[str, BaseException] = {}

    def connect() -> None:
        try:
            ray.init(address=address, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    quiet = _NotMainThreadNote()
    worker_logger = logging.getLogger("ray._private.worker")
    worker_logger.addFilter(quiet)
    try:
        thread = threading.Thread(target=connect, name="ray-connect", daemon=True)
        thread.start()
        thread.join(timeout_s)
    finally:
        worker_logger.removeFilter(quiet)
    if thread.is_alive():
        raise EngineError(f"cannot start Ray ({effective_address(address)}): no Ray cluster answered within "
                          f"{timeout_s:g} s (is this its GCS port, 6379 by default, or ray://HOST:10001?)")
    if "error" in outcome:
        raise outcome["error"]


class _NotMainThreadNote(logging.Filter):
    """Drops Ray's warning that ``ray.init`` outside the main thread sets no SIGTERM handler: the
    command line's own handler is the one wanted (:mod:`trace_report.interrupts`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def cluster_cpus() -> int:
    """CPUs of the Ray cluster this process is connected to (at least 1)."""
    return max(1, int(require_ray().cluster_resources().get("CPU", 1)))


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """The one remote function: run ``fn(*args)`` in a Ray worker."""
    return fn(*args)


def _remote(ray: Any, max_retries: int) -> Any:
    return ray.remote(_call).options(max_retries=max_retries, num_cpus=1)


def _get(ray: Any, ref: Any, what: str) -> Any:
    """``ray.get(ref)``; an exception the task raised is raised again as itself, a task lost beyond
    its retries as :class:`EngineError`."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else None
        if cause is not None and not isinstance(cause, ray.exceptions.RayError):
            raise cause from None
        raise EngineError(f"{what}: a Ray task failed ({str(exc).splitlines()[0]})") from exc
    except ray.exceptions.RayError as exc:
        raise EngineError(f"{what}: a Ray task was lost ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})") from exc


def _cancel(ray: Any, refs: list[Any]) -> None:
    """Stop these tasks (their worker processes are killed); finished ones are left alone."""
    for ref in refs:
        with suppress(Exception):  # a finished task cannot be cancelled
            ray.cancel(ref, force=True)


class RayFuture:
    """A submitted job: :meth:`result` waits for it (``concurrent.futures``' shape)."""

    def __init__(self, engine: RayEngine, ref: Any, what: str) -> None:
        self.engine, self.ref, self.what = engine, ref, what

    def result(self) -> Any:
        try:
            return _get(self.engine.ray, self.ref, self.what)
        finally:
            self.engine.pending.pop(id(self), None)


class RayEngine:
    """Decoding jobs as Ray tasks (an :class:`~trace_report.ingest.engine.Engine`).

    Needs a runtime (:func:`ray_runtime`). ``slots`` = CPUs of the cluster; up to twice that many
    pieces of one file are in flight; large files go to one task each when there are at least
    ``slots`` of them (``file_tasks``), so that the driver neither streams nor decodes them.
    A trace in object storage goes to one task that reads the URL itself (``reads_urls``) and
    returns its Parquet pieces, so the driver and the workers need share no path.
    """

    file_tasks = True
    reads_urls = True

    def __init__(self, max_retries: int = MAX_RETRIES) -> None:
        self.ray = require_ray()
        if not self.ray.is_initialized():
            raise EngineError("the Ray engine needs a Ray runtime (trace_report.ingest.engine_ray.ray_runtime)")
        self.slots = cluster_cpus()
        self.inflight = max(INFLIGHT, 2 * self.slots)
        self.remote = _remote(self.ray, max_retries)
        self.pending: dict[int, RayFuture] = {}

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> RayFuture:
        what = (getattr(args[0], "label", None) if args else None) or getattr(fn, "__name__", "a job")
        future = RayFuture(self, self.remote.remote(fn, *args), str(what))
        self.pending[id(future)] = future
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel the jobs not collected (their workers are stopped) and wait for them to end, so
        that no task writes a piece after the driver rolled an ingest back."""
        refs = [f.ref for f in self.pending.values()]
        self.pending.clear()
        if not refs or not cancel_futures:
            return
        _cancel(self.ray, refs)
        if wait:
            self.ray.wait(refs, num_returns=len(refs), timeout=30)


def map_tasks(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], *, what: str = "aggregation",
              max_retries: int = MAX_RETRIES) -> list[Any]:
    """``[fn(*item) for item in items]`` with each call a Ray task (needs a runtime); results in
    the order of ``items``. Exceptions raised by ``fn`` are raised again here."""
    ray = require_ray()
    if not ray.is_initialized():
        raise EngineError("map_tasks needs a Ray runtime (ray_runtime)")
    remote = _remote(ray, max_retries)
    refs = [remote.remote(fn, *item) for item in items]
    try:
        return [_get(ray, ref, what) for ref in refs]
    except BaseException:
        _cancel(ray, refs)
        raise


def ingest_with_ray(paths: list[Location], db_path: Path, options: IngestOptions | None = None, *,
                    address: str | None = None, num_cpus: int | None = None,
                    max_retries: int = MAX_RETRIES) -> IngestSummary:
    """:func:`~trace_report.ingest.pipeline.ingest_to_database` with its jobs as Ray tasks:
    same schema, dedup and changed-file rules, lock and atomic replacement (the driver writes
    the catalog). ``address``/``num_cpus``: see :func:`ray_runtime`."""
    with ray_runtime(address, num_cpus):
        return ingest_to_database(paths, db_path, options, engine=RayEngine(max_retries))
