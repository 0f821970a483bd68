-- Top GPU kernels by total time. Parameters: $rank (NULL = all ranks), $by_rank (BOOLEAN),
-- $limit (rows, per rank when $by_rank). pct = percent of all kernel time in the selection
-- (of that rank's kernel time when $by_rank).
WITH k AS (
    SELECT CASE WHEN $by_rank THEN t.rank END AS rank, e.name, e.dur_us
    FROM events e JOIN traces t USING (trace_id)
    WHERE e.cat = 'kernel' AND ($rank IS NULL OR t.rank = $rank)
),
g AS (
    SELECT rank, name, count(*) AS count, sum(dur_us) AS total_us, avg(dur_us) AS mean_us,
           min(dur_us) AS min_us, max(dur_us) AS max_us
    FROM k GROUP BY rank, name
),
r AS (
    SELECT *, 100.0 * total_us / sum(total_us) OVER (PARTITION BY rank) AS pct,
           row_number() OVER (PARTITION BY rank ORDER BY total_us DESC, name) AS pos
    FROM g
)
SELECT rank, name, count, total_us, mean_us, min_us, max_us, pct, 'kernel' AS kind
FROM r WHERE $limit IS NULL OR pos <= $limit
ORDER BY rank NULLS FIRST, total_us DESC, name;
