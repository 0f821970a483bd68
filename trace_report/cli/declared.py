"""Commands made from the analyses' declarations (:mod:`trace_report.declare`).

:func:`register` turns a :class:`~trace_report.declare.Command` into a Typer command: the
inputs argument, one option per field of its options dataclass (help, unit, bounds and default
from the field), and the shared options of every table command, in this order after the
fields: ``--chart`` (a command with a chart), ``--full-names`` (where its rows hold kernel names),
``--format``, ``--raw``, ``--limit``, ``-o``, ``--engine`` and ``--ray-address`` (a command with
a Ray variant), ``--merge-runs``, ``--run``. Its body is the one funnel: open the inputs
(:func:`~trace_report.cli.options.load`, or for Ray
:func:`~trace_report.cli.options.ray_load`), the analysis on each run
(:func:`~trace_report.store.per_run.per_run`), the notes, then the table
(:func:`~trace_report.present.tables.emit`) or the command's own writer. A command that saves a
file (:class:`~trace_report.declare.Save`: ``slice``) has its required ``-o`` and ``--run`` alone;
one with its own body (:attr:`~trace_report.declare.Command.main`: ``roofline``) gets its options
and every parameter; :class:`~trace_report.declare.Inputs` gives other inputs arguments than the
usual list. A command over two inputs (:class:`~trace_report.declare.Pair`: ``compare``) has the
arguments ``A`` and ``B``, ``--run-a`` and ``--run-b`` before ``--merge-runs`` and no ``--run``;
its funnel opens both, narrows each to its run and computes on the two.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trace_report.cli.options import (
    EngineName,
    EngineOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    MergeRunsOpt,
    OutputOpt,
    RawOpt,
    RayAddressOpt,
    RunAOpt,
    RunBOpt,
    RunOpt,
    TargetsArg,
    err,
    inputs_given,
    load,
    notes,
    output_given,
    ray_load,
    ray_session,
    typer_option,
    warn,
)
from trace_report.cli.registry import app
from trace_report.declare import LIMIT, Command, Opt, Pair, option_fields, option_names
from trace_report.storage import location

if TYPE_CHECKING:
    from trace_report.store.per_run import PerRun
    from trace_report.store.tracedb import TraceDB

FUNNEL = ("targets", "a", "b", "chart", "full_names", "fmt", "raw", "limit", "output", "engine", "ray_address",
          "run_a", "run_b", "merge_runs", "run")
"""The parameters a declared command may have beside its options' fields."""


def _cli_type(tp: Any) -> tuple[Any, bool]:
    """The type Typer parses for a field of type ``tp``, and whether it is a tuple field (given as
    a repeatable option, a list)."""
    if typing.get_origin(tp) is tuple:
        return list[typing.get_args(tp)[0]] | None, True  # type: ignore[misc,valid-type]
    return tp, False


def _parameter(f: dataclasses.Field[Any], tp: Any, meta: Opt) -> inspect.Parameter:
    cli_tp, is_tuple = _cli_type(tp)
    if meta.parse is not None:
        cli_tp = str | None  # the text, read with meta.parse when the command runs
    option = typer_option(dataclasses.replace(meta, flags=meta.names(f.name)))
    default = None if is_tuple else f.default
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[cli_tp, option])


def _inputs(cmd: Command) -> list[inspect.Parameter]:
    """The inputs' argument: the usual list (:data:`~trace_report.cli.options.TargetsArg`), or
    that of :attr:`Command.inputs`."""
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    spec = cmd.inputs
    if spec is None:
        return [inspect.Parameter("targets", positional, annotation=TargetsArg)]
    if isinstance(spec, Pair):
        return [inspect.Parameter(name, positional, annotation=Annotated[str, typer.Argument(
            help=text, callback=inputs_given, parser=location)]) for name, text in (("a", spec.a), ("b", spec.b))]
    arg = typer.Argument(help=spec.help, callback=inputs_given, parser=location)
    if spec.optional:
        return [inspect.Parameter("targets", positional, default=None, annotation=Annotated[list[str] | None, arg])]
    return [inspect.Parameter("targets", positional, annotation=Annotated[list[str], arg])]


def _chart(cmd: Command) -> inspect.Parameter:
    chart = typer.Option("--chart", help=cmd.chart.help, callback=output_given)  # type: ignore[union-attr]
    return inspect.Parameter("chart", inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[Path | None, chart])


def _funnel_parameters(cmd: Command, fields: set[str], limit: inspect.Parameter | None
                       ) -> tuple[list[inspect.Parameter], list[inspect.Parameter]]:
    """The shared parameters before the options' fields (the inputs; a saving command's ``-o``)
    and after them; ``limit``: the parameter of a field declared with
    :data:`~trace_report.declare.LIMIT`, in ``--limit``'s place."""
    kw = inspect.Parameter.KEYWORD_ONLY
    first = _inputs(cmd)
    if cmd.save is not None:
        out = typer.Option("--output", "-o", callback=output_given, help=cmd.save.help)
        first.append(inspect.Parameter("output", kw, annotation=Annotated[Path, out]))
        return first, [inspect.Parameter("run", kw, default=None, annotation=RunOpt)]
    after = []
    if cmd.chart is not None and cmd.chart.after is None:
        after.append(_chart(cmd))
    if cmd.full_names:
        after.append(inspect.Parameter("full_names", kw, default=False, annotation=FullNamesOpt))
    after += [inspect.Parameter("fmt", kw, default=None, annotation=FormatOpt),
              inspect.Parameter("raw", kw, default=False, annotation=RawOpt)]
    if limit is not None:
        after.append(limit)
    elif cmd.limit and "limit" not in fields:
        after.append(inspect.Parameter("limit", kw, default=None, annotation=LimitOpt))
    after.append(inspect.Parameter("output", kw, default=None, annotation=OutputOpt))
    if cmd.ray is not None:
        after += [inspect.Parameter("engine", kw, default=EngineName.local, annotation=EngineOpt),
                  inspect.Parameter("ray_address", kw, default=None, annotation=RayAddressOpt)]
    if isinstance(cmd.inputs, Pair):
        return first, after + [inspect.Parameter("run_a", kw, default=None, annotation=RunAOpt),
                               inspect.Parameter("run_b", kw, default=None, annotation=RunBOpt),
                               inspect.Parameter("merge_runs", kw, default=False, annotation=MergeRunsOpt)]
    after += [inspect.Parameter("merge_runs", kw, default=False, annotation=MergeRunsOpt),
              inspect.Parameter("run", kw, default=None, annotation=RunOpt)]
    return first, after


def help_text(cmd: Command) -> str:
    """The command's help: its declared text, then its examples (click's ``\\b`` keeps their lines)."""
    if not cmd.examples:
        return cmd.help
    label = "Example:" if len(cmd.examples) == 1 else "Examples:"
    return cmd.help + "\n\n\b\n" + label + "\n" + "\n".join(f"  {e}" for e in cmd.examples)


def _option_values(cmd: Command, given: dict[str, Any]) -> Any:
    values = {}
    for f, tp, meta in option_fields(cmd.options):
        value = given[f.name]
        if meta.parse is not None and value is not None:
            value = cmd.parse(f.name, meta, value)
        elif typing.get_origin(tp) is tuple:
            value = f.default if value is None else tuple(value)
        values[f.name] = value
    return cmd.options(**values)


@contextmanager
def _opened(cmd: Command, given: dict[str, Any], options: Any) -> Iterator[tuple[TraceDB, Any]]:
    """The inputs opened (for Ray with ``--engine ray``) and the compute function to run on them."""
    if given.get("engine") is EngineName.ray:
        with ray_session(given["ray_address"]), ray_load(given["targets"]) as db:
            yield db, cmd.hook(cmd.ray)
        return
    with load(given["targets"], views=cmd.views_for(options)) as db:
        yield db, cmd.function()


def _charts(cmd: Command, db: TraceDB, options: Any, given: dict[str, Any]) -> PerRun[Any] | None:
    """Each run's chart (:attr:`Command.chart`) when ``--chart`` is given."""
    from trace_report.store.per_run import per_run

    if cmd.chart is None or cmd.chart.function is None or given.get("chart") is None:
        return None
    draw = cmd.hook(cmd.chart.function)
    return per_run(db, lambda d: draw(d, options), run=given["run"], merge=given["merge_runs"])


def _save_chart(charts: PerRun[Any], path: Path, what: str) -> None:
    """Write the first run's chart; a note when other runs had one too."""
    from trace_report.present.charts import save_chart

    drawn = [(label, chart) for label, chart in charts.results if chart is not None]
    if drawn:
        save_chart(drawn[0][1], path)
        if len(drawn) > 1:
            notes([f"--chart: the {what} of run {drawn[0][0]} only (--run LABEL for another)"])


def run_command(cmd: Command, given: dict[str, Any]) -> None:
    """The body of a declared command: ``given`` holds every parameter by name."""
    from trace_report.present.tables import OutputOptions, emit
    from trace_report.store.per_run import per_run, run_notes, stacked

    options = _option_values(cmd, given)
    if hasattr(options, "check"):
        options.check()  # before any input is read
    if isinstance(cmd.inputs, Pair):
        _run_pair(cmd, given, options)
        return
    main = cmd.hook(cmd.main)
    if main is not None:
        main(options, given)
        return
    if cmd.save is not None:
        _run_save(cmd, given, options)
        return
    full_names = given.get("full_names", False)
    out = OutputOptions(given["fmt"], None, given["output"], full_names, raw=given["raw"])
    direct = cmd.hook(cmd.direct)
    frame = direct(given["targets"], options) if direct is not None else None
    if frame is not None:
        emit(frame, out, title=cmd.title_for(options))
        return
    with _opened(cmd, given, options) as (db, analysis):
        per = per_run(db, lambda d: analysis(d, options), run=given["run"], merge=given["merge_runs"])
        charts = _charts(cmd, db, options, given)
    for message in per.warnings:
        warn(message)
    notes(run_notes(per, lambda r: r.notes))
    if charts is not None:
        _save_chart(charts, given["chart"], cmd.chart.what)  # type: ignore[union-attr]
    write = cmd.hook(cmd.write)
    if write is not None:
        for line in write(per, options, out):
            err.print(line, markup=False)
        return
    limit = None if "limit" in option_names(cmd.options) else given.get("limit")  # a limit field: the analysis'
    frame = stacked(per, lambda r: r.frame, limit)
    display = cmd.display_function()
    frame = frame if display is None else display(frame, out.resolve(), full_names)
    emit(frame, out, title=cmd.title_for(options))


def _run_pair(cmd: Command, given: dict[str, Any], options: Any) -> None:
    """A command over two inputs (:class:`~trace_report.declare.Pair`): an unknown ``-o`` suffix
    is a usage error before any work; A and B opened (for Ray with ``--engine ray``), each narrowed
    to its run (``--run-a``, ``--run-b``), the compute function on them, then the command's
    :attr:`~trace_report.declare.Command.main` (else the notes and the table)."""
    from trace_report.present.tables import OutputOptions, emit
    from trace_report.store.per_run import side_run

    out = OutputOptions(given["fmt"], given.get("limit"), given["output"], given.get("full_names", False),
                        raw=given["raw"])
    out.resolve()
    merge = given["merge_runs"]
    with ExitStack() as stack:
        if given.get("engine") is EngineName.ray:
            stack.enter_context(ray_session(given["ray_address"]))
            opened, analysis = ray_load, cmd.hook(cmd.ray)
        else:
            opened, analysis = load, cmd.function()
        da = stack.enter_context(opened([given["a"]]))
        db = stack.enter_context(opened([given["b"]]))
        stack.enter_context(side_run(da, "A", given["run_a"], merge))
        stack.enter_context(side_run(db, "B", given["run_b"], merge))
        result = analysis(da, db, options)  # type: ignore[misc]
    main = cmd.hook(cmd.main)
    if main is not None:
        main(result, options, given)
        return
    notes(result.notes)
    emit(result.frame, out, title=cmd.title_for(options))


def _run_save(cmd: Command, given: dict[str, Any], options: Any) -> None:
    """A command that writes a file (:class:`~trace_report.declare.Save`): the input as one (the
    run ``--run`` names alone), the result saved while the input is open (it may read it lazily),
    then the notes and the saver's lines."""
    from trace_report.store.per_run import on_run

    analysis, save = cmd.function(), cmd.hook(cmd.save.function)  # type: ignore[union-attr]

    def cut(db: TraceDB) -> tuple[Any, list[str]]:
        result = analysis(db, options)
        return result, save(result, options, given["output"])[1]  # type: ignore[misc]

    with load(given["targets"], views=cmd.views_for(options)) as db:
        result, lines = on_run(db, cut, given["run"])
    notes(result.notes)
    for line in lines:
        err.print(line, markup=False)


def register(cmd: Command) -> None:
    """Add ``cmd`` to the Typer app (once)."""
    if any(c.name == cmd.name for c in app.registered_commands):
        return
    fields = option_fields(cmd.options)
    names = {f.name for f, _, _ in fields}
    limit = next((_parameter(f, tp, meta) for f, tp, meta in fields if meta is LIMIT), None)
    first, after = _funnel_parameters(cmd, names, limit)
    clash = names & {p.name for p in first + after} - {"limit"}
    if clash:
        raise TypeError(f"{cmd.options.__name__}: fields {sorted(clash)} are the shared options' names")
    own = []
    for f, tp, meta in fields:
        if meta.cli and meta is not LIMIT:
            own.append(_parameter(f, tp, meta))
        if cmd.chart is not None and cmd.chart.after == f.name:
            own.append(_chart(cmd))
    params = first + own + after

    def callback(**given: Any) -> None:
        for f, _, meta in fields:
            if not meta.cli:
                given[f.name] = f.default
        run_command(cmd, given)

    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = {}
    callback.__doc__ = help_text(cmd)
    callback.__name__ = f"{cmd.method}_cmd"
    app.command(cmd.name)(callback)
