"""``trace-report slice``: ProfilerSteps or a time window of one trace as a Chrome trace.

A trace that Perfetto or chrome://tracing opens, with counter tracks of what our tables say.

What is kept (``analyses/slice/slice_kept.sql``, stated in full there): every event of the trace that
overlaps the window, and every GPU operation or runtime call that shares a ``correlation`` with
one of them (kernels launched in the window and still running after it, the launch calls of
operations that run in it), so every kept kernel keeps its launch and re-ingesting the slice gives
the kept steps the numbers the full trace gives them (``tests/analyses/slice/test_slice.py``). The
window is the span of the selected ``ProfilerStep#N`` (view ``steps``; their numbers as every
table prints them) and/or ``[t0, t1)`` in µs on the trace's own clock (the ``ts_us`` of every
table and view); with both, their intersection.

Where the events come from. The complete events and ``[memory]`` instants are the database's
rows (``events``: the numbers every analysis reads, secrets already redacted, kernel names
demangled). The database keeps nothing else of a trace, so the rest (process and thread names:
``ph: M``; flow events ``s``/``t``/``f`` with their ids; other instants and counters in the
window) is read again from the original file (``traces.path``) in one streaming pass
(:class:`~trace_report.formats.kineto.PieceStream`: a piece at a time, never the whole file),
when the file is still there with the size and SHA-256 it was ingested with, and screened for
secrets as the ingest screens (:mod:`trace_report.redact`). A flow is kept when all of its
events (same ``cat``, ``name``, ``id``) bind to kept events: each lies inside a kept complete
event of its pid and tid (Kineto binds ``s`` to the launch call and ``f``, ``bp: "e"``, to the
kernel). Without the file, flows from each kept launch call to its GPU operation are made from the
rows (``cat: ac2g``, ``id`` = the correlation, as Kineto writes them) and the note says what is
missing. Counter tracks (``ph: C``): the launch queue length per stream (``slice_queue.sql``, the
series of ``trace-report queue``) and the allocated/reserved bytes per device
(``slice_memory.sql``, view ``memory_events``), both computed over the whole trace, so they start
at the level in force at the window's start. A re-ingest reads none of them (only complete events
and ``[memory]`` instants are ingested).

Spec: Trace Event Format (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).

The declaration below is the command's only one: the CLI command, the ``TraceDB`` method and
docs/cli.md are made from it (:mod:`trace_report.declare`); the computation is :mod:`.compute`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from trace_report.declare import RANK, Command, Opt, Save, computed
from trace_report.errors import UsageError

NOTHING_CHOSEN = "choose what to keep: --steps N or N-M (ProfilerStep numbers) and/or --window T0:T1"


@dataclass(frozen=True)
class SliceOptions:
    """``steps``: the ProfilerStep numbers ``(first, last)``, inclusive (N alone: ``(N, N)``);
    ``window``: ``(t0, t1)`` in µs on the trace's clock, either None for open; at least one of
    them. ``rank``: the trace of that rank (needed when the input holds several traces).
    ``source``: read the original file again for what the database does not keep (flows,
    metadata events); ``counters``: add the queue-length and memory counter tracks."""

    steps: Annotated[tuple[int, int] | None, Opt(
        "ProfilerStep numbers to keep, as the tables print them: N or N-M.", ("--steps",),
        parse="compute:parse_steps")] = None
    window: Annotated[tuple[float | None, float | None] | None, Opt(
        "Keep [T0, T1): µs on the trace's clock (as ts_us); T0: or :T1 leave a side open. With --steps: the part "
        "of those steps inside it.", ("--window",), parse="compute:parse_window")] = None
    rank: Annotated[int | None, RANK] = None
    source: Annotated[bool, Opt(
        "Read the original trace file again for what the database does not keep (process and thread names, flow "
        "events); --no-source builds the slice from the database alone.", ("--source/--no-source",))] = True
    counters: Annotated[bool, Opt("Add counter tracks: launch queue length per stream, memory per device.",
                                  ("--counters/--no-counters",))] = True

    def __post_init__(self) -> None:
        if isinstance(self.steps, int) and not isinstance(self.steps, bool):  # one step: N
            object.__setattr__(self, "steps", (self.steps, self.steps))

    def check(self) -> None:
        """Raise :class:`UsageError` when neither ``steps`` nor ``window`` is given (before any input is read)."""
        if self.steps is None and self.window is None:
            raise UsageError(NOTHING_CHOSEN)


COMMAND = Command(
    name="slice",
    options=SliceOptions,
    compute="compute:slice_trace",
    title="Slice",
    help="Cut ProfilerSteps (or a time window) of one trace into a Chrome trace that Perfetto and "
         "chrome://tracing open: every event overlapping the selection, the launch calls and GPU operations "
         "linked to them (correlation), process/thread names and flow events, and counter tracks of the launch "
         "queue length per stream and the allocated/reserved memory per device. Re-ingesting the slice gives its "
         "steps the numbers the whole trace gives them. For a trace too big to open in Perfetto; on a database, "
         "after `trace-report ingest`.",
    examples=("trace-report slice traces/run-42 --steps 3-4 -o step.json.gz",
              "trace-report slice runs.duckdb --rank 1 --steps 12 -o rank1-step12.json.gz"),
    save=Save("trace_report.present.slice:save_slice", "The Chrome trace to write (.json, or .json.gz for gzip)."),
)

__getattr__ = computed(__name__, (
    "FETCH_ROWS", "GPU_AND_RUNTIME", "GPU_OPS", "MEMORY_EVENT", "QUEUE_PAGE", "SlicePlan", "SliceResult",
    "parse_steps", "parse_window", "plan_slice", "queue_series", "slice_trace", "_flow_index", "_gaps"))
