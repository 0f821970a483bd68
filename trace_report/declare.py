"""The one declaration of an analysis command: its options and what it computes.

An analysis package (``trace_report/analyses/<command>/``) declares its command in its
``__init__.py`` with two things:

- a frozen options dataclass whose fields carry :class:`Opt` metadata through
  ``typing.Annotated`` (help text, unit, bounds, the flag's spelling) and their default;
- ``COMMAND = Command(...)``: the command's name, that options class, the function that computes
  the result (``"module:function"`` inside the package, imported only when the command runs),
  the title of its table, its help and examples.

From this alone the CLI command (:mod:`trace_report.cli.declared`), the notebook method of
``TraceDB`` (:mod:`trace_report.api`), docs/cli.md (generated from ``--help``) and the report's
table (:class:`ReportTable`) are made, and all of them go through the same per-run funnel
(:mod:`trace_report.store.per_run`). An analysis package's ``__init__.py`` imports only the
standard library and this module, so ``trace-report --help`` stays light; the computation lives
in a submodule of the package.

Standard library only: the CLI imports this module on every start.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Opt:
    """What the command line and the notebook say about one option field.

    ``help``: one sentence (the unit, when given, is appended as ``[unit: µs]``); ``flags``: the
    option's spelling on the command line (default ``--field-name``; ``--a/--b`` for a pair of
    boolean flags, a second entry for a short name); ``min`` / ``max``: bounds the command line
    checks (a usage error, exit 2); ``cli``: False for a field the notebook alone sets;
    ``parse``: ``"module:function"`` (as :attr:`Command.compute`), ``(text, flag) -> value``
    turning the option's text (``19.5T``, ``3-4``) into the field's value, raising
    :class:`~trace_report.errors.InputError` (or its subclass ``UsageError``) naming ``flag`` for
    text it cannot read; the command line then takes text, and the notebook method reads a text
    value with it too (other values go to the field as they are); ``metavar``: the value's name in
    the help (``--fail-if RULE``), else the type's."""

    help: str
    flags: tuple[str, ...] = ()
    unit: str | None = None
    min: float | None = None
    max: float | None = None
    cli: bool = True
    parse: str | None = None
    metavar: str | None = None

    def names(self, field_name: str) -> tuple[str, ...]:
        """The option's spelling: :attr:`flags`, else ``--field-name``."""
        return self.flags or (f"--{field_name.replace('_', '-')}",)

    def text(self) -> str:
        """The help text with its unit."""
        return f"{self.help} [unit: {self.unit}]" if self.unit else self.help


RANK = Opt("Only this rank.", ("--rank",))
BY_RANK = Opt("One group of rows per rank (else summed over ranks).", ("--by-rank",))
STEPS_ONLY = Opt("HTA's selection (GPU work launched before the last of 2+ ProfilerSteps), or every GPU operation.",
                 ("--steps-only/--all-steps",))
HTA_ROUNDING = Opt("Round fractional timestamps to whole us as HTA does (start up, end down).", ("--hta-rounding",))
LIMIT = Opt("Print at most N rows.", ("--limit", "-n"), min=1)
"""Options that several analyses take, declared once (their fields reuse these). A field declared
with :data:`LIMIT` is the command's ``--limit`` (in its place among the shared options), where the
analysis cuts the rows itself (per rank); without one, ``--limit`` cuts each run's rows."""


@dataclass(frozen=True)
class ReportTable:
    """The table a command adds to ``trace-report report``: its first ``rows`` rows, computed with
    the options ``options`` (field name -> value; the report's ``--rank`` is passed as ``rank``
    when the options have that field)."""

    title: str
    rows: int = 10
    options: dict[str, Any] = field(default_factory=dict)
    notes: bool = True
    """Whether the command's notes join the section's notes."""


@dataclass(frozen=True)
class Chart:
    """A chart a command also writes with ``--chart PATH`` (``.html``, ``.png`` or ``.svg``):
    ``function`` is ``"module:function"``, ``(db, options) -> chart | None`` (an Altair chart, None
    when the run has nothing to draw), called on each run; the first run's chart is written (``what``
    names it in the note about the others)."""

    function: str | None
    help: str = "Also write the chart (.html, .png or .svg)."
    what: str = "chart"
    after: str | None = None
    """The option field ``--chart`` follows in the command's options (None: after every field);
    ``function`` None: the command's :attr:`Command.main` writes the chart itself."""


@dataclass(frozen=True)
class Inputs:
    """The inputs argument of a command other than the usual one (one or more traces, run folders,
    databases or datasets, whose traces are hashed while the command line starts): ``help``, and
    ``optional``: a list that may be empty (a mode that reads no input, such as ``roofline --gpu
    list``). The command line's parameter is ``targets`` either way."""

    help: str
    optional: bool = False


@dataclass(frozen=True)
class Pair:
    """The inputs of a command that compares two (``compare``): the arguments ``a`` and ``b``, one
    input each (a trace, run folder, database or dataset), with the helps ``a`` and ``b``. Its
    compute function (and ``ray``) is ``(a: TraceDB, b: TraceDB, options) -> Result``, on each side
    narrowed to one run: ``--run-a`` / ``--run-b`` name it where a side holds several (before
    ``--merge-runs``, which merges them; there is no ``--run``). The notebook method takes B first
    (a ``TraceDB``, or what :func:`trace_report.open` opens) and ``run_a`` / ``run_b``."""

    a: str
    b: str


@dataclass(frozen=True)
class Save:
    """What a command writes instead of a table (``slice``: a Chrome trace): ``function`` is
    ``"module:function"``, ``(result, options, path) -> (value, lines)`` writing the compute
    function's result to ``path`` and returning what the notebook method returns and the lines the
    command line prints on stderr after the notes; ``help``: the help of ``-o``, which such a command
    requires. It has none of the table options (``--format``, ``--raw``, ``--limit``,
    ``--full-names``, ``--merge-runs``) and reads its input as one (``--run LABEL`` narrows it);
    its notebook method takes the path first."""

    function: str
    help: str


@dataclass(frozen=True)
class Command:
    """One analysis command.

    ``name``: the CLI name (``kernel-variance``); ``options``: its frozen options dataclass;
    ``compute``: ``"module:function"`` relative to the declaring package, a function
    ``(db: TraceDB, options) -> Result`` (``.frame``, ``.notes``); an options class may define
    ``check()``, raising :class:`~trace_report.errors.UsageError` for options no input can
    satisfy, which the command line calls before it reads any input; ``title``: the table's
    title; ``help``: the command's help (first line: the summary); ``examples``: command lines
    shown under it; ``views``: the analysis views it reads (a database opens those alone; None:
    every view); ``full_names``: its rows hold kernel names (adds ``--full-names``);
    ``report``: its table in the report, if any; ``display``: ``"module:function"``, a function
    ``(frame, fmt, full_names) -> frame`` that turns cells into text for a format before the table
    is written (lists joined, names shortened), if any; ``notebook``: the ``TraceDB`` method's name
    when it is not the command's. ``package`` is set by :func:`commands`.

    Hooks for commands that do more than print one table (each ``"module:function"`` as
    ``compute``; the notebook method ignores them and returns ``compute``'s frame):

    - ``ray``: the compute function run with ``--engine ray`` (same signature; the command line
      adds ``--engine`` and ``--ray-address`` and opens the inputs for Ray);
    - ``chart``: a :class:`Chart` written with ``--chart PATH``;
    - ``direct``: ``(paths, options) -> frame | None``, a table read straight from an input that
      is no trace (an Nsight Systems summary CSV), None for every other input;
    - ``write``: ``(per: PerRun, options, out: OutputOptions) -> list[str]`` writes the output
      itself (several tables, a rendering of its own) instead of the one table, and returns lines
      for stderr;
    - ``titles``: ``(field, title)`` pairs, the table's title when that boolean option is set;
    - ``limit``: False for a command without ``--limit``;
    - ``inputs``: an :class:`Inputs` other than the usual list of one or more inputs, or a
      :class:`Pair`: two inputs compared;
    - ``save``: a :class:`Save`, the file the command writes instead of a table;
    - ``main``: ``(options, given) -> None``, the command line's own body instead of the funnel, for
      a command whose output is more than tables of its runs (``roofline``: a summary per run and
      a peaks listing without input); ``given`` holds every command-line parameter by name (the
      inputs, the shared options). The notebook method still goes through the funnel. That of a
      :class:`Pair` is ``(result, options, given) -> None``: it prints ``result``, what the compute
      function gave on A and B (opened, each narrowed to its run, by the command line's funnel).

    An options class may also define ``views()``, the analysis views those options read (instead
    of ``views``)."""

    name: str
    options: type
    compute: str
    title: str
    help: str
    examples: tuple[str, ...] = ()
    views: tuple[str, ...] | None = None
    full_names: bool = False
    report: ReportTable | None = None
    display: str | None = None
    notebook: str | None = None
    ray: str | None = None
    chart: Chart | None = None
    direct: str | None = None
    write: str | None = None
    titles: tuple[tuple[str, str], ...] = ()
    limit: bool = True
    inputs: Inputs | Pair | None = None
    save: Save | None = None
    main: str | None = None
    package: str = ""

    @property
    def method(self) -> str:
        """The ``TraceDB`` method's name: ``notebook``, else the command's with ``_``."""
        return self.notebook or self.name.replace("-", "_")

    def function(self) -> Callable[..., Any]:
        """The compute function, imported now (its module may load pandas)."""
        return self._load(self.compute)

    def display_function(self) -> Callable[..., Any] | None:
        """The display function, imported now, or None."""
        return self._load(self.display) if self.display else None

    def hook(self, where: str | None) -> Callable[..., Any] | None:
        """A hook's function (``ray``, ``direct``, ``write``, ``main``, a chart's, a saver's),
        imported now, or None."""
        return self._load(where) if where else None

    def title_for(self, options: Any) -> str:
        """The table's title for these options (:attr:`titles`, else :attr:`title`)."""
        return next((t for name, t in self.titles if getattr(options, name, False)), self.title)

    def views_for(self, options: Any) -> tuple[str, ...] | None:
        """The analysis views these options read: their ``views()``, else :attr:`views`."""
        return options.views() if hasattr(options, "views") else self.views

    def _load(self, where: str) -> Callable[..., Any]:
        """``module:name`` relative to the declaring package, or absolute (``trace_report.present...``)."""
        module, _, name = where.partition(":")
        path = module if module.startswith("trace_report.") else f"{self.package}.{module}"
        return getattr(importlib.import_module(path), name)

    def make_options(self, values: dict[str, Any]) -> Any:
        """The options dataclass from ``values`` (field name -> value; missing: the default); a
        text value of a field with :attr:`Opt.parse` is read with it."""
        parsers = {f.name: meta for f, _, meta in option_fields(self.options) if meta.parse is not None}
        return self.options(**{k: self.parse(k, parsers[k], v) if k in parsers and isinstance(v, str) else v
                               for k, v in values.items() if k in option_names(self.options)})

    def parse(self, field_name: str, meta: Opt, text: str) -> Any:
        """``text`` read with the option's :attr:`Opt.parse`."""
        return self._load(meta.parse)(text, meta.names(field_name)[0])  # type: ignore[arg-type]


def option_fields(options: type) -> list[tuple[dataclasses.Field[Any], type, Opt]]:
    """Each field of the options dataclass ``options`` with its type (without ``Annotated``) and
    its :class:`Opt`. Raises TypeError for a field without one: every option is declared."""
    hints = typing.get_type_hints(options, include_extras=True)
    out = []
    for f in dataclasses.fields(options):
        hint = hints[f.name]
        meta = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Opt)]
        if not meta:
            raise TypeError(f"{options.__name__}.{f.name}: no Opt(...) in its Annotated type")
        out.append((f, typing.get_args(hint)[0], meta[0]))
    return out


def option_names(options: type) -> set[str]:
    return {f.name for f in dataclasses.fields(options)}


ANALYSES = "trace_report.analyses"
_DECLARES = re.compile(r"^COMMAND\s*=\s*Command\(", re.M)


def _declaring_packages() -> Iterator[str]:
    """The analysis packages whose ``__init__.py`` declares a command. The source is read, not
    imported, so that a package that declares none (and may load pandas) stays unloaded."""
    root = resources.files(ANALYSES)
    for info in pkgutil.iter_modules([str(root)]):
        if not info.ispkg:
            continue
        init = root.joinpath(info.name, "__init__.py")
        if init.is_file() and _DECLARES.search(init.read_text(encoding="utf-8")):
            yield f"{ANALYSES}.{info.name}"


@cache
def commands() -> dict[str, Command]:
    """Every declared analysis command by CLI name, in name order."""
    found = {}
    for package in _declaring_packages():
        cmd = importlib.import_module(package).COMMAND
        found[cmd.name] = dataclasses.replace(cmd, package=package)
    return dict(sorted(found.items()))


def command_package(name: str) -> str | None:
    """The package that declares the command ``name`` (``kernel-variance`` ->
    ``trace_report.analyses.kernel_variance``), found without importing any other, else None."""
    package = name.replace("-", "_")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", package):
        return None
    init = resources.files(ANALYSES).joinpath(package, "__init__.py")
    try:
        return f"{ANALYSES}.{package}" if _DECLARES.search(init.read_text(encoding="utf-8")) else None
    except (FileNotFoundError, NotADirectoryError):
        return None


def command(name: str) -> Command:
    """The declared command ``name``; KeyError when there is none."""
    package = command_package(name)
    if package is None:
        raise KeyError(name)
    cmd = importlib.import_module(package).COMMAND
    return dataclasses.replace(cmd, package=package)


def computed(package: str, names: Iterable[str], module: str = "compute") -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for an analysis package: ``names`` are read from its
    submodule ``module`` when first asked for (``from trace_report.analyses.launches import
    launches``), so that importing the package for its declaration loads no pandas."""
    wanted = frozenset(names)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
        if name in wanted:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
