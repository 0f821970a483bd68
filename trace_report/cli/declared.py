"""Commands made from the analyses' declarations (:mod:`trace_report.declare`).

:func:`register` turns a :class:`~trace_report.declare.Command` into a Typer command: the
inputs argument, one option per field of its options dataclass (help, unit, bounds and default
from the field), and the shared options of every table command (``--format``, ``--limit``,
``-o``, ``--merge-runs``, ``--run``, and ``--full-names`` where its rows hold kernel names). Its
body is the one funnel: open the inputs (:func:`~trace_report.cli.options.load`), the analysis
on each run (:func:`~trace_report.store.per_run.tabulate`), the notes, then the table
(:func:`~trace_report.present.tables.emit`).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Annotated, Any

from trace_report.cli.options import (
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    MergeRunsOpt,
    OutputOpt,
    RawOpt,
    RunOpt,
    TargetsArg,
    load,
    notes,
    typer_option,
    warn,
)
from trace_report.cli.registry import app
from trace_report.declare import Command, Opt, option_fields

FUNNEL = ("targets", "full_names", "fmt", "limit", "output", "raw", "merge_runs", "run")
"""The parameters every declared command has beside its options' fields."""


def _flags(name: str, meta: Opt) -> tuple[str, ...]:
    return meta.flags or (f"--{name.replace('_', '-')}",)


def _cli_type(tp: Any) -> tuple[Any, bool]:
    """The type Typer parses for a field of type ``tp``, and whether it is a tuple field (given as
    a repeatable option, a list)."""
    if typing.get_origin(tp) is tuple:
        return list[typing.get_args(tp)[0]] | None, True  # type: ignore[misc,valid-type]
    return tp, False


def _parameter(f: dataclasses.Field[Any], tp: Any, meta: Opt) -> inspect.Parameter:
    cli_tp, is_tuple = _cli_type(tp)
    option = typer_option(dataclasses.replace(meta, flags=_flags(f.name, meta)))
    default = None if is_tuple else f.default
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[cli_tp, option])


def _funnel_parameters(cmd: Command, fields: set[str]) -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("targets", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=TargetsArg)]
    if cmd.full_names:
        params.append(inspect.Parameter("full_names", kw, default=False, annotation=FullNamesOpt))
    params.append(inspect.Parameter("fmt", kw, default=None, annotation=FormatOpt))
    if "limit" not in fields:
        params.append(inspect.Parameter("limit", kw, default=None, annotation=LimitOpt))
    params += [inspect.Parameter("output", kw, default=None, annotation=OutputOpt),
               inspect.Parameter("raw", kw, default=False, annotation=RawOpt),
               inspect.Parameter("merge_runs", kw, default=False, annotation=MergeRunsOpt),
               inspect.Parameter("run", kw, default=None, annotation=RunOpt)]
    return params


def help_text(cmd: Command) -> str:
    """The command's help: its declared text, then its examples (click's ``\\b`` keeps their lines)."""
    if not cmd.examples:
        return cmd.help
    label = "Example:" if len(cmd.examples) == 1 else "Examples:"
    return cmd.help + "\n\n\b\n" + label + "\n" + "\n".join(f"  {e}" for e in cmd.examples)


def _option_values(cmd: Command, given: dict[str, Any]) -> Any:
    values = {}
    for f, tp, _ in option_fields(cmd.options):
        value = given[f.name]
        if typing.get_origin(tp) is tuple:
            value = f.default if value is None else tuple(value)
        values[f.name] = value
    return cmd.options(**values)


def run_command(cmd: Command, given: dict[str, Any]) -> None:
    """The body of a declared command: ``given`` holds every parameter by name."""
    from trace_report.present.tables import OutputOptions, emit
    from trace_report.store.per_run import tabulate

    options = _option_values(cmd, given)
    if hasattr(options, "check"):
        options.check()  # before any input is read
    analysis = cmd.function()
    limit = given.get("limit")  # the funnel's --limit, or the options' own limit field
    targets: list[Path] = given["targets"]
    with load(targets, views=cmd.views) as db:
        table = tabulate(db, lambda d: analysis(d, options), run=given["run"], merge=given["merge_runs"],
                         limit=limit)
    for message in table.warnings:
        warn(message)
    notes(table.notes)
    full_names = given.get("full_names", False)
    out = OutputOptions(given["fmt"], None, given["output"], full_names, raw=given["raw"])
    display = cmd.display_function()
    frame = table.frame if display is None else display(table.frame, out.resolve(), full_names)
    emit(frame, out, title=cmd.title)


def register(cmd: Command) -> None:
    """Add ``cmd`` to the Typer app (once)."""
    if any(c.name == cmd.name for c in app.registered_commands):
        return
    fields = option_fields(cmd.options)
    names = {f.name for f, _, _ in fields}
    clash = names & set(FUNNEL) - {"limit"}
    if clash:
        raise TypeError(f"{cmd.options.__name__}: fields {sorted(clash)} are the shared options' names")
    funnel = _funnel_parameters(cmd, names)
    params = funnel[:1] + [_parameter(f, tp, meta) for f, tp, meta in fields if meta.cli] + funnel[1:]

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
