"""Kernel names: demangle Itanium C++ names (``_Z...``) as ``nsys stats`` shows them."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``name`` demangled with the ``cpp_demangle`` crate (Itanium C++ ABI, as ``nsys stats``).

    libiberty's ``c++filt`` rejects some cuDNN/CUTLASS kernel names that ``cpp_demangle``
    reads. Names that are not mangled, or that the demangler rejects, are returned unchanged.
    """
    if not name.startswith("_Z"):
        return name
    try:
        import cpp_demangle

        return cpp_demangle.demangle(name) or name
    except Exception:  # noqa: BLE001 - any demangler failure keeps the raw name
        return name
