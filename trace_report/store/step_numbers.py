"""ProfilerStep numbers: the rule of view ``steps`` (``store/sql/views.sql``, the one place the SQL
reads them) said in Python, for the ingest's warning about the step events it leaves out.

torch.profiler names each step's annotation ``ProfilerStep#N`` (``torch/profiler/profiler.py``,
``record_function("ProfilerStep#" + str(self.step_num))``): N counts the steps from 0. A name whose
N is no number from 0 to :data:`STEP_MAX` (``ProfilerStep#-5``, ``#abc``, 20 digits) is no step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa

from trace_report import arrowcalls as ac

STEP_MAX = 2**31 - 1
"""The largest ProfilerStep number read (a non-negative 32-bit integer)."""
STEP_PREFIX = "ProfilerStep#"
STEP_CATS = ("user_annotation", "cpu_op")
"""The categories of the step events (``cat``)."""
_NUMBER = re.compile(r"ProfilerStep#(\d+)")


def step_number(name: str) -> int | None:
    """The step number in ``name`` as view ``steps`` reads it (the first digits after
    ``ProfilerStep#``), None when there is none or it is above :data:`STEP_MAX`."""
    m = _NUMBER.search(name)
    if m is None or len(m.group(1).lstrip("0")) > len(str(STEP_MAX)):
        return None
    n = int(m.group(1))
    return n if n <= STEP_MAX else None


def unread_steps(tables: Iterable[pa.Table]) -> tuple[int, str | None]:
    """How many step events (``cat``, ``name`` columns: :data:`STEP_CATS`, names starting with
    :data:`STEP_PREFIX`) of ``tables`` have no step number, and the first such name."""
    count, example = 0, None
    for table in tables:
        mask = ac.and_(ac.starts_with(table.column("name"), STEP_PREFIX),
                       ac.is_in(table.column("cat"), pa.array(STEP_CATS)))
        for name in ac.filter(table.column("name"), mask).to_pylist():
            if name is not None and step_number(name) is None:
                count += 1
                example = example or name
    return count, example
