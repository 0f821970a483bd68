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
  :mod:`trace_report.analyses.distributed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from trace_report.errors import EngineError, UsageError
from trace_report.ingest.engine import INFLIGHT
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database
from trace_report.store.tracedb import IngestSummary

INSTALL_HINT = 'pip install "trace-report[ray]"'
MAX_RETRIES = 3
"""Times Ray runs a task again after its worker process died (Ray's own default for tasks)."""


def require_ray() -> Any:
    """The ``ray`` module, or :class:`UsageError` saying how to install it."""
    try:
        import ray  # heavy and optional: only the Ray engine loads it
    except ImportError as exc:
        raise UsageError(f"--engine ray needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


@contextmanager
def ray_runtime(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """Yield the ``ray`` module with a runtime up: the one already initialised in this process,
    else a connection to ``address`` (``auto`` = the cluster this machine belongs to, or
    ``ray://host:10001``), else a new local runtime of ``num_cpus`` CPUs (default: all). A runtime
    started here is shut down on exit. Raises :class:`EngineError` when the cluster cannot be
    reached."""
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                  "log_to_driver": False}
        try:
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=num_cpus, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = address or "a new local runtime"
            raise EngineError(f"cannot start Ray ({where}): {str(exc).splitlines()[0]}") from exc
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


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
    """

    file_tasks = True

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


def ingest_with_ray(paths: list[Path], db_path: Path, options: IngestOptions | None = None, *,
                    address: str | None = None, num_cpus: int | None = None,
                    max_retries: int = MAX_RETRIES) -> IngestSummary:
    """:func:`~trace_report.ingest.pipeline.ingest_to_database` with its jobs as Ray tasks:
    same schema, dedup and changed-file rules, lock and atomic replacement (the driver writes
    the catalog). ``address``/``num_cpus``: see :func:`ray_runtime`."""
    with ray_runtime(address, num_cpus):
        return ingest_to_database(paths, db_path, options, engine=RayEngine(max_retries))
