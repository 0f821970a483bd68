-- GPU operations (kernels, memcpy, memset) with their classes (kernel_classes_of), one row per
-- (rank, trace, name, class, matching rule). Parameters: $names (the name of a relation of
-- gpu_op_names' rows: the view, or those kept beside the database), $classes (the name of a
-- relation of kernel_classes_of($names)' rows, or of more traces:
-- trace_report.analyses.common.kernel_classes.flag_rows), $rank (NULL = all ranks),
-- $by_rank (BOOLEAN: keep the rank, else NULL), $trace_ids (NULL = every trace; a list: only
-- these, e.g. one run of an experiment). gpu_us = all GPU time of the selection (of that rank
-- with $by_rank; gpu_time_of: kernels + memcpy + memset), the denominator of every percentage.
-- Durations in microseconds.
WITH sel AS (
    SELECT CASE WHEN $by_rank THEN t.rank END AS rank, e.trace_id, e.name, e.ops, e.dur_us
    FROM query_table($names) e JOIN traces t ON t.trace_id = e.trace_id
    WHERE ($rank IS NULL OR t.rank = $rank) AND ($trace_ids IS NULL OR list_contains($trace_ids, t.trace_id))
),
tot AS (
    SELECT CASE WHEN $by_rank THEN rank END AS rank, sum(gpu_op_us) AS gpu_us
    FROM gpu_time_of($names) WHERE ($rank IS NULL OR rank = $rank)
      AND ($trace_ids IS NULL OR list_contains($trace_ids, trace_id)) GROUP BY 1 HAVING sum(gpu_ops) > 0
),
per_name AS (
    SELECT s.rank, s.trace_id, s.name, CAST(sum(s.ops) AS BIGINT) AS count, sum(s.dur_us) AS total_us
    FROM sel s GROUP BY s.rank, s.trace_id, s.name
)
SELECT p.rank, p.trace_id, p.name, c.class, r.rule_id, p.count, p.total_us, tot.gpu_us
FROM per_name p
JOIN tot ON tot.rank IS NOT DISTINCT FROM p.rank
JOIN (SELECT trace_id, name, unnest(classes) AS class, rules FROM query_table($classes)) c
  ON c.trace_id = p.trace_id AND c.name = p.name
JOIN kernel_class_rules r ON r.class = c.class AND list_contains(c.rules, r.rule_id)
UNION ALL
-- selections without any classified operation still report their GPU time
SELECT tot.rank, NULL, NULL, NULL, NULL, 0, 0.0, tot.gpu_us FROM tot;
