"""Ctrl-C and SIGTERM while a command runs: stop every running DuckDB query at once, then unwind
through the cleanup of each layer (``finally`` blocks: a database's temporary copy removed, new
pieces removed, worker processes stopped), and end with ``Interrupted`` and exit 130 / 143
(128 + the signal's number, the status a shell reports for a program the signal ended).

Why a handler is not enough on its own. Python runs a signal handler in the main thread between
bytecodes; DuckDB's Python client calls back into Python (``PyErr_CheckSignals``) while a query
runs, so the handler does run mid-query (soon after the signal), but an exception raised
there does not stop the query: DuckDB finishes it and only then raises ``RuntimeError: Query
interrupted`` (DuckDB 2.0.1, measured: Ctrl-C 3 s into a 10 s query, and the command ended after
10 s with a traceback). The handler here
therefore first calls ``interrupt()`` on every open DuckDB connection of this process, which
ends a running query at once (the main thread's with ``RuntimeError``, another thread's with
``duckdb.InterruptException``), then raises :class:`KeyboardInterrupt` (SIGINT) or
:class:`Terminated` (SIGTERM) so that Python code unwinds as it did before.

The open connections are found through the garbage collector, which tracks every
``DuckDBPyConnection`` (:func:`open_connections`): every place that connects (databases, the
in-memory ingest, exports, partitions, a user's ``sql``) is covered without a hook in each, and
nothing keeps a connection alive. Exceptions that the stop becomes on the way up (a DuckDB error,
one of our errors wrapping it) are turned back into :class:`Interrupted` by :func:`checked`.

Standard library only (DuckDB is looked up in ``sys.modules``, never imported): the command line
imports this at start-up, and the ingest and store layers may use it.
"""

from __future__ import annotations

import gc
import operator
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import compress, repeat
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a command (SIGHUP is left to its default: the process ends)."""


class Terminated(BaseException):
    """SIGTERM arrived: unwind (cleanup runs in ``finally`` blocks) and exit 143. A
    :class:`BaseException`, as :class:`KeyboardInterrupt` is, so that ``except Exception`` (an
    error turned into a warning) does not swallow the request to stop."""


class Interrupted(BaseException):
    """The command was stopped by ``signum``: what to print and the exit status."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal's number: 130 after Ctrl-C, 143 after SIGTERM."""
        return 128 + self.signum

    @property
    def message(self) -> str:
        """The one line on stderr: ``Interrupted``, with the signal named unless it was Ctrl-C."""
        return "Interrupted" if self.signum == signal.SIGINT else f"Interrupted ({signal.Signals(self.signum).name})"


class _State:
    """What :func:`handling` installed: the process that installed it (a forked child inherits
    the handlers but not the connections' queries) and the first signal received since."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.signum: int | None = None
        self.installed: tuple[int, ...] = ()


_state = _State()


def received() -> int | None:
    """The first stopping signal received since :func:`handling` began, else None."""
    return _state.signum


def open_connections() -> list[Any]:
    """Every open DuckDB connection (``DuckDBPyConnection``, cursors included) of this process,
    none when DuckDB was never imported. Found among the objects the garbage collector tracks (a
    connection is one), generation by generation so that no single list of every object is made,
    and filtered by exact type in C (``compress``/``map``), several times faster than a Python
    loop over millions of tracked objects; with pandas, pyarrow and DuckDB loaded a command tracks
    ~75,000."""
    module = sys.modules.get("_duckdb")
    kind = getattr(module, "DuckDBPyConnection", None)
    if kind is None:
        return []
    found: list[Any] = []
    for generation in range(3):
        objects = gc.get_objects(generation)
        found.extend(compress(objects, map(operator.is_, map(type, objects), repeat(kind))))
    return found


def interrupt_queries() -> int:
    """Call ``interrupt()`` on every open DuckDB connection: a running query ends with an error
    at once, an idle connection is not affected (its next query runs). Returns how many
    connections were told."""
    told = 0
    for con in open_connections():
        try:
            con.interrupt()
        except Exception:  # noqa: BLE001 - a closed connection cannot be interrupted, and needs not be
            continue
        told += 1
    return told


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The handler: remember the first signal, stop the queries, raise in the main thread. In a
    process forked while it was installed (a decoding worker, a library's process pool) it is
    Python's own behaviour instead: KeyboardInterrupt for Ctrl-C, and SIGTERM ends the process
    quietly, as without a handler (the parent, which stops its workers with SIGTERM, cleans up)."""
    if os.getpid() != _state.pid:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _state.signum is None:
        _state.signum = signum
    interrupt_queries()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated()


@contextmanager
def handling() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM stop the running DuckDB queries and raise
    :class:`KeyboardInterrupt` / :class:`Terminated` (the handlers before are restored after it).
    A signal that was ignored when the block began (SIGINT of a command started with ``&`` by a
    shell without job control, or under ``nohup``) stays ignored. Outside the main thread (where
    Python cannot install handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = _state.pid, _state.signum, _state.installed
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _state.pid, _state.signum = os.getpid(), None
    _state.installed = tuple(sig for sig, handler in previous.items() if handler is not signal.SIG_IGN)
    for sig in _state.installed:
        signal.signal(sig, _on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        _state.pid, _state.signum, _state.installed = saved


def reinstall() -> None:
    """Install the handlers of :func:`handling` again where a library replaced them (``ray.init``
    sets a SIGTERM handler of its own that exits with status 15); nothing outside
    :func:`handling` or outside the main thread."""
    if _state.pid != os.getpid() or threading.current_thread() is not threading.main_thread():
        return
    for sig in _state.installed:
        if signal.getsignal(sig) is not _on_signal:
            signal.signal(sig, _on_signal)


def checked(call: Callable[[], T]) -> T:
    """``call()``; once a stopping signal was received during it, whatever it raised (the
    :class:`KeyboardInterrupt` itself, DuckDB's ``Query interrupted``, an error of ours wrapping
    it) or returned is replaced by :class:`Interrupted`."""
    try:
        result = call()
    except BaseException as exc:
        if _state.signum is None:
            raise
        raise Interrupted(_state.signum) from exc
    if _state.signum is not None:
        raise Interrupted(_state.signum)
    return result
