"""Kernel names: demangle Itanium C++ names (``_Z...``) as ``nsys stats`` shows them, parse them
once (:func:`parse_kernel_name`: function, template arguments, parameters), shorten them for
matching (:func:`short_kernel_name`, ``compare --match short``), and give the forms that tables,
charts and the report shorten them to (:func:`name_forms`, :func:`cut_form`; the choice among
them is :func:`trace_report.present.fit.short_names`)."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

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


# ---------------------------------------------------------------- the parse
#
# A kernel name is parsed once (parse_kernel_name): its brackets, its final parameter list, and
# the function's qualified name as a tree (scopes, template arguments, parameter lists). Every
# shortened form is a rendering of that parse: the short name (short_kernel_name) and the display
# forms (name_forms) at decreasing detail, where namespaces, scaffolding arguments (std::array,
# offset calculators, alpaka's accelerator), literal arguments (4, float, 128) and wrapper
# templates go first; what is left is the kernel function and the innermost named argument of
# each template argument (the functor, the alpaka kernel), which tells kernels apart.

_OPERATOR = re.compile(r"operator\s*(\(\)|\[\]|<<=?|>>=?|->\*?|<=>|&&|\|\||\+\+|--|[-+*/%^&|~!=<>,]=?)")
_HEAD = re.compile(r"[^\s<>(){}\[\],:]+")
_PREFIX = re.compile(r"(?:(?:const|volatile|struct|class|enum|typename)\s+)*")
_SUFFIX = re.compile(r"(?:\s*(?:const\b|volatile\b|\*|&|\.\.\.))*$")
_CONST = re.compile(r"\s*const\b")
_CAST = re.compile(r"\((?:unsigned |signed )?\w+(?: \w+)?\)(?=-?\w)")
_ANON = ("(anonymous namespace)", "<unnamed>")
_GENERIC = re.compile(r"(?i)kernel\d*")
"""Kernel names that say nothing alone (``cutlass::Kernel``, ``gemvx::kernel``): shown with
their qualifier while there is room."""
_BUILTIN_WORDS = (
    "void bool char wchar_t char16_t char32_t short int long signed unsigned float double half __half __half2 "
    "__nv_bfloat16 __nv_bfloat162 __nv_half __nv_fp8_e4m3 __nv_fp8_e5m2 int8_t uint8_t int16_t uint16_t int32_t "
    "uint32_t int64_t uint64_t size_t ptrdiff_t float2 float3 float4 double2 int2 int3 int4 uint2 uint4 half2 "
    "nullptr_t decltype nullptr const volatile true false Half BFloat16 bfloat16_t half_t tfloat32_t float_e4m3_t "
    "float_e5m2_t Float8_e4m3fn Float8_e5m2 Float8_e4m3fnuz Float8_e5m2fnuz complex c10 at std cutlass")
_BUILTIN = frozenset(_BUILTIN_WORDS.split())
"""Words of a literal template argument: built-in and dtype names (``c10::BFloat16``)."""
_SCAFFOLD_WORDS = (
    "array Array OffsetCalculator TrivialOffsetCalculator LoadWithCast LoadWithoutCast StoreWithCast "
    "StoreWithoutCast ApiCudaRt ApiHipRt AccGpuUniformCudaHipRt AccGpuCudaRt AccGpuHipRt integral_constant "
    "RestrictPtrTraits DefaultPtrTraits TensorListMetadata FusedOptimizerTensorListMetadata Vec DimInt "
    "IndexBoundsCheck cublasGemvTensor cublasGemvTensorBatched cublasGemvTensorStridedBatched")
_SCAFFOLD = frozenset(_SCAFFOLD_WORDS.split())
"""Template arguments that every kernel of a family has (PyTorch's ``std::array<char*, 3>`` and
offset calculators, alpaka's API and accelerator types): collapsed first."""
_PLACEHOLDER = re.compile(r"T\d+(?:\.\.\.)?")


class _Comp:
    """One scope of a qualified name: ``head<args>(params) const``."""

    __slots__ = ("args", "const", "head", "params")

    def __init__(self, head: str, args: list[_Arg] | None = None, params: str | None = None,
                 const: bool = False) -> None:
        self.head, self.args, self.params, self.const = head, args, params, const

    @property
    def trail(self) -> bool:
        """A lambda or ``operator()`` scope: it names no kernel by itself."""
        return self.head[:1] in "{[" or self.head.startswith("operator")


class _Arg:
    """A template argument: a qualified name (``name``) with decorations, or opaque text."""

    __slots__ = ("kind", "name", "post", "pre", "text")

    def __init__(self, text: str, name: list[_Comp] | None, pre: str = "", post: str = "") -> None:
        self.text, self.name, self.pre, self.post = text, name, pre, post
        self.kind = _kind(self)


def _sig(comps: list[_Comp]) -> int:
    """Index of the scope that names the thing (the last one that is not a lambda, an operator
    or an anonymous namespace)."""
    for i in range(len(comps) - 1, -1, -1):
        if not comps[i].trail and comps[i].head not in _ANON:
            return i
    return len(comps) - 1


def _first_shown(comps: list[_Comp], s: int) -> int:
    """Where a name without namespaces starts: at scope ``s``, or at its qualifier when ``s`` is
    a generic kernel name (``gemvx::kernel``)."""
    generic = s > 0 and _GENERIC.fullmatch(comps[s].head)
    return s - 1 if generic and comps[s - 1].head not in _ANON and not comps[s - 1].trail else s


def _kind(arg: _Arg) -> str:
    """``literal`` (numbers, built-in and dtype names), ``scaffold`` or ``named``."""
    if arg.name is None:
        words = re.findall(r"[A-Za-z_]\w*", arg.text)
        return "literal" if all(w in _BUILTIN for w in words) else "opaque"
    comps = arg.name
    head = comps[_sig(comps)].head
    if head[:1].isdigit() or head[:1] == "-":  # 4, 2ul, -2
        return "literal"
    if head in _SCAFFOLD or (len(comps) == 1 and _PLACEHOLDER.fullmatch(head)):  # T1, T6... (EDG)
        return "scaffold"
    words = re.findall(r"[A-Za-z_]\w*", arg.text)
    if all(w in _BUILTIN for w in words) or "*" in arg.post:  # a pointer type is data, not a functor
        return "literal"
    return "named"


def _brackets(text: str) -> dict[int, int] | None:
    """The index of the closing bracket of each bracket that opens in ``text``. ``<`` and ``>``
    are brackets only where the innermost open bracket is ``<`` or none (``(8)>(0)`` and ``Device
    -> Device`` are text); ``<unnamed>`` and ``operator<`` are words. None when unbalanced."""
    pairs, balanced = _bracket_pairs(text)
    return pairs if balanced else None


def _bracket_pairs(text: str) -> tuple[dict[int, int], bool]:
    """:func:`_brackets`' pairs, and whether ``text`` is balanced; in a text that is not (a name
    cut short), the brackets that close, a closing bracket that closes none being text."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    close = {"<": ">", "(": ")", "[": "]", "{": "}"}
    balanced = True
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "<" and text.startswith("<unnamed>", i):
            i += 9
            continue
        if ch == "o" and text.startswith("operator", i) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = _OPERATOR.match(text, i)
            if m:
                i = m.end()
                continue
        angle_ok = not stack or text[stack[-1]] == "<"
        if ch in "([{" or (ch == "<" and angle_ok):
            stack.append(i)
        elif ch in ")]}" or (ch == ">" and stack and text[stack[-1]] == "<"):
            if not stack or close[text[stack[-1]]] != ch:
                balanced = False
            else:
                pairs[stack.pop()] = i
        i += 1
    return pairs, balanced and not stack


class _Parser:
    def __init__(self, text: str, pairs: dict[int, int]) -> None:
        self.t, self.pairs = text, pairs

    def name(self, i: int, j: int) -> list[_Comp] | None:
        """The qualified name spanning ``text[i:j]`` exactly, or None."""
        comps = []
        while True:
            got = self.comp(i, j)
            if got is None:
                return None
            comp, i = got
            comps.append(comp)
            if i >= j:
                return comps
            if not self.t.startswith("::", i):
                return None
            i += 2

    def comp(self, i: int, j: int) -> tuple[_Comp, int] | None:
        t, pairs = self.t, self.pairs
        if i >= j:
            return None
        if t.startswith("(anonymous namespace)", i):
            return _Comp("(anonymous namespace)"), i + 21
        if t.startswith("<unnamed>", i):
            return _Comp("<unnamed>"), i + 9
        if t[i] in "{[":
            k = pairs.get(i)
            if k is None or k >= j:
                return None
            head, i = re.sub(r"\s+", " ", t[i:k + 1]), k + 1
        else:
            m = _OPERATOR.match(t, i) if t.startswith("operator", i) else None
            m = m or _HEAD.match(t, i)
            if not m or m.end() > j:
                return None
            head, i = re.sub(r"\s+", "", m.group()), m.end()
        args = params = None
        if i < j and t[i] == "<" and pairs.get(i, j) < j:
            args, i = self.args(i + 1, pairs[i]), pairs[i] + 1
        if i < j and t[i] == "(" and pairs.get(i, j) < j:
            params, i = t[i + 1:pairs[i]], pairs[i] + 1
        const = False
        m = _CONST.match(t, i)
        if m and m.end() <= j:
            const, i = True, m.end()
        return _Comp(head, args, params, const), i

    def args(self, i: int, k: int) -> list[_Arg]:
        t = self.t
        return [self.arg(a, b) for a, b in self.spans(i, k) if t[a:b].strip()]

    def spans(self, i: int, k: int) -> list[tuple[int, int]]:
        """The spans of the comma-separated arguments of ``text[i:k]`` (brackets skipped)."""
        t, pairs = self.t, self.pairs
        spans, start, p = [], i, i
        while p < k:
            if p in pairs:
                p = pairs[p] + 1
                continue
            if t.startswith("<unnamed>", p):
                p += 9
                continue
            if t[p] == ",":
                spans.append((start, p))
                start = p + 1
            p += 1
        spans.append((start, k))
        return spans

    def arg(self, a: int, b: int) -> _Arg:
        t = self.t
        while t[a].isspace():
            a += 1
        while t[b - 1].isspace():
            b -= 1
        text = re.sub(r"\s+", " ", t[a:b])
        a2 = _PREFIX.match(t, a, b).end()
        b2 = a2 + _SUFFIX.search(t, a2, b).start() - a2 if a2 < b else b
        name = self.name(a2, b2) if a2 < b2 else None
        return _Arg(text, name, t[a:a2], re.sub(r"\s+", "", t[b2:b]).replace("const", " const"))


class KernelName(NamedTuple):
    """The one parse of a kernel name, which every shortened form renders.

    ``full``: the demangled name, whitespace collapsed. ``text``: ``full`` without its final
    parameter list (a parenthesis group ending the name that follows no space: not ``Memcpy DtoD
    (Device -> Device)``); ``params``: that list's inner text, None without one. ``pairs``: the
    brackets of ``text`` (:func:`_bracket_pairs`: opening index -> closing index; in a name cut
    short, those that close), ``balanced``: whether every bracket closes. ``scopes``: the
    function's qualified name (no return type), scope by scope with its template arguments and
    parameter lists (:class:`_Comp`); None when ``text`` is not a C++ function name."""

    full: str
    text: str
    params: str | None
    pairs: dict[int, int]
    balanced: bool
    scopes: list[_Comp] | None


@functools.lru_cache(maxsize=65536)
def parse_kernel_name(name: str) -> KernelName:
    """``name`` (mangled or not) parsed: :class:`KernelName`."""
    full = re.sub(r"\s+", " ", demangle(str(name))).strip()
    pairs, balanced = _bracket_pairs(full)
    text, params = full, None
    open_ = next((i for i, k in pairs.items() if k == len(full) - 1 and full[i] == "("), None)
    if open_ and not full[open_ - 1].isspace():
        text, params = full[:open_], full[open_ + 1:-1]
        pairs = {i: k for i, k in pairs.items() if k < open_}
    signature = params is not None or text.startswith("void ")
    return KernelName(full, text, params, pairs, balanced, _scopes(text, pairs, signature) if balanced else None)


def _scopes(text: str, pairs: dict[int, int], signature: bool) -> list[_Comp] | None:
    """The qualified name of a function in ``text`` (a demangled name without its parameter list;
    its brackets ``pairs``); in a ``signature`` (it had a parameter list or starts with ``void``)
    a return type ends at the last top-level space."""
    start = 0
    if signature:
        p, cut = 0, -1
        while p < len(text):
            if p in pairs:
                p = pairs[p] + 1
                continue
            if text.startswith("<unnamed>", p):
                p += 9
                continue
            m = _OPERATOR.match(text, p) if text.startswith("operator", p) else None
            if m:
                p = m.end()
                continue
            if text[p] == " ":
                cut = p
            p += 1
        start = cut + 1
    return _Parser(text, pairs).name(start, len(text))


def _short_text(text: str, pairs: dict[int, int], i: int, k: int, depth: int, keep: int) -> str:
    """``text[i:k]`` as :func:`short_kernel_name` shows it: inner parameter lists ``(…)`` (not
    ``()``, ``(anonymous namespace)`` or a group after a space), template arguments (and
    ``<unnamed>``) below the first level ``<…>``, first-level ones cut to ``keep`` characters.
    ``depth``: of the template arguments ``text[i:k]`` is in; -1 in a name cut short, whose
    template arguments are kept as they are."""
    out: list[str] = []
    while i < k:
        ch, close = text[i], pairs.get(i)
        if close is not None and ch == "(" and i > 0 and not text[i - 1].isspace() \
                and text[i + 1:close] not in ("", "anonymous namespace"):
            out.append("(…)")
            i = close + 1
            continue
        if depth > 0 and text.startswith("<unnamed>", i):
            out.append("<…>")
            i += 9
            continue
        if close is not None and ch == "<" and depth >= 0:
            if depth:
                out.append("<…>")
            else:
                inner = _short_text(text, pairs, i + 1, close, 1, keep)
                out.append("<" + (inner if len(inner) <= keep else inner[: keep - 1] + "…") + ">")
            i = close + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=65536)
def short_kernel_name(name: str, keep: int = TEMPLATE_KEEP) -> str:
    """A kernel name as people read it: the return type (``void``) and the parameter list
    dropped, inner parameter lists elided to ``(…)``, nested template arguments folded to
    ``<…>``, top-level ones cut to ``keep`` characters; whitespace collapsed (a rendering of
    :func:`parse_kernel_name`). What Nsight Systems' "shorten kernel names" and HTA's
    ``shorten_name`` (hta/utils/utils.py) elide, but keeping the first template level, which
    tells ``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_…>`` kernels apart.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
    at::detail::Array<char*, 3> >(int, …)`` -> ``at::native::vectorized_elementwise_kernel<4,
    at::native::CUDAFunctor_add<…>, at::detail::Array<…> >``. Names without templates or
    parameters (``ncclKernel_AllReduce_RING_LL_Sum_float``, ``Memcpy DtoD (Device -> Device)``)
    keep their words; a name with unbalanced brackets is kept whole. Two kernels can share a
    short name (the same template with other nested arguments); ``compare --match short`` adds
    them up on purpose.
    """
    parsed = parse_kernel_name(name)
    start = 5 if parsed.text.startswith("void ") else 0
    text = _short_text(parsed.text, parsed.pairs, start, len(parsed.text), 0 if parsed.balanced else -1, keep)
    return text.strip() or parsed.full


class _Style:
    """How much of a name to show: namespaces (``ns``), lambda/operator scopes (``trail``:
    full, compact or drop), template arguments (``args``: all, typed, chain, leaftyped, leaf)
    and the kernel's own literal arguments (``toplit``)."""

    __slots__ = ("args", "ns", "toplit", "trail")

    def __init__(self, ns: bool, trail: str, args: str, toplit: bool = True) -> None:
        self.ns, self.trail, self.args, self.toplit = ns, trail, args, toplit


STYLES = (
    _Style(True, "full", "all"),          # 1: the name as written, parameter lists elided
    _Style(False, "compact", "all"),      # 2: no namespaces, no operator() scopes
    *(_Style(False, "drop", args, lit)    # 3..12: no scaffolding arguments, no lambda scopes, and
      for args in ("typed", "chaintyped", "chain", "leaftyped", "leaf") for lit in (True, False)),
)
"""The forms of :func:`name_forms` after the whole name. From 3 on, pairs: with and without the
kernel's own literal arguments before its first named one (``<4, …>``, ``<128, 2, …>``; those
after it are a parameter pack, the kernel's argument types, never shown); the arguments
``typed`` (literals kept), ``chaintyped`` (named wrappers, literals innermost:
``A<B<C<float>>>``), ``chain`` (``A<B<C>>``), ``leaftyped`` (the innermost named argument with
its literals: ``C<float>``), ``leaf`` (``C``)."""
PREFERRED = (1, 3, 4, 6, 8, 10, 12)
"""Forms in the order a name takes the first that fits, most detailed first: scaffolding goes
with the namespaces (form 2, which keeps it, serves only to tell names apart)."""


def _literal(arg: _Arg) -> str:
    return _compact(arg.text)


_LAMBDA = re.compile(r"[{\[]lambda\((.*)\)\s*(?:#\d+|\(instance \d+\))?[}\]]")


def _lambda_types(comps: list[_Comp], s: int) -> str:
    """``(double)``: the parameter types of the last lambda after scope ``s`` when that scope is a
    function (``neg_kernel_cuda(…)::{lambda()#2}::…::{lambda(double)#1}``), which tell the dtype
    variants of one kernel apart; empty otherwise."""
    if comps[s].args is not None or comps[s].params is None:
        return ""
    for c in reversed(comps[s + 1:]):
        m = _LAMBDA.fullmatch(c.head)
        if m and m.group(1).strip():
            return f"({_compact(m.group(1))})"
    return ""


def _compact(text: str) -> str:
    """Literal text without casts, namespaces, ``const`` or spaces before ``*``/``&``."""
    text = _CAST.sub("", text)
    text = re.sub(r"\b[A-Za-z_]\w*::", "", text)
    text = re.sub(r"\b(?:const|volatile|struct|class|enum|typename)\b ?", "", text).strip()
    return re.sub(r"\s+(?=[*&])", "", text)


def _leaf(arg: _Arg) -> _Arg:
    """The innermost named argument: through wrappers with exactly one named argument
    (``BinaryFunctor<float, float, float, MulFunctor<float>>`` -> ``MulFunctor<float>``)."""
    while arg.name is not None:
        comp = arg.name[_sig(arg.name)]
        named = [a for a in comp.args or [] if a.kind == "named"]
        if len(named) != 1:
            break
        arg = named[0]
    return arg


def _render(comps: list[_Comp], style: _Style, top: bool = False) -> str:
    s = _sig(comps)
    if style.ns:
        shown = comps
    else:
        shown = comps[_first_shown(comps, s):s + 1]
        if style.trail == "compact":
            shown += [c for c in comps[s + 1:] if not c.head.startswith("operator")]
    parts = []
    for c in shown:
        text = c.head
        if c.args is not None:
            inner = _render_args(c.args, style, top and c is comps[s])
            text += f"<{inner}>" if inner or style.args == "all" else ""
        if c.params is not None and style.trail == "full":
            text += "()" if not c.params.strip() else "(…)"
        if c.const and style.trail == "full":
            text += " const"
        parts.append(text)
    if style.trail == "drop" and style.args in ("typed", "chaintyped"):
        parts[-1] += _lambda_types(comps, s)
    return "::".join(parts)


def _render_args(args: list[_Arg], style: _Style, top: bool) -> str:
    mode = style.args
    if mode == "all":
        return ", ".join((a.text if style.ns else _literal(a)) if a.name is None else
                         (a.pre if style.ns else "") + _render(a.name, style) +
                         (a.post if style.ns else a.post.replace(" const", "")) for a in args)
    innermost = not any(a.kind == "named" for a in args)
    out: list[str] = []
    leading = True  # the kernel's literal arguments before its first named one (<4, …>, <128, 2, …>)
    for a in args:
        if a.kind == "scaffold":
            continue
        if a.kind in ("literal", "opaque"):
            if (style.toplit and leading) if top else (mode == "typed" or (mode in ("chaintyped", "leaftyped")
                                                                           and innermost)):
                out.append(_literal(a))
            continue
        leading = False
        whole = mode in ("typed", "chain", "chaintyped")
        text = _render(a.name, style) if whole else _leaf_text(a, style)  # type: ignore[arg-type]
        if text not in out or mode in ("typed", "chaintyped"):
            out.append(text)
    return ", ".join(out)


def _leaf_text(arg: _Arg, style: _Style) -> str:
    """The innermost named argument of ``arg`` (:func:`_leaf`): its name, and in ``leaftyped``
    its literal arguments when it has no named ones (``MulFunctor<float>``)."""
    leaf = _leaf(arg)
    if leaf.name is None:
        return _literal(leaf)
    comps = leaf.name
    s = _sig(comps)
    text = "::".join(c.head for c in comps[_first_shown(comps, s):s + 1])
    args = comps[s].args or []
    if style.args == "leaftyped" and args and not any(a.kind == "named" for a in args):
        lits = [_literal(a) for a in args if a.kind in ("literal", "opaque")]
        text += f"<{', '.join(lits)}>" if lits else ""
    return text + (_lambda_types(comps, s) if style.args == "leaftyped" else "")


@functools.lru_cache(maxsize=65536)
def name_forms(name: str) -> tuple[str, ...]:
    """A kernel name at decreasing detail, one form per :data:`STYLES` after the whole name
    (whitespace collapsed, no ``void``): namespaces, lambda scopes, scaffolding and literal
    template arguments, wrapper templates go in that order; the last form is the kernel function
    and the innermost named argument of each template argument
    (``vectorized_elementwise_kernel<MulFunctor>``, ``gpuKernel<calc_energy>``). A name that is not
    a C++ function name (``Memcpy DtoD (Device -> Device)``) has the one form at every level."""
    parsed = parse_kernel_name(name)
    if parsed.scopes is None:
        return (parsed.full,) * (len(STYLES) + 1)
    whole = parsed.full.removeprefix("void ")
    return (whole, *(_render(parsed.scopes, st, top=True) or whole for st in STYLES))


def _split_form(text: str) -> tuple[str, list[str]]:
    """A form's kernel function and its top-level template arguments:
    ``("vectorized_elementwise_kernel", ["MulFunctor<float>"])``; no arguments for a form
    without a final ``<…>``."""
    pairs = _brackets(text)
    if not text.endswith(">") or pairs is None:
        return text, []
    open_ = next((i for i, k in pairs.items() if k == len(text) - 1 and text[i] == "<"), None)
    if not open_:
        return text, []
    spans = _Parser(text, pairs).spans(open_ + 1, len(text) - 1)
    return text[:open_], [text[a:b].strip() for a, b in spans if text[a:b].strip()]


def cut_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle, marked ``…`` (two thirds of the room
    to the start, the rest to the end, which often tells names apart)."""
    if len(text) <= width:
        return text
    if width < 2:
        return text[:width]
    head = (2 * width) // 3
    return text[:head] + "…" + text[len(text) - (width - head - 1):]


def cut_name(name: str, width: int, *, identity: bool = False) -> str:
    """The last (shortest) form of :func:`name_forms` in ``width`` characters (:func:`cut_form`)."""
    return cut_form(name_forms(name)[-1], width, identity=identity)


@functools.lru_cache(maxsize=65536)
def cut_form(text: str, width: int, *, identity: bool = False, min_base: int = 12) -> str:
    """A form of a name in ``width`` characters, its innermost arguments kept longest: the kernel
    function is cut first (to ``min_base`` characters at least), then the arguments after the
    first go (``…``), then the first is cut the same way (its wrapper before what it wraps:
    ``AUn…tor<MulFunctor<float>>``). ``identity``: the arguments are never cut, even past
    ``width``."""
    if len(text) <= width:
        return text
    base, args = _split_form(text)
    if not args:
        return cut_middle(base, width)
    base = base.rsplit("::", 1)[-1]  # the qualifier of a generic kernel (cutlass::Kernel) goes first
    if len(base) + len(", ".join(args)) + 2 <= width:
        return f"{base}<{', '.join(args)}>"
    floor = min(len(base), min_base)
    for kept in ([", ".join(args)], [args[0], "…"] if len(args) > 1 else []):
        if kept:
            inner = ", ".join(kept)
            if identity or width - len(inner) - 2 >= floor:
                return cut_middle(base, max(width - len(inner) - 2, floor)) + f"<{inner}>"
    if len(args) > 1:
        args = [args[0], "…"]
    base_room = min(len(base), max(4, width // 4))
    share = width - base_room - 2 - (3 if len(args) > 1 else 0)
    out = cut_middle(base, base_room) + "<" + ", ".join([cut_form(args[0], share, min_base=4), *args[1:]]) + ">"
    return out if len(out) <= width else cut_middle(out, width)
