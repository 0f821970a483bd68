"""Each analysis command is declared once: the notebook method of every command takes every
option the command line does, with the same default, and gives the rows the command prints."""

from __future__ import annotations

import inspect
import json

import click
import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr
from trace_report.api import TraceDB
from trace_report.cli.declared import FUNNEL
from trace_report.declare import Pair, commands, option_fields

SHARED_OPTIONS = set(FUNNEL)
"""The command line's options that are not the analysis' (inputs, output, engine, runs)."""
NOTEBOOK_ONLY = {"self", "limit", "merge_runs", "run"}
DDP = "hta_a100_ddp_nccl"  # one rank of a DDP run: ProfilerSteps, TF32 and NCCL kernels


def _cli_options() -> dict[str, click.Command]:
    from trace_report.cli.app import app

    group = typer_group(app)
    return {name: group.commands[name] for name in group.commands}


def typer_group(app: object) -> click.Group:
    import typer.main

    return typer.main.get_group(app)  # type: ignore[arg-type]


def test_every_command_with_a_method_takes_the_same_options() -> None:
    """For each analysis command: every option of the command line is a keyword of its
    ``TraceDB`` method, with the same default."""
    methods = {cmd.name: cmd.method for cmd in commands().values()}
    checked = []
    for name, command in _cli_options().items():
        if name not in methods:
            continue
        keywords = inspect.signature(getattr(TraceDB, methods[name])).parameters
        for param in command.params:
            if param.name in SHARED_OPTIONS or param.name is None:
                continue
            assert param.name in keywords, f"{name}: the notebook method lacks {param.name}"
            if not param.multiple:  # a repeatable option's default is None on the command line: the field's
                default = keywords[param.name].default
                assert param.default == default, f"{name} {param.name}: {param.default!r} != {default!r}"
        checked.append(name)
    assert {"top-kernels", "flags", "breakdown", "memory", "critical-path", "advise", "kernel-variance"} <= set(checked)


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_method_keywords_are_the_options_fields(name: str) -> None:
    """The declared method's keywords are the options' fields (the command line's, and those the
    notebook alone sets), with the fields' defaults; a command that saves a file takes its path first."""
    cmd = commands()[name]
    params = inspect.signature(getattr(TraceDB, cmd.method)).parameters
    fields = {f.name: f.default for f, _, _ in option_fields(cmd.options)}
    saves = {"output"} if cmd.save is not None else set()
    assert list(params)[1:2] == list(saves) or not saves
    if isinstance(cmd.inputs, Pair):  # B first, and the run of each side
        assert list(params)[1] == "other" and {"run_a", "run_b"} <= set(params) and "run" not in params
        saves = {"other", "run_a", "run_b"}
    assert set(params) - NOTEBOOK_ONLY - saves == set(fields) - {"limit"}
    assert all(params[k].default == v for k, v in fields.items())


def _cli_rows(*args: str) -> list[dict]:
    done = invoke([*args, "-f", "json"])
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def ddp():
    shared_or_skip()
    with tr.open(TRACES / DDP) as db:
        yield db


def test_options_the_methods_lacked_give_what_the_command_prints(ddp: TraceDB) -> None:
    """``flags(classes=...)``, ``breakdown(stragglers=True)``, ``advise(all_findings=True)`` and
    ``critical_path(operators=True)``: the rows of the command with the same options."""
    path = str(TRACES / DDP)
    flagged = ddp.flags(classes=("tf32",))
    want = _cli_rows("flags", path, "--class", "tf32")
    assert flagged["name"].tolist() == [r["name"] for r in want] and len(want) > 0
    assert all("tf32" in classes for classes in flagged["classes"])
    summary = ddp.flags(summary=True)
    assert summary["class"].tolist() == [r["class"] for r in _cli_rows("flags", path, "--summary")]
    per_rank = ddp.breakdown(stragglers=True)
    assert list(per_rank.columns) == list(_cli_rows("breakdown", path, "--stragglers")[0]) and len(per_rank) > 0
    findings = ddp.advise(all_findings=True)
    assert findings["finding"].tolist() == [r["finding"] for r in _cli_rows("advise", path, "--all")]
    assert len(findings) >= len(ddp.advise())


def test_roofline_method_is_the_command_and_reads_si_text(ddp: TraceDB) -> None:
    """``roofline`` is declared with an input-less mode and SI-suffixed peaks: its method gives the
    command's rows, and reads ``peak_flops="19.5T"`` as the command line does (one roof, 19.5e12
    FLOP/s, for every row)."""
    path = str(TRACES / DDP)
    frame = ddp.roofline(by_name=True)
    want = _cli_rows("roofline", path, "--by-name", "-n", "100000")
    assert frame["kernel"].tolist() == [r["kernel"] for r in want] and len(want) > 0
    roofs = ddp.roofline(by_name=True, peak_flops="19.5T")["roof_flop_per_s"]
    assert roofs.tolist() == pytest.approx([19.5e12] * len(roofs))
    assert roofs.tolist() == [r["roof_flop_per_s"] for r in _cli_rows("roofline", path, "--by-name", "--peak-flops",
                                                                        "19.5T", "-n", "100000")]
