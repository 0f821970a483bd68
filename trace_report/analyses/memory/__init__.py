"""Memory: allocated and reserved bytes per device over time, and their peak per ProfilerStep.

``trace-report memory``, from the caching allocator's ``[memory]`` events (:mod:`.compute`).

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method and
docs/cli.md are made from it (:mod:`trace_report.declare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import RANK, Chart, Command, Opt, computed


@dataclass(frozen=True)
class MemoryOptions:
    """``rank``: only that rank; ``device``: only that device (``cuda:0``, ``cpu``); ``timeline``:
    every ``[memory]`` event instead of the peaks."""

    rank: Annotated[int | None, RANK] = None
    device: Annotated[str | None, Opt("Only this device (cuda:0, cpu).", ("--device",))] = None
    timeline: Annotated[bool, Opt("One row per [memory] event instead of peaks.", ("--timeline",))] = False


COMMAND = Command(
    name="memory",
    options=MemoryOptions,
    compute="compute:memory",
    title="Memory peaks",
    help="Peak allocated and reserved bytes per device and ProfilerStep, from the allocator's\n"
         "[memory] events (profile_memory=True); --timeline lists every event, --chart draws them.",
    examples=("trace-report memory trace.json.gz --chart memory.html",),
    chart=Chart("trace_report.present.charts.memory:timeline_chart",
                "Also write the timeline chart (.html, .png or .svg).", "timeline"),
    titles=(("timeline", "Memory timeline"),),
)

__getattr__ = computed(__name__, ("NO_MEMORY_NOTE", "PEAK_COLUMNS", "TIMELINE_COLUMNS", "device_names", "memory",
                                  "memory_peaks", "memory_timeline"))
