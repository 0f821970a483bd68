"""The GPU work of advise's windows: what its GPU-time findings count and divide by.

Every GPU-time figure of ``advise`` (the GPU time behind "% of GPU time", pageable copies, exposed
communication, the kernel classes of layout conversions and tensor cores, the CUDA-core GEMMs,
``gpu_bound``'s kernel groups and chains) is read from view ``window_gpu_ops``
(``store/sql/views_verdicts.sql``): the GPU operations launched inside the windows that step time
is measured over (ProfilerSteps, inferred iterations or the GPU span; their steady part while
``steady_from`` is set), step_time's rule. So the work and the time it is divided by are those of
the same windows, and the work launched before the first step (start-up, cuDNN autotuning) or
after the last one no longer counts in a figure per step.
"""

from __future__ import annotations

import duckdb

from trace_report.analyses.advise import gpu_bound
from trace_report.analyses.advise.checks import RankFacts

VIEWS = ("window_gpu_ops",)
"""The view the queries below read several times: kept as a table while they run (the caller's
:func:`~trace_report.store.kept_views.materialized` block)."""


def _by_rank(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> dict[int, tuple]:
    """Rows of a query whose first column is the rank, as {rank: the other columns}."""
    return {int(r[0]): tuple(r[1:]) for r in con.execute(sql, params).fetchall() if r[0] is not None}


def load(con: duckdb.DuckDBPyConnection, ids: list[int], facts: dict[int, RankFacts]) -> None:
    """Set, for every rank of ``facts`` (traces ``ids``), from the GPU operations of its windows
    (view ``window_gpu_ops``; µs): ``gpu_us`` (kernels + memcpy + memset, ``gpu_time_of``),
    ``classes`` (GPU time per kernel class, as flags sums it), ``cuda_core_gemm_us`` / ``_names``,
    ``pageable`` (view ``pageable_copies_by_rank``), ``comm_us`` / ``overlap_us``
    (``comp_comm_overlap_of``, HTA's overlap), ``gpu_work`` / ``compiled``
    (:func:`~trace_report.analyses.advise.gpu_bound.load`); and ``trace_gpu_us``, the GPU time of
    the whole traces (view ``gpu_time``), which says whether a rank has any GPU activity at all."""
    p = {"ids": ids}
    whole = _by_rank(con, "SELECT rank, sum(gpu_op_us) FROM gpu_time WHERE list_contains($ids, trace_id) "
                     "GROUP BY rank", p)
    inside = _by_rank(con, "SELECT rank, sum(gpu_op_us) FROM gpu_time_of('window_gpu_op_names') "
                      "WHERE list_contains($ids, trace_id) GROUP BY rank", p)
    classes = con.execute(
        "SELECT t.rank, c.class, sum(n.dur_us) AS us FROM window_gpu_op_names n "
        "JOIN (SELECT trace_id, name, unnest(classes) AS class FROM kernel_classes) c USING (trace_id, name) "
        "JOIN traces t ON t.trace_id = n.trace_id WHERE list_contains($ids, n.trace_id) GROUP BY ALL", p).df()
    gemms = _cuda_core_gemms(con, ids)
    comm = _by_rank(con, "WITH k AS (SELECT w.trace_id, n.kind, w.ts_us, w.dur_us FROM window_gpu_ops w "
                    "  JOIN gpu_op_kind_names n USING (name) WHERE list_contains($ids, w.trace_id)) "
                    "SELECT t.rank, sum(o.comm_us), sum(o.overlap_us) FROM comp_comm_overlap_of('k', false) o "
                    "JOIN traces t USING (trace_id) GROUP BY t.rank", p)
    rel = con.execute("SELECT * FROM pageable_copies_by_rank")
    cols = [d[0] for d in rel.description]
    pageable = {int(r[0]): dict(zip(cols, r, strict=True)) for r in rel.fetchall() if r[0] is not None}
    for r, f in facts.items():
        f.trace_gpu_us = float((whole.get(r) or (0.0,))[0] or 0.0)
        f.gpu_us = float((inside.get(r) or (0.0,))[0] or 0.0)
        mine = classes[classes["rank"] == r]
        f.classes = mine.set_index("class")["us"].astype(float)
        f.cuda_core_gemm_us, f.cuda_core_gemm_names = gemms.get(r, (0.0, ""))
        comm_us, overlap_us = comm.get(r, (0.0, 0.0))
        f.comm_us, f.overlap_us = float(comm_us or 0.0), float(overlap_us or 0.0)
        f.pageable = pageable.get(r, {})
    gpu_bound.load(con, ids, facts)


def _cuda_core_gemms(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[int, tuple[float, str]]:
    """Per rank: GEMM/convolution kernel time not on tensor cores (kernel classes: gemm or
    convolution without tensor_core) in the windows, and the top three such names."""
    rows = con.execute(
        "WITH k AS (SELECT t.rank, g.name, sum(g.dur_us) AS us FROM window_gpu_op_names g "
        "  JOIN kernel_classes c ON c.trace_id = g.trace_id AND c.name = g.name "
        "  JOIN traces t ON t.trace_id = g.trace_id "
        "  WHERE list_contains($ids, g.trace_id) AND NOT list_contains(c.classes, 'tensor_core') "
        "    AND (list_contains(c.classes, 'gemm') OR list_contains(c.classes, 'convolution')) GROUP BY ALL) "
        "SELECT rank, sum(us), list(name ORDER BY us DESC)[1:3] FROM k GROUP BY rank", {"ids": ids}).fetchall()
    return {int(r): (float(us), ", ".join(n[:60] for n in names)) for r, us, names in rows}
