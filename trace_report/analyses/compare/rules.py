"""The rules of ``compare --fail-if`` (``METRIC OP CHANGE``): their grammar and parser, what the
options check before any input is read; their meaning and verdicts are in
:mod:`~trace_report.analyses.compare.gate`. Light (no pandas): the command line parses the rules
before it opens an input."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trace_report.analyses.common.regions import REGIONS
from trace_report.errors import UsageError

GRAMMAR = ("METRIC OP CHANGE: METRIC is step_time, gpu_time, kernel:GLOB or region:NAME "
           f"({', '.join(REGIONS)}); OP is > or <; CHANGE is a relative +5% or -3%, or an absolute "
           "+2ms or +500us (B - A)")
"""The rule grammar, as the usage error and ``--help`` state it."""

UNITS_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_RULE = re.compile(r"^(?P<metric>.+)(?P<op>[<>])\s*(?P<value>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>%|us|µs|ms|s)$")
METRICS = ("step_time", "gpu_time", "kernel", "region")


@dataclass(frozen=True)
class Rule:
    """One ``--fail-if`` rule: ``metric`` (one of :data:`METRICS`), ``target`` (the kernel name
    pattern or region; ``''`` for step and GPU time), ``op`` (``>`` or ``<``), ``limit`` (percent
    when ``relative``, else µs) and the ``text`` as given."""

    text: str
    metric: str
    target: str
    op: str
    limit: float
    relative: bool


def parse_rule(text: str) -> Rule:
    """The :class:`Rule` of ``text`` (``'kernel:*gemm*>+10%'``; blanks around OP are allowed).

    Raises :class:`UsageError` naming the rule and stating :data:`GRAMMAR` when it does not parse,
    for an unknown metric, an empty pattern or an unknown region."""
    m = _RULE.match(text.strip())
    if m is None:
        raise UsageError(f"--fail-if {text!r}: not a rule ({GRAMMAR})")
    metric, _, target = m["metric"].strip().partition(":")
    if metric not in METRICS or (metric in ("kernel", "region")) != bool(target.strip()) or (
            metric == "region" and target.strip() not in REGIONS):
        raise UsageError(f"--fail-if {text!r}: unknown metric {m['metric'].strip()!r} ({GRAMMAR})")
    relative = m["unit"] == "%"
    limit = float(m["value"]) * (1.0 if relative else UNITS_US[m["unit"]])
    return Rule(text.strip(), metric, target.strip(), m["op"], limit, relative)
