"""``trace-report slice``: made from its declaration (:mod:`trace_report.analyses.slice`); importing
this module registers it on the shared app, as a command module does."""

from __future__ import annotations

from trace_report import declare
from trace_report.cli.declared import register

register(declare.command("slice"))
