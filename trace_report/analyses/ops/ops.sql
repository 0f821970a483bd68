-- Operator view (torch-tb-profiler's Operator view, TraceLens' ops summary): each CPU operator
-- with its self CPU time, the GPU time it launched and its FLOP (view op_costs, the operator cost
-- model of store/sql/views_op_cost.sql).
-- Parameters: $rank (NULL = all), $all_ops (else only aten:: operators), $by_shape (one row per
-- name and "Input Dims").
-- _ops_nesting is the relation trace_report.analyses.ops.nesting.nesting() computes from
-- analyses/ops/ops_nesting.sql, registered for this query: per operator and annotation, child_us (the
-- summed dur of the rows whose parent, the innermost operator or annotation enclosing them on their
-- thread, it is), gpu_self_us and gpu_us.
-- * self_cpu_us: dur minus the dur of the direct children (cpu_op or user_annotation nested on the
--   same thread; the direct parent is the innermost enclosing one).
-- * A GPU operation (kernel, memcpy, memset) belongs to the operator whose External id its launch
--   call (same correlation) carries, else to the innermost operator or annotation around the
--   call on its thread: gpu_self_us sums those; gpu_us adds those of every operator
--   nested in it (what the operator caused on the GPU).
WITH ev AS (
    SELECT e.trace_id, e.event_id, e.name, e.dur_us,
           CASE WHEN $by_shape
                THEN coalesce(CAST(TRY_CAST(json_extract(e.args, '$."Input Dims"') AS BIGINT[][]) AS VARCHAR), '')
           END AS input_dims
    FROM events e JOIN traces t USING (trace_id)
    WHERE e.cat = 'cpu_op' AND ($rank IS NULL OR t.rank = $rank)
),
ops AS (
    SELECT ev.*, greatest(ev.dur_us - n.child_us, 0) AS self_cpu_us, n.gpu_self_us, n.gpu_us, f.flop
    FROM ev
    JOIN _ops_nesting n USING (trace_id, event_id)
    LEFT JOIN op_costs f USING (trace_id, event_id)
    WHERE $all_ops OR ev.name LIKE 'aten::%'
)
SELECT name, input_dims, count(*) AS count, sum(self_cpu_us) AS self_cpu_us, sum(dur_us) AS cpu_us,
       sum(gpu_self_us) AS gpu_self_us, sum(gpu_us) AS gpu_us,
       sum(flop) AS flop, count(flop) AS counted,
       sum(flop) FILTER (WHERE gpu_us > 0) / nullif(sum(gpu_us) FILTER (WHERE flop IS NOT NULL), 0) / 1e6 AS tflop_per_s
FROM ops
GROUP BY name, input_dims
-- rounded to 1 ns: sums of the same kernels in another order differ in the last bits, which must not
-- reorder two operators of equal time (aten::batch_norm and the _batch_norm_impl_index inside it)
ORDER BY round(sum(gpu_us), 3) DESC, round(sum(self_cpu_us), 3) DESC, name, input_dims;
