"""The computation of ``modules`` (its declaration: the package's ``__init__``)."""

from __future__ import annotations

from trace_report.analyses.common.result import Result, drop_single_trace_ids
from trace_report.analyses.modules import CLASS_SQL, COLUMNS, PROFILE_HINT, ModuleOptions
from trace_report.analyses.modules.tree import PATH_NAMES, module_calls
from trace_report.errors import UsageError
from trace_report.store.tracedb import TraceDB

CALLS_TABLE = "module_calls"
"""The name under which :func:`~trace_report.analyses.modules.tree.module_calls` is registered
while :func:`module_query` sums it."""


def module_query(by_step: bool, by_class: bool = False) -> str:
    """The SQL of the per-path sums over the per-call rows (:data:`CALLS_TABLE`, from
    :func:`~trace_report.analyses.modules.tree.module_calls`); parameter ``$depth`` (NULL = every
    depth). Rows in tree order: by rank, trace, step, then by the start of the path's first call
    (a module starts after the modules that hold it). With ``by_class``, per module class
    (:data:`~trace_report.analyses.modules.CLASS_SQL`) instead of per path, most GPU time first:
    ``path`` and ``name`` are the class, ``depth`` its shallowest."""
    step_key = "step" if by_step else "NULL::BIGINT"
    steps = "NULL::BIGINT" if by_step else "count(DISTINCT step)"
    key, depth = ("cls", "min(depth)") if by_class else ("path_id, depth", "depth")
    path, name = ("cls", "cls") if by_class else ("any_value(path)", "any_value(name)")
    order = "gpu_us DESC, cpu_us DESC" if by_class else "first_ts_us, depth"
    return f"""WITH calls AS (SELECT *, {CLASS_SQL} AS cls FROM {CALLS_TABLE})
SELECT rank, trace_id, {step_key} AS step, {path} AS path, {depth} AS depth, {name} AS name,
       any_value(kind) AS kind,
       count(*) AS calls, {steps} AS steps, sum(cpu_us) AS cpu_us, sum(gpu_ops) AS gpu_ops,
       sum(gpu_us) AS gpu_us, sum(flop) AS flop, min(ts_us) AS first_ts_us
FROM calls
WHERE $depth IS NULL OR depth <= $depth
GROUP BY rank, trace_id, {step_key}, {key}
ORDER BY rank, trace_id, step NULLS LAST, {order}, path"""


def _kinds(db: TraceDB, rank: int | None) -> tuple[int, int]:
    """The number of nn.Module events and of ``## ... ##`` annotations of the rank(s)."""
    row = db.con.execute(
        "SELECT count(*) FILTER (WHERE e.cat = 'python_function' AND e.name LIKE 'nn.Module:%'), "
        "count(*) FILTER (WHERE e.cat IN ('user_annotation', 'cpu_op') AND e.name LIKE '## % ##') "
        "FROM events e JOIN traces t USING (trace_id) WHERE $rank IS NULL OR t.rank = $rank",
        {"rank": rank}).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _notes(db: TraceDB, opts: ModuleOptions, has_flop: bool) -> list[str]:
    n_modules, n_annotations = _kinds(db, opts.rank)
    if not n_modules and not n_annotations:
        return [f"no nn.Module events and no '## name ##' annotations in the trace: {PROFILE_HINT}"]
    notes = []
    if not n_modules:
        notes.append(f"no nn.Module events in the trace (rows are its '## name ##' annotations): {PROFILE_HINT}")
    notes.append("gpu_us: the GPU operations launched on the module's thread during its CPU time "
                 "(backward kernels, launched from autograd threads, belong to no module)")
    if not has_flop:
        notes.append("no FLOP: no operator of a module has shapes (profile with record_shapes=True)")
    return notes


def _indent(frame):  # type: ignore[no-untyped-def]
    """``module``: the last name of the path, indented two spaces per level below the first, at
    most as deep as a path shows names (:data:`~trace_report.analyses.modules_tree.PATH_NAMES`:
    the text stays linear in the depth of the tree)."""
    return [("  " * (min(int(d), PATH_NAMES) - 1)) + str(n) for d, n in zip(frame["depth"], frame["name"], strict=True)]


def modules(db: TraceDB, options: ModuleOptions | None = None) -> Result:
    """The module tree. Rows (:data:`COLUMNS`): ``rank``; ``step`` (ProfilerStep, with
    ``by_step``); ``module`` (the module's name, indented by depth); ``depth`` (1 = outermost);
    ``kind`` (``module``: an nn.Module, ``annotation``: a ``## name ##`` range); ``calls``;
    ``steps`` (the ProfilerSteps it ran in, without ``by_step``); ``cpu_us`` (summed inclusive CPU
    time, µs); ``gpu_ops`` and ``gpu_us`` (the GPU operations its thread launched during it: count
    and summed duration, µs); ``flop`` (summed FLOP estimate of its operators, NULL where none has
    shapes); ``path`` (``Outer_0.Inner_0``). In tree order. ``trace_id`` too when several traces
    share a rank. Empty, with a note saying how to profile, when the trace has no module events.

    Raises :class:`~trace_report.errors.UsageError` for an unknown ``rank`` or a ``depth`` below 1.
    """
    opts = options or ModuleOptions()
    db.check_rank(opts.rank)
    if opts.depth is not None and opts.depth < 1:
        raise UsageError(f"depth must be 1 or more (got {opts.depth})")
    db.con.register(CALLS_TABLE, module_calls(db.con, opts.rank))
    try:
        frame = db.con.execute(module_query(opts.by_step, opts.by_class), {"depth": opts.depth}).df()
    finally:
        db.con.unregister(CALLS_TABLE)
    frame = frame.astype({"rank": "int64", "depth": "int64", "calls": "int64", "gpu_ops": "int64"})
    frame["module"] = _indent(frame) if not frame.empty and not opts.by_class else frame["name"]
    drop = "steps" if opts.by_step else "step"
    columns = [c for c in COLUMNS if c != drop]
    frame = drop_single_trace_ids(frame[[*columns, "trace_id"]])
    notes = _notes(db, opts, bool(frame["flop"].notna().any()) if not frame.empty else True)
    return Result(frame.reset_index(drop=True), notes)
