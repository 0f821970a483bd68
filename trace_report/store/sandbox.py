"""The ``sql`` command's sandbox: queries read the traces and nothing else.

Two layers. DuckDB's own settings: :func:`sandbox` lets the connection read only the folders its
``events`` view reads (``allowed_directories``), turns off every other file and network access and
extension loading (``enable_external_access = false``, ``autoinstall/autoload_known_extensions =
false``) and locks the configuration, so that no SQL can change a setting again (``SET``,
``RESET``, ``PRAGMA enable_profiling``, ``profiling_output``, ``enable_logging(...)``, the log and
temp settings: all refused by DuckDB). DuckDB has no read-only variant of
``allowed_directories``: a COPY TO into the events folder would be allowed by it. So the second
layer, :func:`check_statements`, decides by what each statement does, not by its top-level type,
and admits only statements that cannot write a file:

- queries (SELECT, WITH, SHOW, DESCRIBE, SUMMARIZE, SET, transactions outside ``--write``) and
  the informational PRAGMAs (:data:`INFO_PRAGMAS`); changing statements (INSERT, UPDATE, CREATE,
  ...) with ``--write`` only, and never a CREATE of what :data:`NEVER_CREATED` names (a macro,
  function, type or trigger: every command refuses a database holding one,
  :mod:`trace_report.store.trust`);
- ``PREPARE name AS body`` only when ``body`` passes the same check; ``EXECUTE name`` only of a
  name PREPAREd (and so checked) earlier in the same script, whatever the connection holds;
- ``EXPLAIN [ANALYZE] [(options)] body`` only when ``body`` passes (ANALYZE runs it);
- COPY (TO or FROM, ``COPY FROM DATABASE``), EXPORT and IMPORT DATABASE, ATTACH, DETACH, INSTALL,
  LOAD, ``UPDATE EXTENSIONS``, every other PRAGMA and any statement kind not named here need
  ``--unsafe``, at the top level or inside PREPARE or EXPLAIN;
- nested statements (:data:`NESTED_UNSAFE`, :data:`NESTED_CHANGES`): DuckDB runs a
  data-modifying CTE, so ``WITH x AS (COPY ... TO 'file') SELECT 1`` is a SELECT that writes.

The prepared and explained bodies are cut out with DuckDB's own tokenizer (``duckdb.tokenize``:
comments and quoted names are tokens of their own) and parsed again by DuckDB
(``extract_statements``). See
https://duckdb.org/docs/2.0/operations_manual/securing_duckdb/overview.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from trace_report.errors import InputError

EVENT_DIRS = "trace_report_event_dirs"
"""The DuckDB variable (``SET VARIABLE``) naming the folders the ``events`` view reads."""

QUERIES = {"SELECT", "RELATION", "SET", "VARIABLE_SET", "TRANSACTION"}
"""Statement kinds that read only (SET cannot change a setting once the configuration is locked:
it is left with ``SET VARIABLE``, ``USE`` and ``SET schema``/``search_path``)."""
CHANGES = {"INSERT", "UPDATE", "DELETE", "CREATE", "CREATE_FUNC", "DROP", "ALTER", "ANALYZE", "VACUUM",
           "MERGE_INTO", "CALL", "MULTI"}
"""Statement kinds that change the database (``--write``); none of them writes a file."""
INFO_PRAGMAS = frozenset({
    "table_info", "show", "show_tables", "show_tables_expanded", "show_databases", "database_list",
    "database_size", "storage_info", "metadata_info", "functions", "collations", "version", "platform",
    "user_agent", "extension_versions"})
"""PRAGMAs that only tell (every other one, e.g. ``import_database``, ``copy_database``,
``enable_profiling``, ``force_checkpoint``, needs ``--unsafe``)."""
NESTED_UNSAFE = ("COPY", "EXPORT", "IMPORT", "ATTACH", "DETACH", "INSTALL", "LOAD")
NESTED_CHANGES = ("INSERT", "UPDATE", "DELETE", "MERGE")
"""Keywords that start a statement, refused anywhere but at the start of one: DuckDB runs a
data-modifying CTE of any query (``WITH x AS (COPY ... TO 'file') SELECT 1`` is a SELECT that
writes a file; a CTE may be COPY TO, INSERT, UPDATE or DELETE). A name spelled like one of them
is to be quoted (``"load"``)."""


NEVER_CREATED = frozenset({"MACRO", "FUNCTION", "TYPE", "TRIGGER"})
"""What ``sql --write`` may not create: a macro or function named like a built-in (``avg``) is
looked up before it by every query on the database, a type could shadow one too, and a trigger
runs inside an ingest's writes; a command refuses such a database (:mod:`trace_report.store.trust`).
Tables and views may be created."""


def _created(text: str) -> str:
    """What a CREATE statement creates (``TABLE``, ``VIEW``, ``MACRO``, ...): the word after
    ``CREATE [OR REPLACE] [TEMP | TEMPORARY | PERSISTENT]``."""
    words = [t.word for t in _tokens(text)[:6]]
    rest = [w for w in words[1:] if w not in ("OR", "REPLACE", "TEMP", "TEMPORARY", "PERSISTENT")]
    return rest[0] if rest else ""


@dataclass
class _Script:
    """What the check has seen so far in one script."""

    allow_changes: bool
    one_transaction: bool
    prepared: set[str] = field(default_factory=set)


@dataclass
class _Token:
    pos: int
    kind: duckdb.token_type
    text: str

    @property
    def word(self) -> str:
        return self.text.upper()


def record_event_dirs(con: duckdb.DuckDBPyConnection, folders: list[str]) -> None:
    """Remember which folders the ``events`` view reads (for :func:`sandbox`)."""
    con.execute(f"SET VARIABLE {EVENT_DIRS} = $dirs", {"dirs": [f.rstrip("/") + "/" for f in folders]})


def check_statements(con: duckdb.DuckDBPyConnection, query: str, *, allow_changes: bool,
                     one_transaction: bool = False) -> None:
    """Raise :class:`InputError` for any statement in ``query`` outside the sandbox (see the
    module docstring), a DuckDB error when ``query`` does not parse. ``allow_changes``: the
    database may be changed (``--write``); ``one_transaction``: the caller runs the script as one
    transaction, so that BEGIN, COMMIT and ROLLBACK in it are refused."""
    script = _Script(allow_changes, one_transaction)
    for statement in _parse(con, query):
        _check(con, statement, script, inside=None)


def has_transaction_statements(con: duckdb.DuckDBPyConnection, query: str) -> bool:
    """Whether ``query`` has a BEGIN, COMMIT or ROLLBACK of its own (False when it cannot be
    split into statements: running it reports why)."""
    try:
        return any(s.type.name == "TRANSACTION" for s in con.extract_statements(query))
    except (duckdb.Error, ValueError):
        return False


def _parse(con: duckdb.DuckDBPyConnection, text: str) -> list[duckdb.Statement]:
    try:
        return con.extract_statements(text)
    except ValueError as exc:
        raise _unknown(inside=None) from exc


def _unknown(inside: str | None) -> InputError:
    where = f" inside {inside}" if inside else ""
    return InputError(f"sql: a statement of a kind the sandbox does not know{where} is not allowed here "
                      "(add --unsafe to allow it)")


def _tokens(text: str) -> list[_Token]:
    """The tokens of ``text`` without its comments, each with its text."""
    try:
        found = duckdb.tokenize(text)
    except Exception as exc:  # noqa: BLE001  (the tokenizer's own errors are not duckdb.Error)
        raise InputError(f"sql: cannot read the statement ({exc})") from exc
    ends = [pos for pos, _ in found[1:]] + [len(text)]
    return [_Token(pos, kind, text[pos:end].strip()) for (pos, kind), end in zip(found, ends, strict=True)
            if kind != duckdb.token_type.comment]


def _name(token: _Token) -> str:
    """A prepared statement's name as DuckDB compares it (without quotes, in any case)."""
    text = token.text
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        text = text[1:-1].replace('""', '"')
    return text.lower()


def _a(word: str) -> str:
    """``word`` with its indefinite article, as it is read aloud: an ATTACH, an UPDATE, a COPY, a USE."""
    return f"{'an' if word[:1] in 'AEIOU' and not word.startswith(('USE', 'UNI')) else 'a'} {word}"


def _refuse(kind: str, inside: str | None, hint: str = "add --unsafe to allow it") -> InputError:
    where = f" inside {inside}" if inside else ""
    return InputError(f"sql: {_a(kind)} statement{where} is not allowed here ({hint})")


def _check(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement, script: _Script, inside: str | None) -> None:
    try:
        kind = statement.type.name
    except ValueError as exc:  # a kind the Python API has no name for (UPDATE EXTENSIONS)
        raise _unknown(inside) from exc
    text = statement.query
    _check_nested(text, kind, script, inside)
    if kind == "PREPARE":
        _check_prepare(con, text, script, inside)
    elif kind == "EXECUTE":
        _check_execute(text, script)
    elif kind == "EXPLAIN":
        _check_explain(con, text, script, inside)
    elif kind == "PRAGMA":
        _check_pragma(text, inside)
    elif kind == "TRANSACTION" and script.one_transaction:
        raise InputError("sql: --write runs the script as one transaction (ROLLBACK on any error): "
                         "leave out BEGIN, COMMIT and ROLLBACK")
    elif kind == "DROP" and _tokens(text)[0].word == "DEALLOCATE":
        return  # forgets a prepared statement
    elif kind in QUERIES:
        return
    elif kind in CHANGES:
        if not script.allow_changes:
            raise _refuse(kind, inside, "add --write to change the database")
        if kind == "CREATE" and (what := _created(text)) in NEVER_CREATED:
            raise InputError(f"sql: a CREATE {what} statement{f' inside {inside}' if inside else ''} is not allowed: "
                             f"trace-report refuses a database holding a {what.lower()} (it would change what "
                             "every command computes); create a table or a view")
    else:  # COPY, COPY_DATABASE, EXPORT, ATTACH, DETACH, LOAD (INSTALL too), EXTENSION, ...
        raise _refuse(kind, inside)


def _check_nested(text: str, kind: str, script: _Script, inside: str | None) -> None:
    """Refuse a statement nested in ``text`` (a data-modifying CTE, a prepared or explained COPY)."""
    for token in _tokens(text)[1:]:
        if token.kind != duckdb.token_type.keyword:
            continue
        word = token.word
        if word in NESTED_UNSAFE or (word in NESTED_CHANGES and not script.allow_changes):
            hint = "add --unsafe to allow it" if word in NESTED_UNSAFE else "add --write to change the database"
            raise InputError(f"sql: {_a(word)} statement inside {inside or kind} is not allowed here ({hint}; "
                             f'a name spelled {word.lower()} is to be quoted: "{word.lower()}")')


def _body(con: duckdb.DuckDBPyConnection, text: str, start: int, script: _Script, inside: str) -> None:
    """Check the one statement at ``text[start:]`` (what PREPARE prepares, what EXPLAIN explains)."""
    inner = _parse(con, text[start:])
    if len(inner) != 1:
        raise InputError(f"sql: {inside} of {len(inner)} statements is not allowed here")
    _check(con, inner[0], script, inside)


def _check_prepare(con: duckdb.DuckDBPyConnection, text: str, script: _Script, inside: str | None) -> None:
    # PREPARE name AS statement (DuckDB has no type list: PREPARE name(INTEGER) AS ... is an error)
    tokens = _tokens(text)
    if inside:
        raise _refuse("PREPARE", inside, "PREPARE it on its own")
    plain = (len(tokens) >= 4 and tokens[0].word == "PREPARE" and tokens[2].word == "AS"
             and tokens[1].kind in (duckdb.token_type.identifier, duckdb.token_type.keyword))
    if not plain:
        raise InputError("sql: only PREPARE name AS statement is allowed here")
    _body(con, text, tokens[3].pos, script, "PREPARE")
    script.prepared.add(_name(tokens[1]))


def _check_execute(text: str, script: _Script) -> None:
    tokens = _tokens(text)
    name = _name(tokens[1]) if len(tokens) >= 2 and tokens[0].word == "EXECUTE" else None
    if name not in script.prepared:
        shown = tokens[1].text if len(tokens) >= 2 else "?"
        raise InputError(f"sql: EXECUTE {shown} is not allowed here: only a statement PREPAREd earlier "
                         "in the same script may run")


def _check_explain(con: duckdb.DuckDBPyConnection, text: str, script: _Script, inside: str | None) -> None:
    # EXPLAIN [ANALYZE | ANALYSE] [VERBOSE] statement, or EXPLAIN (option, ...) statement; the
    # statement is checked whether it runs (ANALYZE) or not
    tokens = _tokens(text)
    i = 1
    if i < len(tokens) and tokens[i].text.startswith("("):
        depth = 0
        while i < len(tokens):
            if tokens[i].kind == duckdb.token_type.operator:
                depth += tokens[i].text.count("(") - tokens[i].text.count(")")
            i += 1
            if depth <= 0:
                break
    else:
        while i < len(tokens) and tokens[i].word in ("ANALYZE", "ANALYSE", "VERBOSE"):
            i += 1
    if inside:
        raise _refuse("EXPLAIN", inside, "EXPLAIN it on its own")
    if tokens[0].word != "EXPLAIN" or i >= len(tokens):
        raise InputError("sql: only EXPLAIN [ANALYZE] [(options)] statement is allowed here")
    _body(con, text, tokens[i].pos, script, "EXPLAIN")


def _check_pragma(text: str, inside: str | None) -> None:
    # DuckDB files COPY FROM DATABASE and IMPORT DATABASE under PRAGMA too
    tokens = _tokens(text)
    first = tokens[0].word if tokens else ""
    if first != "PRAGMA":
        raise _refuse(first or "PRAGMA", inside)
    name = tokens[1].text.lower() if len(tokens) > 1 else ""
    if name not in INFO_PRAGMAS:
        where = f" inside {inside}" if inside else ""
        raise InputError(f"sql: PRAGMA {name}{where} is not allowed here (only the PRAGMAs that tell, such as "
                         "table_info or show_tables; add --unsafe to allow it)")


def sandbox(con: duckdb.DuckDBPyConnection, folders: list[str] | None = None) -> None:
    """Restrict ``con`` to reading its own traces (see the module docstring): the folders
    ``folders`` (default: those :func:`record_event_dirs` recorded) and no other file. A
    connection already locked (every database a command opens is) is left as it is."""
    if is_locked(con):
        return
    if folders is None:
        try:
            dirs = con.execute(f"SELECT getvariable('{EVENT_DIRS}')").fetchone()
        except duckdb.Error:
            dirs = None
        folders = list(dirs[0]) if dirs and dirs[0] else []
    folders = [f.rstrip("/") + "/" for f in folders]
    con.execute("SET allowed_directories = $dirs", {"dirs": folders})
    for setting in ("enable_external_access", "autoinstall_known_extensions", "autoload_known_extensions"):
        con.execute(f"SET {setting} = false")
    con.execute("SET lock_configuration = true")


def is_locked(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con``'s configuration is locked (:func:`sandbox` ran on it)."""
    rows = con.execute("SELECT current_setting('lock_configuration')").fetchall()
    return bool(rows and rows[0][0])
