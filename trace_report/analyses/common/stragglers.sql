-- Step time per rank and how far each rank is behind the fastest on the same ProfilerStep: the
-- rows of view step_stragglers (store/sql/views_stragglers.sql, which advise reads too).
-- Parameters: $rank (NULL = all; the comparison always uses every rank).
SELECT step, rank, step_us, behind_us, behind_pct, spread_us, spread_pct, slowest, ranks, trace_id
FROM step_stragglers
WHERE $rank IS NULL OR rank = $rank
ORDER BY job, step, rank, trace_id;
