-- Computation/communication overlap per trace, as HTA's get_comm_comp_overlap
-- (hta/analyzers/communication_analysis.py): the union of computation kernels and the union of
-- communication kernels (kinds of view gpu_op_kinds), and the time both run at once (table macro
-- comp_comm_overlap_of, views_comm.sql). comp_comm_overlap_pct = 100 * overlap_us / comm_us.
-- Parameters: $rank (NULL = all), $steps_only (HTA's selection, view steps_only_gpu_ops),
-- $hta_rounding (HTA's rounding of fractional timestamps: start up, end down, to whole microseconds).
WITH picked AS (
    SELECT p.trace_id, p.kind, p.ts_us, p.dur_us
    FROM (SELECT trace_id, kind, ts_us, dur_us FROM steps_only_gpu_ops WHERE $steps_only
          UNION ALL
          SELECT trace_id, kind, ts_us, dur_us FROM gpu_op_kinds WHERE NOT $steps_only) p
    JOIN traces t USING (trace_id)
    WHERE $rank IS NULL OR t.rank = $rank
)
SELECT t.rank, b.comp_us, b.comm_us, b.overlap_us,
       CASE WHEN b.comm_us > 0 THEN 100.0 * b.overlap_us / b.comm_us END AS comp_comm_overlap_pct,
       b.trace_id
FROM comp_comm_overlap_of('picked', $hta_rounding) b JOIN traces t USING (trace_id)
ORDER BY t.rank, b.trace_id;
