-- The events of one trace that `trace-report slice` keeps (analyses/slice/__init__.py), as a TEMP table
-- slice_kept(event_id). Parameters: $trace_id, $t0, $t1 (the selection window, µs on the trace's
-- clock, half-open [t0, t1)), $step_lo, $step_hi (the selected ProfilerStep numbers; NULL
-- without --steps).
-- 1. Every event that overlaps the window: a complete event with ts < t1 and ts + dur > t0, an
--    instant ([memory]) with t0 <= ts < t1. ProfilerStep#N (CPU side, the rows of view steps)
--    outside [step_lo, step_hi] are left out: a step that only touches the window is not a step
--    of the slice.
-- 2. With them, every GPU operation and runtime call sharing a correlation with one of them:
--    kernels launched in the window that run after it, and the launch calls of operations that
--    run in the window but were launched before it. So each kept kernel keeps its launch (view
--    kernels.launch_*), and the slice's steps keep what the full trace gives them.
-- 3. Per device, the last [memory] event before the window: it sets the level the window starts
--    at (view memory_events; memory_peaks.sql counts it in the first step's peak).
CREATE OR REPLACE TEMP TABLE slice_kept AS
WITH base AS (
    SELECT event_id, cat, correlation FROM events
    WHERE trace_id = $trace_id AND ts_us < $t1 AND (ts_us + dur_us > $t0 OR (dur_us = 0 AND ts_us >= $t0))
      AND NOT coalesce(cat IN ('user_annotation', 'cpu_op') AND name LIKE 'ProfilerStep#%'
                       AND TRY_CAST(regexp_extract(name, 'ProfilerStep#(\d+)', 1) AS BIGINT)
                           NOT BETWEEN $step_lo AND $step_hi, false)
),
linked AS (
    SELECT DISTINCT correlation FROM base
    WHERE correlation IS NOT NULL AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
)
SELECT event_id FROM base
UNION
SELECT arg_max(event_id, ts_us) FROM memory_events WHERE trace_id = $trace_id AND ts_us < $t0 GROUP BY device
UNION
SELECT event_id FROM events
WHERE trace_id = $trace_id AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
  AND correlation IN (SELECT correlation FROM linked);
