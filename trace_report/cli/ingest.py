"""``trace-report ingest PATHS -o DB``: load traces and Nsight exports into a database file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    EngineName,
    EngineOpt,
    RayAddressOpt,
    err,
    make_progress,
    print_summary,
    progress_callback,
)
from trace_report.cli.registry import app

if TYPE_CHECKING:
    from trace_report.store.tracedb import IngestSummary


@app.command("ingest")
def ingest_cmd(
    targets: Annotated[list[Path], typer.Argument(
        help="Trace files, folders (searched recursively; files are recognised by their content), tar "
             "archives, Nsight Compute reports and Nsight Systems SQLite exports.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="DuckDB file to create or add to.")],
    workers: Annotated[int | None, typer.Option(
        min=1, help="Decoding threads (default: CPU count; processes where the compiled scanner is not "
                    "installed); with --engine ray and no --ray-address, the CPUs "
                    "of the local Ray runtime.")] = None,
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
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Load traces into a DuckDB database; unchanged files already in it are skipped.

    Files are recognised by their content; every file seen and not read is listed with its
    reason. A file given twice is read once; identical content is stored once; a file whose
    content changed replaces its old trace. One writer at a time per database (a lock file
    .DB.lock beside it); an interrupted ingest leaves the database as it was.

    With --engine ray every file (or piece of a large file) is decoded by a Ray task that writes its
    Parquet piece beside the database, and this process writes the catalog: the database, its
    pieces folder and the inputs must be on a filesystem every Ray worker shares (docs/scaling.md).

    \b
    Examples:
      trace-report ingest traces/ -o runs.duckdb
      trace-report ingest /shared/traces -o /shared/runs.duckdb --engine ray --ray-address auto
    """
    from trace_report.ingest.digests import start_hashing, stop_hashing
    from trace_report.sysutil import one_blas_thread, skip_pandas_probe, system_arrow_allocator

    if engine is not EngineName.ray:
        start_hashing(targets)  # plain traces' SHA-256 on the idle core while pyarrow and DuckDB load
    one_blas_thread()  # before numpy loads
    system_arrow_allocator()  # before pyarrow loads
    from trace_report.ingest.pipeline import IngestOptions, ingest_to_database

    skip_pandas_probe()  # this process decodes the last piece of each file: no pandas for that
    bar = make_progress(progress)
    opts = IngestOptions(workers=workers, progress=progress_callback(bar) if bar else None, force=force,
                         append_versions=append_versions)
    if max_ratio is not None:
        opts = replace(opts, max_ratio=max_ratio)
    def run() -> IngestSummary:
        if engine is EngineName.ray:
            from trace_report.ingest.engine_ray import ingest_with_ray

            return ingest_with_ray(targets, output, opts, address=ray_address, num_cpus=workers)
        return ingest_to_database(targets, output, opts)

    try:
        if bar is None:
            summary = run()
        else:
            with bar:
                summary = run()
    finally:
        stop_hashing()
    print_summary(summary, verbose=True, quiet=quiet)
    ncu_part = f", {len(summary.ncu_reports)} Nsight Compute report(s)" if summary.ncu_reports else ""
    err.print(f"{output}: {len(summary.ingested)} trace(s) ingested{ncu_part}, "
              f"{len(summary.skipped)} skipped", markup=False)
