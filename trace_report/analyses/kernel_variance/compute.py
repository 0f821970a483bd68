"""The computation of ``kernel-variance`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

from importlib import resources

from trace_report.analyses.common.result import Result
from trace_report.analyses.kernel_variance import KernelVarianceOptions
from trace_report.store.tracedb import TraceDB

COLUMNS = ["rank", "name", "calls", "total_us", "mean_us", "std_us", "cv", "p50_us", "p95_us", "max_us",
           "pct_of_gpu_time", "variable"]


def query() -> str:
    """The SQL of the rows (``kernel_variance.sql`` beside this module)."""
    return resources.files(__package__).joinpath("kernel_variance.sql").read_text(encoding="utf-8")


def kernel_variance(db: TraceDB, options: KernelVarianceOptions | None = None) -> Result:
    """Kernel duration variance per kernel name (``rank`` and name with ``by_rank``).

    Columns: ``rank`` (only with ``by_rank``), ``name``, ``calls``, ``total_us``, ``mean_us``,
    ``std_us`` (sample standard deviation), ``cv`` (std / mean), ``p50_us``, ``p95_us``,
    ``max_us`` (µs), ``pct_of_gpu_time`` (% of kernels + memcpy + memset time), ``variable``
    (bool: TraceLens' rule, ``cv`` > ``cv_threshold`` with ``calls`` >= ``min_calls``); most
    time first. Notes: the share of GPU time in variable kernels. Raises
    :class:`~trace_report.errors.UsageError` for an unknown ``rank``.
    """
    opts = options or KernelVarianceOptions()
    db.check_rank(opts.rank)
    params = {"rank": opts.rank, "by_rank": opts.by_rank, "min_calls": opts.min_calls,
              "cv_threshold": float(opts.cv_threshold)}
    frame = db.con.execute(query(), params).df()
    if not opts.by_rank:
        frame = frame.drop(columns=["rank"])
    notes = []
    if frame.empty:
        notes.append("no GPU kernels in the selection")
    else:
        variable = frame[frame["variable"]]
        share = float(variable["pct_of_gpu_time"].sum())
        rule = f"cv > {opts.cv_threshold:g} with at least {opts.min_calls} calls"
        if opts.by_rank:
            share = share / frame["rank"].nunique()
        notes.append(f"{len(variable)} of {len(frame)} kernel names are variable ({rule}, TraceLens' rule): "
                     f"{share:.1f}% of GPU time" + (" (mean over ranks)" if opts.by_rank else ""))
    return Result(frame.reset_index(drop=True), notes)
