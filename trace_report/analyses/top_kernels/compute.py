"""The computation of ``top-kernels`` (its declaration: the package's ``__init__``): GPU
operations (kernels, memcpy, memset) by name, by total time; CPU operators by self time when
there are none."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from trace_report.analyses.common.cpu_self_time import CPU_COLUMNS, cpu_self_time_table
from trace_report.analyses.top_kernels import TopKernelsOptions
from trace_report.errors import InputError
from trace_report.inputs import InputKind, detect
from trace_report.storage import is_url
from trace_report.store.rows import Rows
from trace_report.store.tracedb import TraceDB
from trace_report.store.views import sql_text

if TYPE_CHECKING:
    import pandas as pd

KERNEL_COLUMNS = ["name", "count", "total_us", "mean_us", "min_us", "max_us", "pct_of_gpu_time", "kind"]
NO_KERNELS_NOTE = "no GPU kernels in the selection; ranking CPU operators by self time instead"
MEMORY_KINDS = ("memcpy", "memset")
"""The ``kind`` of the GPU memory operations' rows (``gpu_memcpy`` / ``gpu_memset`` events)."""
STEPS_ONLY_NOTE = ("steps only (HTA's rule, view steps_only_gpu_ops): GPU operations launched before the last "
                   "ProfilerStep starts (every launched one of a one-step trace); pct_of_gpu_time is of the GPU "
                   "time so selected")


@dataclass
class TopKernelsResult:
    """The ranked rows and a note for the user (set when CPU operators were ranked instead, with
    ``steps_only``, and with ``kernels_only`` when memcpy/memset rows were hidden; several are
    joined by ``"; "``).

    ``rows`` come straight from DuckDB (what the command prints, no pandas); ``frame`` is the
    same rows as a pandas DataFrame, built on first use (notebooks)."""

    rows: Rows
    note: str | None = None

    @cached_property
    def frame(self) -> pd.DataFrame:
        return self.rows.df()


@dataclass
class TopKernelsTable:
    """A top-kernels result as the per-run funnel reads results: ``frame`` (the rows, no pandas)
    and ``notes``."""

    frame: Rows
    notes: list[str]


def top_kernels_table(db: TraceDB, options: TopKernelsOptions) -> TopKernelsTable:
    """:func:`top_kernels` as the command prints it (the declaration's compute)."""
    result = top_kernels(db, options)
    return TopKernelsTable(result.rows, [result.note] if result.note else [])


def kernel_summary(paths: list[Path], options: TopKernelsOptions) -> pd.DataFrame | None:
    """The rows of an ``nsys stats -r cuda_gpu_kern_sum --format csv`` file given alone (the
    command's first ``limit`` rows, as Nsight Systems ranks them), else None."""
    if len(paths) != 1 or is_url(paths[0]) or detect(Path(paths[0])).kind is not InputKind.nsys_kernsum:
        return None
    from trace_report.formats.nsys import read_kernsum_csv  # pandas: only for this input

    frame = read_kernsum_csv(paths[0])
    return frame if options.limit is None else frame.head(options.limit)


def top_kernels_sql(steps_only: bool) -> str:
    """``top_kernels.sql``, over view ``steps_only_gpu_ops`` instead of ``gpu_ops`` with
    ``steps_only`` (HTA's iteration rule). One view named: only its chain is bound."""
    sql = sql_text("top_kernels.sql", __package__)
    return sql.replace("FROM gpu_ops e", "FROM steps_only_gpu_ops e") if steps_only else sql


def top_kernels(db: TraceDB, options: TopKernelsOptions | None = None) -> TopKernelsResult:
    """Rank GPU operations (kernels, memcpy, memset) by total time.

    Columns: ``name``, ``count``, ``total_us``, ``mean_us``, ``min_us``, ``max_us`` (µs, from the
    ``dur`` of ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events), ``pct_of_gpu_time`` (percent
    of the selection's GPU time: kernels + memcpy + memset, view ``gpu_time``, as ``flags`` and
    HTA's kernel breakdown, which shows memory operations as kernels of type MEMORY; of that
    rank's with ``by_rank``; the rows sum to 100 without a limit), ``kind`` = ``"kernel"``,
    ``"memcpy"`` or ``"memset"``; ``rank`` first with ``by_rank``. ``kernels_only`` hides the
    memcpy/memset rows (ranks and limits the kernels alone) and the note says how many names, how
    much time and what share of the GPU time they hold; ``pct_of_gpu_time`` keeps its denominator.
    Without any GPU operation in the selection, CPU operators (``cpu_op``) are ranked by self time
    instead (``kind = "cpu_op"``, ``pct_of_cpu_self_time``) and :attr:`TopKernelsResult.note`
    says so. A selection with memcpy/memset but no kernel is not CPU-only: it shows its memory
    operations, or, with ``kernels_only``, no rows and the note.
    ``steps_only`` on traces without ProfilerStep raises :class:`InputError`.
    """
    opts = options or TopKernelsOptions()
    db.check_rank(opts.rank)
    if opts.steps_only and not db.con.execute("SELECT count(*) FROM steps").fetchall()[0][0]:
        raise InputError("--steps-only needs ProfilerStep ranges, and these traces have none")
    params = {"rank": opts.rank, "by_rank": opts.by_rank, "limit": None if opts.kernels_only else opts.limit,
              "trace_ids": None if opts.trace_ids is None else list(opts.trace_ids)}
    rows = Rows.fetch(db.con, top_kernels_sql(opts.steps_only), params)
    if not len(rows):
        return TopKernelsResult(rows_from_frame(cpu_self_time(db.con, opts), opts.by_rank, CPU_COLUMNS),
                                NO_KERNELS_NOTE)
    notes = [STEPS_ONLY_NOTE] if opts.steps_only else []
    if opts.kernels_only:
        rows, hidden = _kernel_rows(rows, opts.limit)
        notes += [hidden] if hidden else []
    return TopKernelsResult(_shape(rows, opts.by_rank), "; ".join(notes) or None)


def _kernel_rows(rows: Rows, limit: int | None) -> tuple[Rows, str | None]:
    """The kernel rows of ``top_kernels.sql``'s rows of every GPU operation (fetched without a
    limit, in its order), ``limit`` per rank; and the note on the memcpy/memset rows left out
    (None when there are none)."""
    col = {c: i for i, c in enumerate(rows.columns)}
    kind, rank, name, total = col["kind"], col["rank"], col["name"], col["total_us"]
    kept: list[tuple] = []
    per_rank: dict[object, int] = {}
    for row in rows.data:
        if row[kind] != "kernel":
            continue
        n = per_rank.get(row[rank], 0)
        if limit is None or n < limit:
            kept.append(row)
        per_rank[row[rank]] = n + 1
    hidden = [row for row in rows.data if row[kind] in MEMORY_KINDS]
    if not hidden:
        return Rows(rows.columns, rows.types, kept), None
    gpu_us = sum(row[total] for row in rows.data)
    hidden_us = sum(row[total] for row in hidden)
    pct = 100.0 * hidden_us / gpu_us if gpu_us else 0.0
    names = len({row[name] for row in hidden})
    note = (f"memcpy/memset rows hidden (--kernels-only): {names} name{'s' if names != 1 else ''}, "
            f"{_duration(hidden_us)}, {pct:.1f}% of GPU time")
    if not kept:
        note += "; the selection has no GPU kernel, only memcpy/memset"
    return Rows(rows.columns, rows.types, kept), note


def _duration(us: float) -> str:
    """µs as ``830 µs``, ``12.4 ms`` or ``3.21 s``."""
    if us < 1e3:
        return f"{us:.0f} µs"
    if us < 1e6:
        return f"{us / 1e3:.1f} ms"
    return f"{us / 1e6:.2f} s"


def _columns(by_rank: bool, columns: list[str] = KERNEL_COLUMNS) -> list[str]:
    return (["rank"] if by_rank else []) + columns


def _shape(rows: Rows, by_rank: bool) -> Rows:
    """The printed columns; ``rank`` as BIGINT (int64 in the notebook frame) like ``count``."""
    out = rows.select(_columns(by_rank))
    return Rows(out.columns, ["BIGINT" if c == "rank" else t for c, t in zip(out.columns, out.types, strict=True)],
                out.data)


def rows_from_frame(frame: pd.DataFrame, by_rank: bool, columns: list[str] = KERNEL_COLUMNS) -> Rows:
    """A frame with ``columns`` (:data:`KERNEL_COLUMNS` or :data:`CPU_COLUMNS`; and ``rank``) as the
    printed rows: ``count`` (and ``rank``) BIGINT, times DOUBLE (the CPU fallback's frame, or partial
    sums merged in pandas by the Ray engine)."""
    cols = _columns(by_rank, columns)
    types = {"rank": "BIGINT", "count": "BIGINT", "name": "VARCHAR", "kind": "VARCHAR"}
    data = [tuple(_plain(v) for v in row) for row in frame[cols].itertuples(index=False)]
    return Rows(cols, [types.get(c, "DOUBLE") for c in cols], data)


def _plain(value: object) -> object:
    """A numpy scalar as the Python value DuckDB's ``fetchall`` would give."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def cpu_self_time(con: duckdb.DuckDBPyConnection, opts: TopKernelsOptions) -> pd.DataFrame:
    """CPU operators ranked by total self time (µs), :data:`CPU_COLUMNS`, ``kind='cpu_op'``, of
    the options' selection (``rank``, ``by_rank``, ``limit``, ``trace_ids``):
    :func:`~trace_report.analyses.common.cpu_self_time.cpu_self_time_table`, which ``compare``
    reads too."""
    return cpu_self_time_table(con, opts.rank, opts.by_rank, opts.limit, opts.trace_ids)
