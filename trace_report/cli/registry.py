"""The ``trace-report`` Typer application that every command module registers itself on
(``@app.command(...)``); :mod:`trace_report.cli.app` imports each command module by name."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="trace-report",
    help="Capture and analyze PyTorch Profiler traces: top kernels, SQL, regions, rooflines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
