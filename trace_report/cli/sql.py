"""``trace-report sql TARGET QUERY``: SQL over the schema (``docs/schema.md``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import FormatOpt, FullNamesOpt, LimitOpt, OutputOpt, RawOpt, hash_ahead, load, warn
from trace_report.cli.registry import app
from trace_report.errors import InputError
from trace_report.storage import location

if TYPE_CHECKING:
    import duckdb
    import pandas as pd


@app.command("sql")
def sql_cmd(
    target: Annotated[str, typer.Argument(  # a Path, or a URL kept as text (storage.location)
        help="A trace file, directory, archive or .duckdb database; or an s3://, gs://, abfs:// URL of traces.",
        callback=hash_ahead, parser=location)],
    query: Annotated[str, typer.Argument(help="SQL over the schema (docs/schema.md).")],
    write: Annotated[bool, typer.Option(
        "--write", help="Open a database read-write (waits for no one: refused while an ingest writes it).")] = False,
    unsafe: Annotated[bool, typer.Option(
        "--unsafe", help="Allow file access, COPY, ATTACH, INSTALL/LOAD and any statement.")] = False,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    limit: LimitOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run SQL against traces or a database.

    Sandboxed by default: only queries (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, SUMMARIZE, the
    PRAGMAs that tell) run, and they read nothing but the traces and the database's own event
    pieces and write no file (no COPY, EXPORT, read_csv('/any/file'), ATTACH, INSTALL or LOAD, nor
    inside PREPARE, EXPLAIN ANALYZE or a CTE). --write opens a database read-write and allows changing
    statements, holding the database's lock; the script runs as one transaction (nothing changes
    when a statement fails). --unsafe lifts the sandbox (with a warning).

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
    from trace_report.store.sandbox import check_statements, has_transaction_statements, sandbox
    from trace_report.store.trust import check_written, is_database_file

    with ExitStack() as stack:
        if write and is_database_file(target):  # a trace opened --write is in memory: no lock file beside it
            stack.enter_context(database_lock(target, "writing"))
        db = stack.enter_context(load([target], read_only=not write, unsafe=unsafe))  # its own connection
        if unsafe:
            warn("--unsafe: the sql sandbox is off (this SQL may read and write any file, attach databases, "
                 "load extensions and change settings)")
        try:
            if not unsafe:
                check_statements(db.con, query, allow_changes=write, one_transaction=write)
                sandbox(db.con)
            # --write: the whole script in one transaction (its own BEGIN/COMMIT only with --unsafe)
            atomic = write and not (unsafe and has_transaction_statements(db.con, query))
            checked = not unsafe and is_database_file(target)  # what the script leaves, before it commits
            verify = (lambda: check_written(db.con, target)) if checked else None
            frame = _run(db.con, query, atomic=atomic, verify=verify)
        except duckdb.Error as exc:
            raise InputError(f"SQL failed: {str(exc).splitlines()[0]}") from exc
    if frame is None:  # a statement without a result (DDL, INSERT)
        if write:
            return
        raise InputError("the statement returned no rows")
    opts = OutputOptions(fmt, limit, output, keep_order=True, raw=raw)
    # the query's values as they are, except in a table on screen (short kernel names unless --full-names)
    emit(frame, replace(opts, full_names=full_names or opts.resolve() is not Format.table))


def _run(con: duckdb.DuckDBPyConnection, query: str, *, atomic: bool,
         verify: Callable[[], None] | None = None) -> pd.DataFrame | None:
    """Run the script ``query``: the last statement's rows (None when it returns none). ``atomic``:
    in one transaction, rolled back when any statement fails (or on Ctrl-C) or ``verify`` raises
    before the commit (a script that leaves what commands would refuse to open)."""
    if not atomic:
        rel = con.sql(query)
        return rel.df() if rel is not None else None
    con.execute("BEGIN TRANSACTION")
    try:
        rel = con.sql(query)
        frame = rel.df() if rel is not None else None
        if verify is not None:
            verify()
        con.execute("COMMIT")
    except BaseException:
        with suppress(Exception):  # a transaction already gone: closing the connection rolls it back
            con.execute("ROLLBACK")
        raise
    return frame
