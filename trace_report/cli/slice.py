"""``trace-report slice PATHS --steps 3-4 -o step.json.gz``: one selection of one trace as a
Chrome trace for Perfetto, with counter tracks (queue length per stream, memory per device)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trace_report.cli.options import RankOpt, TargetsArg, err, load, notes, output_given
from trace_report.cli.registry import app
from trace_report.cli.runs import RunOpt

if TYPE_CHECKING:
    from trace_report.analyses.slice import SliceOptions
    from trace_report.store.tracedb import TraceDB


@app.command("slice")
def slice_cmd(
    targets: TargetsArg,
    output: Annotated[Path, typer.Option(
        "--output", "-o", callback=output_given,
        help="The Chrome trace to write (.json, or .json.gz for gzip).")],
    steps: Annotated[str | None, typer.Option(
        "--steps", help="ProfilerStep numbers to keep, as the tables print them: N or N-M.")] = None,
    window: Annotated[str | None, typer.Option(
        "--window", help="Keep [T0, T1): µs on the trace's clock (as ts_us); T0: or :T1 leave a side open. "
                         "With --steps: the part of those steps inside it.")] = None,
    rank: RankOpt = None,
    source: Annotated[bool, typer.Option(
        "--source/--no-source",
        help="Read the original trace file again for what the database does not keep (process and thread "
             "names, flow events); --no-source builds the slice from the database alone.")] = True,
    counters: Annotated[bool, typer.Option(
        "--counters/--no-counters",
        help="Add counter tracks: launch queue length per stream, memory per device.")] = True,
    run: RunOpt = None,
) -> None:
    """Cut ProfilerSteps (or a time window) of one trace into a Chrome trace that Perfetto and
    chrome://tracing open: every event overlapping the selection, the launch calls and GPU
    operations linked to them (correlation), process/thread names and flow events, and counter
    tracks of the launch queue length per stream and the allocated/reserved memory per device.
    Re-ingesting the slice gives its steps the numbers the whole trace gives them. For a trace
    too big to open in Perfetto; on a database, after `trace-report ingest`.

    \b
    Examples:
      trace-report slice traces/run-42 --steps 3-4 -o step.json.gz
      trace-report slice runs.duckdb --rank 1 --steps 12 -o rank1-step12.json.gz
    """
    from trace_report.analyses.slice import SliceOptions, parse_steps, parse_window

    opts = SliceOptions(steps=parse_steps(steps) if steps is not None else None,
                        window=parse_window(window) if window is not None else None,
                        rank=rank, source=source, counters=counters)
    if opts.steps is None and opts.window is None:
        from trace_report.errors import UsageError

        raise UsageError("choose what to keep: --steps N or N-M (ProfilerStep numbers) and/or --window T0:T1")
    with load(targets) as db:
        if run is not None:
            with db.scope(db.run(run).trace_ids) as part:
                _write(part, opts, output)
        else:
            _write(db, opts, output)


def _write(db: TraceDB, opts: SliceOptions, output: Path) -> None:
    from trace_report.analyses.slice import slice_trace
    from trace_report.present.slice import write_chrome_trace

    result = slice_trace(db, opts)
    n = write_chrome_trace(output, result.metadata, result.events)
    notes(result.notes)
    plan, c = result.plan, result.counts
    what = f"steps {_steps_text(plan.steps)}, " if plan.steps else ""
    err.print(f"wrote {output}: {n:,} events of rank {plan.rank} ({what}[{plan.t0:.3f}, {plan.t1:.3f}) µs): "
              f"{c.get('rows', 0):,} complete/memory, {c.get('flows', 0):,} flow, "
              f"{c.get('metadata_events', 0):,} metadata, {c.get('other_events', 0):,} other, "
              f"{c.get('counters', 0):,} counter", markup=False)


def _steps_text(steps: tuple[int, ...]) -> str:
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
