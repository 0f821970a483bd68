"""``trace-report ingest PATHS -o DB``: load traces and Nsight exports into a database file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import err, make_progress, print_summary, progress_callback
from trace_report.cli.registry import app


@app.command("ingest")
def ingest_cmd(
    targets: Annotated[list[Path], typer.Argument(
        help="Trace files, folders (searched recursively; files are recognised by their content), tar "
             "archives, Nsight Compute reports and Nsight Systems SQLite exports.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="DuckDB file to create or add to.")],
    workers: Annotated[int | None, typer.Option(min=1, help="Decoding processes (default: CPU count).")] = None,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Progress bar on stderr (default: on a terminal)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not list the files skipped.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Read files again even when unchanged (their old traces are replaced).")] = False,
    append_versions: Annotated[bool, typer.Option(
        "--append-versions", help="Keep the old trace of a changed file beside the new one.")] = False,
    max_ratio: Annotated[float | None, typer.Option(
        "--max-ratio", min=0,
        help="Refuse a .gz trace that decompresses to more than this many times its size, as a "
             "decompression bomb (default 300; real traces are under 30). 0: no limit.")] = None,
) -> None:
    """Load traces into a DuckDB database; unchanged files already in it are skipped.

    Files are recognised by their content; every file seen and not read is listed with its
    reason. A file given twice is read once; identical content is stored once; a file whose
    content changed replaces its old trace. One writer at a time per database (a lock file
    .DB.lock beside it); an interrupted ingest leaves the database as it was.

    Example: trace-report ingest traces/ -o runs.duckdb
    """
    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    bar = make_progress(progress)
    opts = IngestOptions(workers=workers, progress=progress_callback(bar) if bar else None, force=force,
                         append_versions=append_versions)
    if max_ratio is not None:
        opts = replace(opts, max_ratio=max_ratio)
    if bar is None:
        summary = ingest_to_database(targets, output, opts)
    else:
        with bar:
            summary = ingest_to_database(targets, output, opts)
    print_summary(summary, verbose=True, quiet=quiet)
    ncu_part = f", {len(summary.ncu_reports)} Nsight Compute report(s)" if summary.ncu_reports else ""
    err.print(f"{output}: {len(summary.ingested)} trace(s) ingested{ncu_part}, "
              f"{len(summary.skipped)} skipped", markup=False)
