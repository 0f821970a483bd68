"""``trace-report export DB -o DIR``: the schema as a partitioned Parquet dataset."""

from __future__ import annotations

from typing import Annotated

import typer

from trace_report.cli.options import err, inputs_given, load, output_given
from trace_report.cli.registry import app
from trace_report.storage import location


@app.command("export")
def export_cmd(
    target: Annotated[list[str], typer.Argument(  # each a Path, or a URL kept as text (storage.location)
        help="A .duckdb database written by 'trace-report ingest' (or traces / run folders to export).",
        callback=inputs_given, parser=location)],
    output: Annotated[str, typer.Option(
        "--output", "-o", help="Folder to create for the Parquet dataset, or an s3://, gs://, abfs:// prefix "
        "(its manifest _trace_report_files.txt is written last).", callback=output_given, parser=location)],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing folder.")] = False,
) -> None:
    """Write the schema as a Parquet dataset partitioned by run and rank (Hive layout:
    events/run_id=.../rank=.../*.parquet, traces.parquet, ...), atomically.

    \b
    Example:
      trace-report export runs.duckdb -o runs-dataset/
    """
    from trace_report.store.export import export_parquet

    with load(target) as db:
        report = export_parquet(db, output, overwrite=overwrite)
    tables = ", ".join(f"{k} ({v})" for k, v in report.tables.items())
    err.print(f"{output}: {report.events:,} events in {report.partitions} partition(s); tables: {tables}",
              markup=False)
