"""The computation of ``launches`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

import pandas as pd

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.launches import PER_LAUNCH_COLUMNS, PER_NAME_COLUMNS, LaunchOptions
from trace_report.errors import UsageError
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text


def _params(opts: LaunchOptions) -> dict[str, object]:
    return {"rank": opts.rank, "steps_only": opts.steps_only, "hta_rounding": opts.hta_rounding,
            "all_launches": opts.all_launches, "runtime_cutoff_us": float(opts.runtime_cutoff_us),
            "launch_delay_cutoff_us": float(opts.launch_delay_cutoff_us)}


def launch_query(per_launch: bool) -> str:
    """The SQL of the per-launch rows (ordered by rank, trace and launch start) or of the per-name
    statistics (``launch_stats.sql`` over them); parameters as :func:`_params`."""
    rows = sql_text("launches.sql", __package__)
    if per_launch:
        return f"{rows}\nORDER BY rank, trace_id, launch_ts_us, event_id"
    return f"WITH launches AS (\n{rows}\n)\n{sql_text('launch_stats.sql', __package__)}"


def _check(opts: LaunchOptions) -> None:
    cutoffs = (("runtime cutoff", opts.runtime_cutoff_us), ("launch delay cutoff", opts.launch_delay_cutoff_us))
    for label, value in cutoffs:
        if not value >= 0:
            raise UsageError(f"{label} must be 0 µs or more (got {value})")


def _counts(db: TraceDB, opts: LaunchOptions) -> dict[str, int]:
    """Launches of the rank(s): ``hta_steps`` (HTA's calls, its step selection), ``hta_all`` (HTA's
    calls, every step), ``any_steps`` and ``any_all`` (every launch call), in one pass."""
    row = db.con.execute(
        "SELECT count(*) FILTER (WHERE hta_launch AND in_steps), count(*) FILTER (WHERE hta_launch), "
        f"count(*) FILTER (WHERE in_steps), count(*) FROM ({sql_text('launches.sql', __package__)})",
        {**_params(opts), "steps_only": False, "all_launches": True}).fetchone()
    return dict(zip(("hta_steps", "hta_all", "any_steps", "any_all"), row or (0, 0, 0, 0), strict=True))


def selection_notes(db: TraceDB, opts: LaunchOptions) -> list[str]:
    """What HTA's step selection and its list of launch calls left out, in words (empty when
    nothing was or the options keep it)."""
    n = _counts(db, opts)
    notes = []
    launcher = "any" if opts.all_launches else "hta"
    kept, every = n[f"{launcher}_steps"], n[f"{launcher}_all"]
    if opts.steps_only and kept != every:
        notes.append(f"HTA's selection: {kept} of {every} launches, those whose launch call starts before the "
                     "last ProfilerStep when there are two or more (--all-steps keeps every one)")
    scope = "steps" if opts.steps_only else "all"
    counted, total = n[f"hta_{scope}"], n[f"any_{scope}"]
    if not opts.all_launches and counted != total:
        hta = ", ".join(n for (n,) in db.con.execute(  # the CUDA ones (MTIA's runFunction left unsaid)
            "SELECT name FROM launch_calls WHERE hta_stats AND name LIKE 'cuda%'").fetchall())
        notes.append(f"{total - counted} of {total} launches are by calls HTA does not count (cuLaunchKernel, "
                     f"cuLaunchKernelEx, hip*; HTA counts {hta}): left out, --all-launches counts them")
    return notes


def launches(db: TraceDB, options: LaunchOptions | None = None) -> Result:
    """Kernel launch statistics. Per name (default): ``rank``, ``cat``, ``name``, ``launches``, mean /
    p50 / p95 / max of ``launch_us``, ``gpu_dur_us`` and ``delay_us`` (columns :data:`STAT_COLUMNS`,
    µs), ``runtime_outliers``, ``delay_outliers``, ``short_kernels`` (counts), most launches first.
    Per launch (``per_launch``): :data:`PER_LAUNCH_COLUMNS` (µs; the outlier flags as booleans), in
    launch order. ``trace_id`` too when several traces share a rank.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank`` or a negative cutoff.
    """
    opts = options or LaunchOptions()
    db.check_rank(opts.rank)
    _check(opts)
    columns = PER_LAUNCH_COLUMNS if opts.per_launch else PER_NAME_COLUMNS
    frame = db.con.execute(launch_query(opts.per_launch), _params(opts)).df()
    frame = drop_single_trace_ids(frame[[*columns, "trace_id"]].astype({"rank": "int64"}))
    notes = selection_notes(db, opts)
    if frame.empty:
        notes.append("no GPU operations launched by a launch call (cudaLaunchKernel, cudaMemcpyAsync, ...) "
                     "in the selection")
    return Result(frame.reset_index(drop=True), notes)


def launch_rows(db: TraceDB, options: LaunchOptions | None = None) -> pd.DataFrame:
    """The per-launch rows of :func:`launches` with ``trace_id``, ``event_id`` (the GPU operation)
    and ``stream`` always kept: for joining with other queries."""
    opts = options or LaunchOptions()
    db.check_rank(opts.rank)
    _check(opts)
    return db.con.execute(launch_query(True), _params(opts)).df()
