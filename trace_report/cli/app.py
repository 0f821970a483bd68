"""The ``trace-report`` command line: the command modules by name (:data:`COMMAND_MODULES`), and
the one error mapper.

A run imports the module of the command it names alone (:func:`main`); ``--help``, an unknown
name and ``from trace_report.cli.app import app`` import every one (:func:`load_commands`). A
module that fails to import fails its command's start-up and every ``--help``: a command is
never silently dropped.

Errors: one line ``Error: ...`` on stderr; exit 1 for bad input or a failed analysis (a full disk
included), 2 for a usage error, 130 after Ctrl-C and 143 after SIGTERM (docs/cli.md). A reader of
the output that went away (``trace-report ... | head -1``: EPIPE) ends the command quietly with
141, the status of a program that SIGPIPE ended, as ``yes | head -1`` reports it.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from trace_report import __version__, declare, interrupts
from trace_report.cli.declared import register
from trace_report.cli.options import err
from trace_report.cli.registry import app as _app
from trace_report.errors import TraceReportError, UsageError
from trace_report.interrupts import Terminated

COMMAND_MODULES = {
    "capture": "capture", "ingest": "ingest", "report": "report", "export": "export",
    "sql": "sql", "hta": "hta",
}
"""The commands that are not made from an analysis' declaration, and their module in
:mod:`trace_report.cli` (it registers the command on the app when imported)."""
COMMAND_ORDER = ["capture", "ingest", "top-kernels", "breakdown", "flags", "advise", "ops", "overlap", "queue",
                 "launches", "sequences", "modules", "critical-path", "collectives", "memory", "roofline", "slice",
                 "compare", "report", "export", "sql", "hta"]
"""The order of ``trace-report --help`` (registration order depends on which module loads first);
a declared command not listed here comes after these, by name."""


def load_commands(names: Iterable[str] | None = None) -> None:
    """Register the commands ``names`` (every command when None) on the app: a command module of
    :data:`COMMAND_MODULES` is imported (it registers itself), a declared analysis command is made
    from its declaration (:mod:`trace_report.cli.declared`). The registered commands are kept
    in :data:`COMMAND_ORDER`, the declared ones after those listed there.

    A command run by name needs its own alone. Raises :class:`KeyError` for a name that is no
    command, ImportError where a module is broken."""
    declared = declare.commands() if names is None else {}
    for name in COMMAND_ORDER if names is None else names:
        if name in COMMAND_MODULES:
            importlib.import_module(f"trace_report.cli.{COMMAND_MODULES[name]}")
        else:
            register(declared.get(name) or declare.command(name))
    for cmd in declared.values():
        register(cmd)
    order = COMMAND_ORDER + sorted(set(declared) - set(COMMAND_ORDER))  # noqa: RUF005 - two lists
    _app.registered_commands.sort(key=lambda c: order.index(c.name) if c.name in order else len(order))


def is_command(name: str | None) -> bool:
    """Whether ``name`` is a command (a module's or a declared one), found without importing others."""
    return name is not None and (name in COMMAND_MODULES or declare.command_package(name) is not None)


def __getattr__(name: str) -> typer.Typer:
    """``app``: the Typer app with every command registered (tests, docs, ``python -m
    trace_report.capture``)."""
    if name == "app":
        load_commands()
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trace-report {__version__}")
        raise typer.Exit(0)


@_app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Capture and analyze PyTorch Profiler traces: top kernels, SQL, regions, rooflines."""


BROKEN_PIPE = 141
"""The exit status after EPIPE on the output: 128 + SIGPIPE, what a shell reports for a program
that SIGPIPE ended (``set -o pipefail`` sees it; no traceback, no message)."""

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Write errors that are the disk's, not a bug: one ``Error:`` line, exit 1."""


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that what is still buffered for a closed pipe is dropped at
    exit instead of raising again ("Exception ignored ... BrokenPipeError")."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _pacified() -> bool:
    """Whether typer's main met EPIPE (it wraps stdout in click's ``PacifyFlushWrapper`` and
    exits 1)."""
    return type(sys.stdout).__name__ == "PacifyFlushWrapper"


def _flush_stdout(code: int) -> int:
    """Flush stdout before the exit: a closed pipe is :data:`BROKEN_PIPE`, a full disk one
    ``Error:`` line and exit 1 (a command that failed keeps its own status)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return code or BROKEN_PIPE
    except OSError as exc:
        err.print(f"Error: stdout: cannot write ({exc.strerror or exc})", markup=False)
        return code or 1
    except ValueError:  # closed
        pass
    return code


def run(call: Callable[[], object]) -> int:
    """Run a Typer app call and map every outcome to an exit code, printing one ``Error:`` line
    for bad input and usage errors, ``Interrupted`` after Ctrl-C or SIGTERM. Shared by
    ``trace-report`` and ``python -m trace_report.capture``.

    While the call runs, Ctrl-C and SIGTERM stop every running DuckDB query at once and unwind
    (:mod:`trace_report.interrupts`); whatever the command then raises or returns is reported
    as ``Interrupted`` with 130 / 143."""
    with interrupts.handling():
        try:
            return _outcome(call)
        except (KeyboardInterrupt, Terminated) as exc:  # a signal just after the command ended
            stopped = interrupts.Interrupted(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
            err.print(stopped.message, markup=False)
            return stopped.exit_code


def _outcome(call: Callable[[], object]) -> int:
    try:
        returned = interrupts.checked(call)  # click returns (not raises) Exit codes with standalone_mode=False
        if returned == 130:  # 130 after Ctrl-C
            raise KeyboardInterrupt
        if isinstance(returned, int) and returned:
            return returned
    except interrupts.Interrupted as exc:
        err.print(exc.message, markup=False)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        err.print("Interrupted", markup=False)
        return 130
    except Terminated:
        err.print("Interrupted (SIGTERM)", markup=False)
        return 143
    except typer.TyperException as exc:  # usage errors (typer's ClickException)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"Error: {message}", markup=False)
        return getattr(exc, "exit_code", 2)
    except UsageError as exc:
        err.print(f"Error: {exc}", markup=False)
        return 2
    except TraceReportError as exc:
        err.print(f"Error: {exc}", markup=False)
        return 1
    except BrokenPipeError:  # the reader of stdout (or of an -o pipe) went away: `| head -1`
        _discard_stdout()
        return BROKEN_PIPE
    except SystemExit:
        if _pacified():  # typer's main caught the EPIPE first and exits 1: the same quiet exit
            _discard_stdout()
            return BROKEN_PIPE
        raise
    except OSError as exc:
        if exc.errno not in _NO_SPACE:
            raise
        where = exc.filename or "stdout"
        err.print(f"Error: {where}: cannot write ({exc.strerror or exc})", markup=False)
        return 1
    except Exception as exc:
        damaged = _damaged_piece(exc)
        if damaged is None:
            raise
        err.print(f"Error: {damaged}", markup=False)
        return 1
    return 0


def _damaged_piece(exc: Exception) -> TraceReportError | None:
    """A DuckDB error raised while a query read a damaged event piece of a database (one whose
    footer is intact, so opening it worked) as the one-line error, else None."""
    if type(exc).__module__.split(".")[0] not in ("duckdb", "_duckdb"):
        return None
    from trace_report.store.events_view import damaged_piece  # the storage layer loads only on this path

    return damaged_piece(exc)


@contextmanager
def _only_command(args: list[str]) -> Iterator[None]:
    """While ``args`` starts with a command's name, import that command's module (every module
    otherwise: ``--help``, ``--version``, an unknown name) and register that command alone.

    Typer builds every registered command's parameters (introspection, converters) on each
    start, whichever command runs, a large part of `top-kernels` on a small database. The
    command's own parsing, help and errors are the same either way.
    """
    first = args[0] if args else None
    load_commands([first] if is_command(first) else None)
    saved = list(_app.registered_commands)
    only = [c for c in saved if c.name == first]
    if only:
        _app.registered_commands[:] = only
    try:
        yield
    finally:
        _app.registered_commands[:] = saved


def run_args(args: list[str]) -> int:
    """Run ``trace-report ARGS`` in this process with the error mapper (:func:`run`), the named
    command alone registered (:func:`_only_command`); returns the exit code. What :func:`main` and
    ``python -m trace_report.capture`` (``args`` starting with ``capture``) run."""
    with _only_command(args):
        return run(lambda: _app(args=args, standalone_mode=False, prog_name="trace-report"))


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and exit with its code.

    Run as the console script (``argv`` None), it exits without tearing the interpreter down
    (:func:`_exit_now`); called with ``argv`` (tests, other programs) it raises SystemExit."""
    from trace_report.sysutil import tune_allocator

    tune_allocator()
    code = _flush_stdout(run_args(sys.argv[1:] if argv is None else list(argv)))
    if argv is None:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """Flush stdout and stderr and end the process (``os._exit``), skipping the interpreter's
    teardown: freeing every module of pyarrow, numpy, DuckDB and pandas is a visible part of
    ``top-kernels`` on a small database. Everything the command wrote is closed by then
    (databases through their context managers, temporary folders by ``resolve``). Not when torch
    or Ray is loaded (``capture``, ``--engine ray``): their exit handlers stop worker processes."""
    if "torch" in sys.modules or "ray" in sys.modules:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (| head): nothing more to write
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
