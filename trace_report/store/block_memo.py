"""Per-trace results remembered for the length of one block on one connection.

A command that runs several analyses (``report``) asks for some per-trace results more than once:
``advise`` and the report's step-breakdown table both take the breakdown's rows per (trace, window,
region) (:func:`~trace_report.analyses.breakdown.region_table`). On a database those rows are kept
beside it (:mod:`trace_report.store.derived`) and read back in milliseconds; on a trace opened
directly (a database in memory keeps nothing) each asking computed them again, a visible part
of a large trace's report. Inside :func:`remembering`, :func:`recall_each` gives
the second asker the first one's values.

Only for the length of the block: the caller holds the events still while it runs (a command,
not a notebook that may redefine ``events`` between two cells), and nothing outlives it. Keys name
the kind and the code version of what is remembered; values are handed out as they were made, so a
caller must not change them in place (the breakdown's rows are concatenated into new frames).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import duckdb

V = TypeVar("V")

_MEMOS: dict[int, dict[Hashable, Any]] = {}
"""``id(connection)`` -> {(kind, trace_id): value} for the connections inside :func:`remembering`."""


@contextmanager
def remembering(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Remember :func:`recall_each`'s values on ``con`` until the block ends (nested blocks share
    the outermost one's)."""
    key = id(con)
    outer = key in _MEMOS
    if not outer:
        _MEMOS[key] = {}
    try:
        yield
    finally:
        if not outer:
            del _MEMOS[key]


def recall_each(con: duckdb.DuckDBPyConnection, kind: Hashable, ids: list[int],
                compute: Callable[[list[int]], dict[int, V]]) -> dict[int, V]:
    """``{trace_id: value}`` for ``ids``: inside :func:`remembering`, those already made for
    ``kind`` on ``con`` and ``compute(the others)`` (one call, remembered); outside, ``compute(ids)``.
    ``kind`` must change with whatever else decides the values (the code version, options)."""
    memo = _MEMOS.get(id(con))
    if memo is None:
        return compute(ids)
    missing = [t for t in ids if (kind, t) not in memo]
    if missing:
        computed = compute(missing)
        for t in missing:
            memo[(kind, t)] = computed[t]
    return {t: memo[(kind, t)] for t in ids}
