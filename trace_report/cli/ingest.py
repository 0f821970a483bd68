"""``trace-report ingest PATHS -o DB``: load traces and Nsight exports into a database file."""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import (
    EngineName,
    EngineOpt,
    RayAddressOpt,
    check_database_output,
    err,
    make_progress,
    notes,
    print_summary,
    progress_callback,
    warn,
)
from trace_report.cli.registry import app
from trace_report.errors import DatabaseError, InputError
from trace_report.storage import is_url, location

if TYPE_CHECKING:
    from trace_report.store.tracedb import IngestSummary


KEEP_MEMORY_LIMIT = "512MB"
"""DuckDB's memory limit while the ingest computes the breakdown. Without it the kernel-to-launch
join held ~0.7 GB for a 9.5 M-event trace and that ingest peaked at 1.38 GB; with it (and the
decoding's freed heap trimmed first, :func:`~trace_report.sysutil.trim_heap`) at 0.98 GB, as fast
(docs/benchmarks.md). DuckDB spills past it; a failure is a warning, the traces stay ingested."""


def check_max_ratio(value: float | None) -> float | None:
    """``--max-ratio``: None (the default), 0 (no limit) or a finite number above 1 (a ratio of
    1 or less would refuse every compressed file; nan or inf would turn the check off unsaid).
    Raises :class:`typer.BadParameter`: a usage error, exit 2, one ``Error:`` line."""
    if value is None or value == 0:
        return value
    if not math.isfinite(value) or value <= 1:
        raise typer.BadParameter(f"{value:g} is not a finite number above 1 (or 0: no limit)",
                                 param_hint="'--max-ratio'")
    return value


@app.command("ingest")
def ingest_cmd(
    targets: Annotated[list[str], typer.Argument(  # each a Path, or a URL kept as text (storage.location)
        help="Trace files, folders (searched recursively; files are recognised by their content), tar "
             "archives, Nsight Compute reports and Nsight Systems SQLite exports; local paths or s3://, gs://, "
             "abfs:// URLs of objects and prefixes (docs/scaling.md).", parser=location)],
    output: Annotated[Path, typer.Option("--output", "-o", help="DuckDB file to create or add to.")],
    workers: Annotated[int | None, typer.Option(
        min=1, help="Decoding workers (default: the CPUs this process may use, at most one per piece or file): "
                    "threads, or processes past 3 on Linux (and where the compiled scanner is not installed); "
                    "with --engine ray and no --ray-address, the CPUs "
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
        "--max-ratio", min=0, callback=check_max_ratio,
        help="Refuse a .gz trace, or an archive member, that decompresses to more than this many times its size, as a "
             "decompression bomb (default 300; real traces are under 30). 0: no limit.")] = None,
    precompute: Annotated[bool, typer.Option(
        "--precompute",
        help="Also compute the step breakdown and the GPU operations per name of the traces read now "
             "and keep them beside the database, so that the first `breakdown`, `flags` or `report` "
             "reads them (by default the first query computes and keeps them).")] = False,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    pieces: Annotated[str | None, typer.Option(
        "--pieces", metavar="URL",
        help="Write the event pieces (Parquet) under this s3://, gs:// or abfs:// prefix instead of DB.events/ "
             "beside the database, which stays local and records the prefix: every command reading DB reads "
             "them from there. One prefix per database; later ingests into DB write there without it "
             "(docs/scaling.md).")] = None,
) -> None:
    """Load traces into a DuckDB database; unchanged files already in it are skipped.

    Files are recognised by their content; every file seen and not read is listed with its
    reason. A file given twice is read once; identical content is stored once; a file whose
    content changed replaces its old trace. One writer at a time per database (a lock file
    .DB.lock beside it); an interrupted ingest leaves the database as it was.

    With --engine ray every file (or piece of a large file) is decoded by a Ray task that writes its
    Parquet piece beside the database, and this process writes the catalog: the database, its
    pieces folder and the inputs must be on a filesystem every Ray worker shares (docs/scaling.md).
    Traces in object storage (s3://, gs://, abfs://) need no shared path: each task reads its
    object from the URL with its node's own credentials and sends its pieces back to this process.
    With --pieces s3://... every task writes its pieces to the bucket itself.

    \b
    Examples:
      trace-report ingest traces/ -o runs.duckdb
      trace-report ingest /shared/traces -o /shared/runs.duckdb --engine ray --ray-address auto
      trace-report ingest s3://bucket/run-42/ -o runs.duckdb --engine ray --ray-address auto
      trace-report ingest s3://bucket/run-42/ -o runs.duckdb --pieces s3://bucket/runs.duckdb.events/
    """
    from trace_report.ingest.digests import start_hashing, stop_hashing
    from trace_report.sysutil import decoding_settings, skip_pandas_probe

    local = [Path(t) for t in targets if not is_url(t)]
    check_database_output(output, local)  # not an input trace, not a FIFO or device (/dev/null)

    if engine is not EngineName.ray:
        start_hashing(local)  # plain traces' SHA-256 on the idle core while pyarrow and DuckDB load
    decoding_settings()  # before numpy and pyarrow load
    from trace_report.ingest.start import IngestOptions, begin_ingest  # pyarrow, not DuckDB

    skip_pandas_probe()  # this process decodes the last piece of each file: no pandas for that
    bar = make_progress(progress)
    opts = IngestOptions(workers=workers, progress=progress_callback(bar) if bar else None, force=force,
                         append_versions=append_versions, pieces=pieces)
    if max_ratio is not None:
        opts = replace(opts, max_ratio=max_ratio)
    def run() -> IngestSummary:
        if engine is EngineName.ray:
            from trace_report.ingest.engine_ray import ingest_with_ray

            return ingest_with_ray(targets, output, opts, address=ray_address, num_cpus=workers)
        with begin_ingest(targets, output, _clean_leftovers, opts) as started:  # a new database's jobs start here
            from trace_report.ingest.pipeline import finish_ingest  # DuckDB loads while they run

            return finish_ingest(started, opts)

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
    if len(summary.ingested) > 1:
        _say_runs(output)
    if precompute and summary.ingested:
        _keep_breakdown(output, [t for t, _ in summary.ingested], bar is not None)


def _say_runs(output: Path) -> None:
    """One line naming the runs the database holds when there are several (docs/schema.md,
    ``trace_runs``): the analyses keep them apart."""
    from trace_report.store.database import connect_existing
    from trace_report.store.run_identity import identify_runs

    con = connect_existing(output, read_only=True, views=())  # identify_runs reads tables alone: no views
    try:
        runs = identify_runs(con)
    finally:
        con.close()
    if len(runs) > 1:
        shown = ", ".join(r.label for r in runs[:8]) + (", ..." if len(runs) > 8 else "")
        notes([f"{len(runs)} runs in {output.name} ({shown}): analysed apart (--merge-runs to add them up)"])


def _clean_leftovers(db_path: Path) -> list[str]:
    """:func:`trace_report.store.database.clean_leftovers`, DuckDB imported only when a killed
    writer may have left something beside the database."""
    from trace_report.store.database import clean_leftovers

    return clean_leftovers(db_path)


def _keep_breakdown(output: Path, ids: list[int], spinner: bool) -> None:
    """Compute and keep the breakdown's rows of the traces ``ids`` of the database just written
    (:func:`trace_report.analyses.breakdown.keep_region_rows`) and the GPU operations per name
    (:func:`trace_report.analyses.common.gpu_op_names.kept_rows`). The database is complete by now: a
    failure is a warning, and an interrupt says that only the kept rows are missing."""
    import time

    import duckdb

    from trace_report.analyses.breakdown import keep_region_rows, views_read  # pandas: only for large traces
    from trace_report.analyses.common.gpu_op_names import VIEW as GPU_OP_NAMES
    from trace_report.analyses.common.gpu_op_names import kept_rows
    from trace_report.store.handle import open_database
    from trace_report.sysutil import trim_heap

    what = f"breakdown of {_traces(ids)}"
    start = time.perf_counter()
    try:
        trim_heap()  # the decoding's freed heap, before the breakdown's own peak
        # only the views the kept rows read: creating all of them is a visible part of this step
        views = [*views_read(), GPU_OP_NAMES]
        with open_database(output, views=views, settings={"memory_limit": KEEP_MEMORY_LIMIT}) as db, \
                (err.console.status(f"computing the {what}") if spinner else contextlib.nullcontext()):
            kept = keep_region_rows(db.con, ids)
            kept_rows(db.con, kept)  # flags' rows: one scan more
    except (InputError, DatabaseError, duckdb.Error, OSError) as exc:
        warn(f"{output}: the {what} was not kept ({exc}); the first `breakdown` computes it")
        return
    except BaseException:  # Ctrl-C, SIGTERM: said by the caller; this says what is left
        err.print(f"{output}: the traces are ingested; the {what} was not kept (the first "
                  "`breakdown` computes it)", markup=False)
        raise
    err.print(f"computed the {what} ({time.perf_counter() - start:.1f} s): `breakdown` and `flags` read "
              "it where the database's folder can be written", markup=False)


def _traces(ids: list[int]) -> str:
    """``trace 3``, ``traces 1, 2, 3``, or ``48 traces (1-48)`` past six."""
    if len(ids) == 1:
        return f"trace {ids[0]}"
    if len(ids) <= 6:
        return "traces " + ", ".join(map(str, ids))
    return f"{len(ids)} traces ({min(ids)}-{max(ids)})"
