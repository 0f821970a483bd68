"""``trace-report top-kernels PATHS``: GPU kernels, memcpy and memset ranked by total time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trace_report.cli.options import (
    ByRankOpt,
    EngineName,
    EngineOpt,
    FormatOpt,
    FullNamesOpt,
    OutputOpt,
    RankOpt,
    RawOpt,
    RayAddressOpt,
    TargetsArg,
    load,
    notes,
    ray_load,
    ray_session,
)
from trace_report.cli.registry import app
from trace_report.cli.runs import MergeRunsOpt, RunOpt, per_run, report, run_notes, stacked
from trace_report.storage import is_url

VIEWS: tuple[str, ...] | None = ("gpu_ops",)
"""The analysis views top-kernels reads (``top_kernels.sql``; the CPU fallback reads ``events``):
a database gets these alone, with the views they read (:func:`trace_report.cli.options.load`);
None: every view."""
STEPS_ONLY_VIEWS = ("steps_only_gpu_ops", "steps")
"""And with ``--steps-only``: ``top_kernels.sql`` over ``steps_only_gpu_ops``, ``steps`` for its check."""


@app.command("top-kernels")
def top_kernels_cmd(
    targets: TargetsArg,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Rows (per rank with --by-rank).")] = 20,
    rank: RankOpt = None,
    by_rank: ByRankOpt = False,
    steps_only: Annotated[bool, typer.Option(
        "--steps-only", help="Only GPU operations launched before the last ProfilerStep starts (HTA's rule: it "
                             "drops the last step and operations without a launch).")] = False,
    kernels_only: Annotated[bool, typer.Option(
        "--kernels-only", help="Hide the memcpy/memset rows (a note gives their names, time and share of GPU "
                               "time); pct_of_gpu_time stays of all GPU time.")] = False,
    full_names: FullNamesOpt = False,
    fmt: FormatOpt = None,
    raw: RawOpt = False,
    output: OutputOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    merge_runs: MergeRunsOpt = False,
    run: RunOpt = None,
) -> None:
    """Rank GPU kernels, memcpy and memset by total time (CPU operators by self time on traces
    without any GPU operation).

    Also reads an `nsys stats -r cuda_gpu_kern_sum --format csv` file directly.
    kind is kernel, memcpy or memset (cpu_op for CPU operators); pct_of_gpu_time is of all GPU
    time (kernels + memcpy + memset), as in flags and HTA, so the rows sum to 100 without a limit.
    --kernels-only hides the memcpy/memset rows. With --engine ray each trace is aggregated by a
    Ray task and the partial sums merged here (same rows).

    \b
    Examples:
      trace-report top-kernels traces/run-42 --by-rank -f json
      trace-report top-kernels trace.json --kernels-only
      trace-report top-kernels runs.duckdb --engine ray --ray-address auto
    """
    from trace_report.analyses.top_kernels import TopKernelsOptions, top_kernels
    from trace_report.inputs import InputKind, detect
    from trace_report.present.tables import OutputOptions, emit

    if len(targets) == 1 and not is_url(targets[0]) and detect(Path(targets[0])).kind is InputKind.nsys_kernsum:
        from trace_report.formats.nsys import read_kernsum_csv  # pandas: only for this input

        frame = read_kernsum_csv(targets[0]).head(limit)
        emit(frame, OutputOptions(fmt, None, output, full_names, raw=raw), title="Top kernels")
        return
    opts = TopKernelsOptions(limit=limit, rank=rank, by_rank=by_rank, steps_only=steps_only,
                             kernels_only=kernels_only)
    if engine is EngineName.ray:
        from trace_report.analyses.top_kernels.ray import top_kernels_ray

        with ray_session(ray_address), ray_load(targets) as db:
            per = per_run(db, lambda d: top_kernels_ray(d, opts), run=run, merge=merge_runs)
    else:
        views = None if VIEWS is None else (*VIEWS, *(STEPS_ONLY_VIEWS if steps_only else ()))
        with load(targets, views=views) as db:
            per = per_run(db, lambda d: top_kernels(d, opts), run=run, merge=merge_runs)
    report(per)
    notes(run_notes(per, lambda r: [r.note] if r.note else []))
    emit(stacked(per, lambda r: r.rows), OutputOptions(fmt, None, output, full_names, raw=raw), title="Top kernels")
