"""``trace-report export DB -o DIR``: the schema as a partitioned Parquet dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import err, inputs_given, load, output_given
from trace_report.cli.registry import app


@app.command("export")
def export_cmd(
    target: Annotated[list[Path], typer.Argument(
        help="A .duckdb database written by 'trace-report ingest' (or traces / run folders to export).",
        callback=inputs_given)],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to create for the Parquet dataset.",
                                                callback=output_given)],
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
