-- Computation/communication overlap per trace, as HTA's get_comm_comp_overlap
-- (hta/analyzers/communication_analysis.py): the union of computation kernels and the union of
-- communication kernels (kinds of view gpu_op_kinds), and the time both run at once.
-- comp_comm_overlap_pct = 100 * overlap_us / comm_us. Parameters: $rank (NULL = all),
-- $steps_only (HTA's selection, view steps_only_gpu_ops), $hta_rounding (HTA's rounding of
-- fractional timestamps: start up, end down, to whole microseconds).
WITH picked AS (
    SELECT trace_id, kind, ts_us, dur_us FROM steps_only_gpu_ops WHERE $steps_only
    UNION ALL
    SELECT trace_id, kind, ts_us, dur_us FROM gpu_op_kinds WHERE NOT $steps_only
),
sel AS (
    SELECT p.trace_id, p.kind,
           CASE WHEN $hta_rounding THEN ceil(p.ts_us) ELSE p.ts_us END AS s,
           CASE WHEN $hta_rounding THEN floor(p.ts_us + p.dur_us) ELSE p.ts_us + p.dur_us END AS e
    FROM picked p JOIN traces t USING (trace_id)
    WHERE p.kind IN ('computation', 'communication') AND ($rank IS NULL OR t.rank = $rank)
),
-- Merge each kind's intervals: a new run starts where an interval starts after every earlier
-- one has ended (HTA's merge_kernel_intervals).
flagged AS (
    SELECT *, coalesce(s > max(e) OVER (PARTITION BY trace_id, kind ORDER BY s, e
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), true) AS new_run
    FROM sel
),
runs AS (
    SELECT *, sum(new_run::INTEGER) OVER (PARTITION BY trace_id, kind ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS run_no
    FROM flagged
),
merged AS (SELECT trace_id, kind, min(s) AS s, max(e) AS e FROM runs GROUP BY trace_id, kind, run_no),
-- Sweep: communication adds 1, computation 2; state 3 = both running.
edges AS (
    SELECT trace_id, s AS t, CASE kind WHEN 'communication' THEN 1 ELSE 2 END AS d FROM merged
    UNION ALL
    SELECT trace_id, e, CASE kind WHEN 'communication' THEN -1 ELSE -2 END FROM merged
),
sweep AS (
    SELECT trace_id, sum(d) OVER w AS state, lead(t) OVER w - t AS seg_us
    FROM edges WINDOW w AS (PARTITION BY trace_id ORDER BY t, d ROWS UNBOUNDED PRECEDING)
),
busy AS (
    SELECT trace_id,
           coalesce(sum(e - s) FILTER (WHERE kind = 'computation'), 0) AS comp_us,
           coalesce(sum(e - s) FILTER (WHERE kind = 'communication'), 0) AS comm_us
    FROM merged GROUP BY trace_id
),
both_busy AS (
    SELECT trace_id, coalesce(sum(seg_us) FILTER (WHERE state = 3), 0) AS overlap_us
    FROM sweep GROUP BY trace_id
)
SELECT t.rank, b.comp_us, b.comm_us, o.overlap_us,
       CASE WHEN b.comm_us > 0 THEN 100.0 * o.overlap_us / b.comm_us END AS comp_comm_overlap_pct,
       b.trace_id
FROM busy b JOIN both_busy o USING (trace_id) JOIN traces t USING (trace_id)
ORDER BY t.rank, b.trace_id;
