"""``trace-report sql TARGET QUERY``: SQL over the schema (``docs/schema.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import FormatOpt, FullNamesOpt, LimitOpt, OutputOpt, hash_ahead, load
from trace_report.cli.registry import app
from trace_report.errors import InputError


@app.command("sql")
def sql_cmd(
    target: Annotated[Path, typer.Argument(help="A trace file, directory, archive or .duckdb database.",
                                           callback=hash_ahead)],
    query: Annotated[str, typer.Argument(help="SQL over the schema (docs/schema.md).")],
    write: Annotated[bool, typer.Option(
        "--write", help="Open a database read-write (waits for no one: refused while an ingest writes it).")] = False,
    unsafe: Annotated[bool, typer.Option(
        "--unsafe", help="Allow file access, COPY, ATTACH, INSTALL/LOAD and any statement.")] = False,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run SQL against traces or a database.

    Sandboxed by default: only queries (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, SUMMARIZE,
    PRAGMA) run, and they read nothing but the traces and the database's own event pieces (no
    COPY TO, read_csv('/any/file'), ATTACH, INSTALL or LOAD). --write opens a database
    read-write and allows changing statements, holding the database's lock; --unsafe lifts the
    sandbox.

    \b
    Example:
      trace-report sql runs.duckdb "select name, sum(dur_us) from kernels group by 1 order by 2 desc limit 5"
    """
    from contextlib import ExitStack
    from dataclasses import replace

    import duckdb

    from trace_report.present.format import Format
    from trace_report.present.tables import OutputOptions, emit
    from trace_report.store.layout import database_lock
    from trace_report.store.sandbox import check_statements, sandbox

    with ExitStack() as stack:
        if write and target.is_file():
            stack.enter_context(database_lock(target, "writing"))
        db = stack.enter_context(load([target], read_only=not write))
        try:
            if not unsafe:
                check_statements(db.con, query, allow_changes=write)
                sandbox(db.con)
            rel = db.sql(query)
            frame = rel.df() if rel is not None else None
        except duckdb.Error as exc:
            raise InputError(f"SQL failed: {str(exc).splitlines()[0]}") from exc
    if frame is None:  # a statement without a result (DDL, INSERT)
        if write:
            return
        raise InputError("the statement returned no rows")
    opts = OutputOptions(fmt, limit, output, keep_order=True)
    # the query's values as they are, except in a table on screen (short kernel names unless --full-names)
    emit(frame, replace(opts, full_names=full_names or opts.resolve() is not Format.table))
