"""Kernel names: demangle Itanium C++ names (``_Z...``) as ``nsys stats`` shows them."""

from __future__ import annotations

import functools

import duckdb


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``name`` demangled with libstdc++'s ``abi::__cxa_demangle`` (via ``cxxfilt``).

    Names that are not mangled, or that the demangler rejects, are returned unchanged.
    """
    if not name.startswith("_Z"):
        return name
    try:
        import cxxfilt

        return cxxfilt.demangle(name, external_only=False) or name
    except Exception:  # noqa: BLE001 - any demangler failure keeps the raw name
        return name


def demangle_trace(con: duckdb.DuckDBPyConnection, trace_id: int) -> int:
    """Demangle the mangled event names of one trace in place; keep raw names in ``kernel_names``.

    Returns the number of distinct names changed.
    """
    rows = con.execute(
        "SELECT DISTINCT name FROM events WHERE trace_id = ? AND starts_with(name, '_Z')",
        [trace_id],
    ).fetchall()
    pairs = [(raw, demangle(raw)) for (raw,) in rows]
    pairs = [(raw, nice) for raw, nice in pairs if nice != raw]
    if not pairs:
        return 0
    con.execute("CREATE OR REPLACE TEMP TABLE _names (raw_name VARCHAR, name VARCHAR)")
    con.executemany("INSERT INTO _names VALUES (?, ?)", pairs)
    con.execute(
        "UPDATE events SET name = n.name FROM _names n "
        "WHERE events.trace_id = ? AND events.name = n.raw_name",
        [trace_id],
    )
    con.execute(
        "INSERT INTO kernel_names SELECT n.name, n.raw_name FROM _names n WHERE NOT EXISTS "
        "(SELECT 1 FROM kernel_names k WHERE k.raw_name = n.raw_name)"
    )
    con.execute("DROP TABLE _names")
    return len(pairs)
