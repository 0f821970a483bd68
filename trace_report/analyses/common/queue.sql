-- CUDA launch queue length per trace and stream, as HTA's queue-length analysis
-- (hta/analyzers/trace_counters.py): the queue grows by one at each launch call (view
-- launch_calls with hta_queue: cudaLaunchKernel, cudaMemcpyAsync, ...) and shrinks by one when
-- the GPU operation it launched starts on its stream. The series has one value per change; mean and max are over those values
-- (HTA's describe()). blocked_us: time the queue stayed at $max_queue_length or more (HTA's
-- get_time_spent_blocked_on_full_queue; CUDA's queue holds 1024 launches per stream).
-- Parameters: $rank, $steps_only, $hta_rounding (as overlap.sql), $max_queue_length.
WITH picked AS (
    SELECT trace_id, stream, ts_us, launch_ts_us, launch_name FROM steps_only_gpu_ops WHERE $steps_only
    UNION ALL
    SELECT trace_id, stream, ts_us, launch_ts_us, launch_name FROM gpu_op_launches WHERE NOT $steps_only
),
launched AS (
    SELECT p.* FROM picked p JOIN traces t USING (trace_id)
    WHERE p.stream IS NOT NULL AND ($rank IS NULL OR t.rank = $rank)
      AND p.launch_name IN (SELECT name FROM launch_calls WHERE hta_queue)
),
changes AS (
    SELECT trace_id, stream, CASE WHEN $hta_rounding THEN ceil(launch_ts_us) ELSE launch_ts_us END AS t, 1 AS d
    FROM launched
    UNION ALL
    SELECT trace_id, stream, CASE WHEN $hta_rounding THEN ceil(ts_us) ELSE ts_us END, -1 FROM launched
),
series AS (
    SELECT trace_id, stream, sum(d) OVER w AS queue_length, lead(t) OVER w - t AS held_us
    FROM changes WINDOW w AS (PARTITION BY trace_id, stream ORDER BY t, d DESC ROWS UNBOUNDED PRECEDING)
)
SELECT t.rank, s.stream, avg(s.queue_length) AS mean_queue_length,
       max(s.queue_length)::BIGINT AS max_queue_length,
       coalesce(sum(s.held_us) FILTER (WHERE s.queue_length >= $max_queue_length), 0) AS blocked_us,
       s.trace_id
FROM series s JOIN traces t USING (trace_id)
GROUP BY t.rank, s.stream, s.trace_id
ORDER BY t.rank, s.trace_id, s.stream;
