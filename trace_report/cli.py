"""The ``trace-report`` command line: parse options, call one library function, format output.

Errors: one line ``Error: ...`` on stderr; exit 1 for bad input or a failed analysis, 2 for a
usage error (DESIGN section 6).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import duckdb
import typer

from trace_report.analyze.ingest import IngestOptions, ingest_to_database
from trace_report.api import open as open_traces
from trace_report.cli_common import (
    FormatOpt,
    LimitOpt,
    OutputOpt,
    TargetsArg,
    _make_progress,
    _progress_callback,
    _report,
    err,
    load,
)
from trace_report.errors import InputError, TraceReportError
from trace_report.output import OutputOptions, emit

app = typer.Typer(
    name="trace-report",
    help="Capture and analyze PyTorch Profiler traces: top kernels, SQL, regions, rooflines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
@app.command()
def ingest(
    targets: Annotated[list[Path], typer.Argument(help="Trace files, directories of ranks, tar archives.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="DuckDB file to create or add to.")],
    workers: Annotated[int | None, typer.Option(help="Decoding processes (default: CPU count).")] = None,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Progress bar on stderr (default: on a terminal)."),
    ] = None,
) -> None:
    """Load traces into a DuckDB database; unchanged files already in it are skipped."""
    bar = _make_progress(progress)
    opts = IngestOptions(workers=workers, progress=_progress_callback(bar) if bar else None)
    if bar is None:
        report = ingest_to_database(targets, output, opts)
    else:
        with bar:
            report = ingest_to_database(targets, output, opts)
    _report(report, verbose=True)
    ncu_part = f", {len(report.ncu_reports)} Nsight Compute report(s)" if report.ncu_reports else ""
    err.print(f"{output}: {len(report.ingested)} trace(s) ingested{ncu_part}, "
              f"{len(report.skipped)} skipped", markup=False)


@app.command("top-kernels")
def top_kernels_cmd(
    targets: TargetsArg,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Rows (per rank with --by-rank).")] = 20,
    rank: Annotated[int | None, typer.Option(help="Only this rank.")] = None,
    by_rank: Annotated[bool, typer.Option("--by-rank", help="One ranking per rank.")] = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
) -> None:
    """Rank GPU kernels by total time (CPU operators by self time on CPU-only traces).

    Also reads an `nsys stats -r cuda_gpu_kern_sum --format csv` file directly."""
    from trace_report.analyze.nsys import is_kernsum_csv, read_kernsum_csv

    if len(targets) == 1 and is_kernsum_csv(targets[0]):
        emit(read_kernsum_csv(targets[0]).head(limit), OutputOptions(fmt, None, output), title="Top kernels")
        return
    with load(targets) as db:
        result = db.top_kernels_result(limit, rank=rank, by_rank=by_rank)
    if result.note:
        err.print(f"note: {result.note}", markup=False)
    emit(result.frame, OutputOptions(fmt, None, output), title="Top kernels")


@app.command()
def sql(
    target: Annotated[Path, typer.Argument(help="A trace file, directory, archive or .duckdb database.")],
    query: Annotated[str, typer.Argument(help="SQL over the schema (docs/schema.md).")],
    write: Annotated[bool, typer.Option("--write", help="Open a database read-write.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run SQL against traces or a database (databases open read-only unless --write)."""
    with (open_traces([target], read_only=not write) if write else load([target])) as db:
        try:
            frame = db.sql(query).df()
        except duckdb.Error as exc:
            raise InputError(f"SQL failed: {str(exc).splitlines()[0]}") from exc
        except AttributeError as exc:  # a statement without a result (DDL, INSERT)
            raise InputError("the statement returned no rows") from exc
    emit(frame, OutputOptions(fmt, limit, output))


# Commands defined in their own modules: (module, function, command name).
COMMAND_MODULES = [
    ("trace_report.capture.command", "capture", "capture"),
    ("trace_report.commands_analysis", "breakdown_cmd", "breakdown"),
    ("trace_report.commands_analysis", "flags_cmd", "flags"),
    ("trace_report.commands_analysis", "advise_cmd", "advise"),
    ("trace_report.commands_analysis", "hta_cmd", "hta"),
    ("trace_report.commands_nsight", "roofline_cmd", "roofline"),
    ("trace_report.commands_report", "report_cmd", "report"),
    ("trace_report.commands_report", "compare_cmd", "compare"),
    ("trace_report.commands_report", "export_cmd", "export"),
]


def _register_commands() -> None:
    for module_name, func, name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a command module still being built
            if exc.name != module_name:
                raise
            continue
        app.command(name)(getattr(module, func))


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and map errors to ``Error:`` and exit codes."""
    from trace_report.sysutil import tune_allocator

    tune_allocator()
    try:
        app(args=argv, standalone_mode=False, prog_name="trace-report")
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("Aborted.")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors (typer's ClickException)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"Error: {message}", markup=False)
        sys.exit(getattr(exc, "exit_code", 2))
    except TraceReportError as exc:
        err.print(f"Error: {exc}", markup=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("Interrupted.")
        sys.exit(130)
    sys.exit(0)


if __name__ == "__main__":
    main()
