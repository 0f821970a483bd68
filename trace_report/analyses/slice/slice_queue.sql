-- Counter track of `trace-report slice`: the CUDA launch queue length of each stream, the series
-- whose mean and max `trace-report queue` prints (analyses/queue/queue.sql, HTA's trace_counters.py:
-- +1 at each launch call, -1 when the operation it launched starts; the same launch calls: view
-- launch_calls with hta_queue), over every launched operation of the trace. Only the operations that matter to a range [lo, hi] are
-- read, and each join is built on a few rows (a trace may hold millions); analyses/slice/__init__.py adds
-- the changes up. TEMP table macros, created by running this file:
--   slice_queue_pairs(t, lo, hi): stream, pid, start_us, launch_us of every operation of trace t
--     that starts in [lo, hi] or was launched in [lo, hi] (the changes inside the range);
--   slice_queue_next(t, s, after_ts, after_id, n): start_us, event_id, launch_us (NULL: no launch
--     call) of the first n operations of stream s that start after (after_ts, after_id) in
--     (ts_us, event_id) order. A stream runs its operations in launch order, so those queued at
--     lo (launched before lo, started at or after it) are the first to start from lo on: the
--     caller reads them a page at a time until one was launched at or after lo.
CREATE OR REPLACE TEMP MACRO slice_launch_calls(t) AS TABLE
    SELECT correlation, ts_us, event_id FROM events
    WHERE trace_id = t AND cat IN ('cuda_runtime', 'cuda_driver') AND correlation IS NOT NULL
      AND name IN (SELECT name FROM launch_calls WHERE hta_queue);

CREATE OR REPLACE TEMP MACRO slice_queue_ops(t) AS TABLE
    SELECT correlation, stream, pid, ts_us, event_id FROM events
    WHERE trace_id = t AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND stream IS NOT NULL
      AND correlation IS NOT NULL;

CREATE OR REPLACE TEMP MACRO slice_queue_pairs(t, lo, hi) AS TABLE
WITH near AS (SELECT * FROM slice_queue_ops(t) WHERE ts_us >= lo AND ts_us <= hi),
launched_in AS (SELECT * FROM slice_launch_calls(t) WHERE ts_us >= lo AND ts_us <= hi),
near_launches AS (
    SELECT correlation, arg_min(ts_us, event_id) AS launch_us FROM slice_launch_calls(t)
    WHERE correlation IN (SELECT correlation FROM near) GROUP BY correlation
),
late AS (SELECT * FROM slice_queue_ops(t) WHERE ts_us > hi AND correlation IN (SELECT correlation FROM launched_in))
SELECT o.stream, o.pid, o.ts_us AS start_us, l.launch_us FROM near o JOIN near_launches l USING (correlation)
UNION ALL
SELECT o.stream, o.pid, o.ts_us, l.ts_us FROM late o JOIN launched_in l USING (correlation);

CREATE OR REPLACE TEMP MACRO slice_queue_next(t, s, after_ts, after_id, n) AS TABLE
WITH o AS (
    SELECT correlation, ts_us, event_id FROM slice_queue_ops(t)
    WHERE stream = s AND (ts_us > after_ts OR (ts_us = after_ts AND event_id > after_id))
    ORDER BY ts_us, event_id LIMIT n
),
l AS (
    SELECT correlation, arg_min(ts_us, event_id) AS launch_us FROM slice_launch_calls(t)
    WHERE correlation IN (SELECT correlation FROM o) GROUP BY correlation
)
SELECT o.ts_us AS start_us, o.event_id, l.launch_us FROM o LEFT JOIN l USING (correlation)
ORDER BY o.ts_us, o.event_id;
