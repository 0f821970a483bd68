-- nsys analyze's gpu_gaps rule (GPU Starvation) per rank: the periods in which no GPU operation of
-- the trace ran (between consecutive runs of view gpu_busy_intervals: after the first operation
-- and before the last, as nsys looks) longer than $min_gap_us. Columns: gaps, gap_us (summed),
-- longest_us, longest_start_us (the trace's clock). Parameters: $ids, $min_gap_us.
WITH g AS (
    SELECT trace_id, end_us AS s, lead(start_us) OVER (PARTITION BY trace_id ORDER BY start_us) AS e
    FROM gpu_busy_intervals WHERE list_contains($ids, trace_id)
)
SELECT t.rank, count(*) AS gaps, sum(g.e - g.s) AS gap_us, max(g.e - g.s) AS longest_us,
       arg_max(g.s, g.e - g.s) AS longest_start_us
FROM g JOIN traces t USING (trace_id)
WHERE g.e - g.s > $min_gap_us
GROUP BY t.rank ORDER BY t.rank;
