"""What advise's figures are per: the windows of view ``iterations`` (``store/sql/views_iterations.sql``).

A trace's ProfilerSteps, else the iterations inferred from a label that repeats
(``Optimizer.step#<class>.step``, ``enumerate(DataLoader)#<class>.__next__``, a forward range or a
module's call), else the whole trace (its GPU span): a figure is then per step, per iteration or
per trace (:attr:`~trace_report.analyses.advise.checks.RankFacts.per`), never "per step" for a
trace that has none.
"""

from __future__ import annotations

from collections.abc import Iterable

from trace_report.analyses.advise.checks import PER_TIME, RankFacts
from trace_report.analyses.common.iterations import INFERRED


def window_notes(facts: Iterable[RankFacts]) -> list[str]:
    """One note per rank without ProfilerStep (and with GPU windows): the iterations inferred and
    from what, or that its figures are per trace."""
    notes = []
    for f in facts:
        if f.wall_us <= 0 or f.per == "step":
            continue
        if f.per == "iteration":
            notes.append(f"rank {f.rank}: no ProfilerStep; {f.windows} iterations inferred from the repeated "
                         f"{f.basis.removeprefix(INFERRED)} (view iterations): figures are per iteration")
        else:
            notes.append(f"rank {f.rank}: no ProfilerStep and no repeated Optimizer.step#, enumerate(DataLoader)#, "
                         "forward range or module call: one window (the first-to-last GPU op span), figures are "
                         "per trace")
    return notes


def time_word(facts: Iterable[RankFacts]) -> str:
    """What the ranks' "% of ..." is a share of (:data:`PER_TIME`): theirs when they agree, else
    ``step time``."""
    words = {PER_TIME[f.per] for f in facts if f.wall_us > 0}
    return words.pop() if len(words) == 1 else PER_TIME["step"]
