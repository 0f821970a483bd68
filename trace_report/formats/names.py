"""Kernel names: demangle Itanium C++ names (``_Z...``) as ``nsys stats`` shows them, and shorten
them for tables, charts and matching (:func:`short_kernel_name`)."""

from __future__ import annotations

import functools
import re

TEMPLATE_KEEP = 56
"""Characters of a kernel's top-level template arguments kept by :func:`short_kernel_name`."""


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


def _strip_params(text: str) -> str:
    """``f<T>(int, float)`` -> ``f<T>``: drop a final parameter list (not ``Memcpy DtoD (…)``, whose
    parenthesis follows a space). A trailing ``const`` or ``::{lambda()#1}`` scope is not a list."""
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i] if i > 0 and not text[i - 1].isspace() else text
    return text


def _elide_params(text: str) -> str:
    """Inner parameter lists become ``(…)`` (``f(at::TensorIterator&, long)::{lambda(int)#1}`` ->
    ``f(…)::{lambda(…)#1}``), at any template depth: ``TensorIterator&`` against
    ``TensorIteratorBase&`` (PyTorch versions) then reads the same. Kept: ``()``, groups after a
    space (``Memcpy DtoD (Device -> Device)``) and ``(anonymous namespace)``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "(" and i > 0 and not text[i - 1].isspace():
            depth, j = 0, i
            while j < n:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            inner = text[i + 1:j]
            if j < n and inner and inner != "anonymous namespace":
                out.append("(…)")
                i = j + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _fold_templates(text: str, keep: int) -> str:
    """Nested template arguments become ``<…>``; top-level ones are cut to ``keep`` characters
    (the cut marked ``…``). Unbalanced brackets leave the text as it is."""
    out: list[str] = []
    arg: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<")
                arg = []
            elif depth == 2:
                arg.append("<…>")
            continue
        if ch == ">" and depth:
            depth -= 1
            if depth == 0:
                inner = "".join(arg)
                out.append((inner if len(inner) <= keep else inner[: keep - 1] + "…") + ">")
            continue
        if depth == 1:
            arg.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out) if depth == 0 else text


@functools.lru_cache(maxsize=65536)
def short_kernel_name(name: str, keep: int = TEMPLATE_KEEP) -> str:
    """A kernel name as people read it: the return type (``void``) and the parameter list
    dropped, inner parameter lists elided to ``(…)``, nested template arguments folded to
    ``<…>``, top-level ones cut to ``keep`` characters; whitespace collapsed. What Nsight
    Systems' "shorten kernel names" and HTA's ``shorten_name`` (hta/utils/utils.py) elide, but
    keeping the first template level, which tells ``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_…>`` kernels apart.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
    at::detail::Array<char*, 3> >(int, …)`` -> ``at::native::vectorized_elementwise_kernel<4,
    at::native::CUDAFunctor_add<…>, at::detail::Array<…> >``. Names without templates or
    parameters (``ncclKernel_AllReduce_RING_LL_Sum_float``, ``Memcpy DtoD (Device -> Device)``)
    keep their words. Two kernels can share a short name (the same template with other nested
    arguments); ``compare --match short`` adds them up on purpose.
    """
    full = re.sub(r"\s+", " ", demangle(str(name))).strip()
    text = _fold_templates(_elide_params(_strip_params(full.removeprefix("void "))), keep).strip()
    return text or full
