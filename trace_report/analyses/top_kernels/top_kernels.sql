-- Top GPU operations by total time: kernels, memcpy and memset ranked together (HTA's kernel
-- breakdown shows memory operations as kernels of type MEMORY). Parameters: $rank (NULL = all
-- ranks), $by_rank (BOOLEAN), $limit (rows, per rank when $by_rank), $trace_ids (NULL = every
-- trace). Reads view gpu_ops; HTA's iteration rule (steps only: operations launched before the
-- last ProfilerStep starts) reads view steps_only_gpu_ops instead (analyses/top_kernels/__init__.py,
-- top_kernels_sql: a query naming one view binds that view's chain alone, cheaper at start).
-- kind = 'kernel' | 'memcpy' | 'memset' (from cat kernel / gpu_memcpy / gpu_memset).
-- pct_of_gpu_time = percent of the GPU time of the selection (kernels + memcpy + memset, the
-- denominator flags and HTA's kernel breakdown use; of that rank's with $by_rank), so that the
-- rows of a selection sum to 100 without $limit.
WITH sel AS (
    SELECT e.trace_id, e.cat, e.name, e.dur_us FROM gpu_ops e
),
k AS (
    SELECT CASE WHEN $by_rank THEN t.rank END AS rank,
           CASE s.cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' ELSE 'memset' END AS kind,
           s.name, s.dur_us
    FROM sel s JOIN traces t USING (trace_id)
    WHERE ($rank IS NULL OR t.rank = $rank) AND ($trace_ids IS NULL OR list_contains($trace_ids, t.trace_id))
),
tot AS (SELECT rank, sum(dur_us) AS gpu_us FROM k GROUP BY rank),
g AS (
    SELECT rank, kind, name, count(*) AS count, sum(dur_us) AS total_us, avg(dur_us) AS mean_us,
           min(dur_us) AS min_us, max(dur_us) AS max_us
    FROM k GROUP BY rank, kind, name
),
r AS (
    SELECT g.*, 100.0 * g.total_us / tot.gpu_us AS pct_of_gpu_time,
           row_number() OVER (PARTITION BY g.rank ORDER BY g.total_us DESC, g.name, g.kind) AS pos
    FROM g JOIN tot ON tot.rank IS NOT DISTINCT FROM g.rank
)
SELECT rank, name, count, total_us, mean_us, min_us, max_us, pct_of_gpu_time, kind
FROM r WHERE $limit IS NULL OR pos <= $limit
ORDER BY rank NULLS FIRST, total_us DESC, name, kind;
