"""``trace-report sql TARGET QUERY``: SQL over the schema (``docs/schema.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, LimitOpt, OutputOpt, load
from trace_report.cli.registry import app
from trace_report.errors import InputError


@app.command("sql")
def sql_cmd(
    target: Annotated[Path, typer.Argument(help="A trace file, directory, archive or .duckdb database.")],
    query: Annotated[str, typer.Argument(help="SQL over the schema (docs/schema.md).")],
    write: Annotated[bool, typer.Option("--write", help="Open a database read-write.")] = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run SQL against traces or a database (databases open read-only unless --write).

    Example: trace-report sql runs.duckdb "select name, sum(dur_us) from kernels group by 1 order by 2 desc limit 5"
    """
    import duckdb

    from trace_report.present.tables import OutputOptions, emit

    with load([target], read_only=not write) as db:
        try:
            rel = db.sql(query)
            frame = rel.df() if rel is not None else None
        except duckdb.Error as exc:
            raise InputError(f"SQL failed: {str(exc).splitlines()[0]}") from exc
    if frame is None:  # a statement without a result (DDL, INSERT)
        raise InputError("the statement returned no rows")
    emit(frame, OutputOptions(fmt, limit, output))
