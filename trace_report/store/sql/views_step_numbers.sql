-- One definition per number (docs/analysis.md, "Definitions"): GPU time, GPU busy time and
-- utilisation, GPU operations with their launches, HTA's step selection, launch-bound.
-- TEMP views, created on every connection after views_comm.sql (gpu_op_launches,
-- steps_only_gpu_ops) and views_regions.sql (step_windows).
-- Times in microseconds on the trace's own clock. Used by top-kernels, flags, breakdown,
-- advise and the report headline, so that every command shows the same figure.

-- GPU time per trace: the denominator of every "% of GPU time" (top-kernels
-- pct_of_gpu_time, flags, advise). GPU operations = kernels + memcpy + memset, as HTA's
-- get_gpu_kernel_breakdown counts them (memory operations are kernels of type MEMORY there).
-- gpu_time_of(names): the same from a relation of gpu_op_names' rows (its name: the view, or
-- the rows flags reads kept beside the database), so both are one definition.
CREATE OR REPLACE TEMP MACRO gpu_time_of(names) AS TABLE
SELECT t.trace_id, t.rank,
       CAST(coalesce(sum(g.ops), 0) AS BIGINT) AS gpu_ops,
       coalesce(sum(g.dur_us), 0.0) AS gpu_op_us,
       coalesce(sum(g.dur_us) FILTER (WHERE g.cat = 'kernel'), 0.0) AS kernel_us,
       coalesce(sum(g.dur_us) FILTER (WHERE g.cat = 'gpu_memcpy'), 0.0) AS memcpy_us,
       coalesce(sum(g.dur_us) FILTER (WHERE g.cat = 'gpu_memset'), 0.0) AS memset_us
FROM traces t LEFT JOIN query_table(names) g ON g.trace_id = t.trace_id
GROUP BY t.trace_id, t.rank;

CREATE OR REPLACE TEMP VIEW gpu_time AS SELECT * FROM gpu_time_of('gpu_op_names');

-- Union of the GPU operations' [ts, ts + dur) intervals per trace (all streams and devices of
-- the trace): the time during which the GPU did something. Gaps-and-islands over start order.
CREATE OR REPLACE TEMP VIEW gpu_busy_intervals AS  -- kept per trace; a table in advise, report
WITH o AS (
    SELECT trace_id, ts_us AS s, ts_us + dur_us AS e FROM gpu_ops WHERE dur_us > 0
),
m AS (
    SELECT *, max(e) OVER (PARTITION BY trace_id ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS run_end
    FROM o
),
g AS (  -- island: a running count, BIGINT (a sum of 1s is HUGEINT, which Parquet would keep as
        -- DOUBLE); a sum cast, not count(*) FILTER (...) OVER (...), which DuckDB 2.0 computes
        -- several times slower
    SELECT *, CAST(sum(CASE WHEN run_end IS NULL OR s > run_end THEN 1 ELSE 0 END)
                   OVER (PARTITION BY trace_id ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS BIGINT) AS island
    FROM m
)
SELECT trace_id, island, min(s) AS start_us, max(e) AS end_us FROM g GROUP BY trace_id, island;

-- ProfilerSteps as spans of wall time that never overlap, so that summed step time counts no
-- instant twice: taken in start order (ts_us, event_id) within a trace, a step that starts before
-- an earlier one has ended starts at that end instead (overlap 'clipped'), and a step that ends
-- by then lies wholly inside earlier ones and is left out of summed time (overlap 'nested':
-- wall_us 0). step_ts_us is the step's own start; view steps keeps the steps as recorded (a
-- kernel's step is still the latest-starting one containing its launch: step_windows).
-- No real trace in ../shared/data has overlapping steps; a note says how many
-- (step_overlap_counts).
CREATE OR REPLACE TEMP VIEW step_wall_windows AS
WITH s AS (
    SELECT *, max(end_us) OVER (PARTITION BY trace_id ORDER BY ts_us, event_id
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM steps
)
SELECT trace_id, step, event_id, pid, tid, ts_us AS step_ts_us,
       CASE WHEN prev_end > ts_us THEN least(prev_end, end_us) ELSE ts_us END AS ts_us, end_us,
       CASE WHEN prev_end > ts_us THEN greatest(0.0, end_us - prev_end) ELSE end_us - ts_us END AS wall_us,
       CASE WHEN prev_end IS NULL OR prev_end <= ts_us THEN NULL
            WHEN end_us <= prev_end THEN 'nested' ELSE 'clipped' END AS overlap
FROM s;

-- Per trace with overlapping ProfilerSteps: how many were clipped and how many nested (view
-- step_wall_windows), and the wall time not counted twice (us).
CREATE OR REPLACE TEMP VIEW step_overlap_counts AS
SELECT w.trace_id, t.rank, count(*) FILTER (WHERE overlap = 'clipped') AS clipped,
       count(*) FILTER (WHERE overlap = 'nested') AS nested,
       sum(end_us - step_ts_us - wall_us) AS overlap_us
FROM step_wall_windows w JOIN traces t USING (trace_id)
WHERE overlap IS NOT NULL
GROUP BY w.trace_id, t.rank;

-- The steps' starts and ends cut a trace's time into segments; one row per segment and
-- ProfilerStep holding it (a step holds a whole segment or none of it: ts_us <= seg_ts_us and
-- seg_end_us <= end_us). The steps holding a time t are those of the segment with the latest
-- seg_ts_us <= t, when t < seg_end_us: an ASOF join, where a range join of every time to every
-- step of its trace costs their product (modules.sql, memory_peaks.sql). Segments no step holds
-- are left out; a zero-length step holds none.
CREATE OR REPLACE TEMP VIEW step_segments AS
WITH bounds AS (SELECT trace_id, ts_us AS b FROM steps UNION SELECT trace_id, end_us FROM steps),
segments AS (
    SELECT trace_id, b AS seg_ts_us, lead(b) OVER (PARTITION BY trace_id ORDER BY b) AS seg_end_us FROM bounds
)
SELECT g.trace_id, g.seg_ts_us, g.seg_end_us, s.step, s.event_id
FROM segments g JOIN steps s ON s.trace_id = g.trace_id AND s.ts_us <= g.seg_ts_us AND s.end_us > g.seg_ts_us;

-- GPU utilisation per step and rank: busy time of GPU operations (union of intervals, clipped
-- to the step) / the ProfilerStep's wall time. Overlapping steps count each instant once (view
-- step_wall_windows: a step is clipped to start where the earlier ones end, a nested one is left
-- out). A trace without ProfilerStep uses the iterations inferred from what repeats (view
-- iterations, basis 'inferred: <name>'); without those it is one window from its first to its
-- last GPU operation (basis 'gpu_span', what HTA's temporal breakdown divides by).
-- gpu_util_pct is NULL for traces without GPU operations.
CREATE OR REPLACE TEMP VIEW gpu_utilization AS  -- a table in advise, report
WITH bi AS MATERIALIZED (SELECT * FROM gpu_busy_intervals),  -- computed once, used three times
span AS (
    SELECT trace_id, min(start_us) AS ts_us, max(end_us) AS end_us FROM bi GROUP BY trace_id
),
w AS (
    SELECT s.trace_id, s.step, s.event_id AS window_id, s.ts_us, s.end_us, 'ProfilerStep' AS basis
    FROM step_wall_windows s WHERE s.overlap IS DISTINCT FROM 'nested'
    UNION ALL
    SELECT i.trace_id, i.step, i.window_id, i.ts_us, i.end_us, i.basis
    FROM iterations i WHERE starts_with(i.basis, 'inferred: ')
    UNION ALL
    SELECT p.trace_id, NULL, -1, p.ts_us, p.end_us, 'gpu_span'
    FROM span p WHERE p.trace_id IN (SELECT trace_id FROM iterations WHERE basis = 'trace')
),
has_gpu AS (SELECT DISTINCT trace_id FROM bi),
busy AS (
    SELECT w.trace_id, w.window_id,
           sum(greatest(0.0, least(b.end_us, w.end_us) - greatest(b.start_us, w.ts_us))) AS busy_us
    FROM w JOIN bi b
      ON b.trace_id = w.trace_id AND b.start_us < w.end_us AND b.end_us > w.ts_us
    GROUP BY w.trace_id, w.window_id
)
SELECT w.trace_id, t.rank, w.step, w.window_id, w.basis, w.ts_us, w.end_us, w.end_us - w.ts_us AS wall_us,
       CASE WHEN w.trace_id IN (SELECT trace_id FROM has_gpu) THEN coalesce(b.busy_us, 0.0) END AS busy_us,
       100.0 * busy_us / nullif(w.end_us - w.ts_us, 0) AS gpu_util_pct
FROM w JOIN traces t ON t.trace_id = w.trace_id
LEFT JOIN busy b ON b.trace_id = w.trace_id AND b.window_id = w.window_id;

-- GPU utilisation per rank: sum of busy time / sum of step wall time over the rank's steps
-- (or GPU spans). The one figure the report headline and advise's low_gpu_utilization show.
CREATE OR REPLACE TEMP VIEW gpu_utilization_by_rank AS
SELECT rank, min(basis) AS basis, count(*) AS steps, sum(wall_us) AS wall_us, sum(busy_us) AS busy_us,
       100.0 * sum(busy_us) / nullif(sum(wall_us), 0) AS gpu_util_pct
FROM gpu_utilization GROUP BY rank;

-- Every GPU operation (kernel, memcpy, memset) with the CPU call that launched it (view
-- gpu_op_launches of views_comm.sql: the cuda_runtime/cuda_driver event with the same
-- correlation), as HTA's get_cuda_kernel_launch_stats pairs them: cpu_us = the launch call's
-- duration, gpu_us = the operation's, launch_delay_us = operation start - launch end.
-- window_id/step: the step the launch starts in (view step_windows: a ProfilerStep or an inferred
-- iteration; NULL outside every step). hta_kept: the
-- operation is in steps_only_gpu_ops, HTA's iteration filter (launched before the last
-- ProfilerStep starts), the one step selection of overlap, queue and top-kernels --steps-only.
CREATE OR REPLACE TEMP VIEW gpu_op_launch_times AS
WITH g AS (
    SELECT g.trace_id, g.event_id, g.cat, g.name, g.correlation, g.ts_us, g.dur_us AS gpu_us,
           g.launch_event_id, g.launch_pid, g.launch_ts_us, r.name AS launch_name, r.dur_us AS cpu_us,
           g.ts_us - (r.ts_us + r.dur_us) AS launch_delay_us, g.hta_kept
    FROM gpu_op_launches_hta g
    JOIN runtime_calls r ON r.trace_id = g.trace_id AND r.event_id = g.launch_event_id
),
-- ProfilerStep windows that can hold a launch, looked up as view overlapping_step_traces says
w0 AS MATERIALIZED (SELECT * FROM step_windows WHERE window_id <> -1 AND end_us > ts_us),
single AS (
    SELECT g.*, w.window_id, w.step,
           g.launch_ts_us < w.end_us AND (w.pid IS NULL OR w.pid = g.launch_pid) AS inside
    FROM g ASOF LEFT JOIN w0 w ON w.trace_id = g.trace_id AND g.launch_ts_us >= w.ts_us
    WHERE g.trace_id NOT IN (SELECT trace_id FROM overlapping_step_traces)
),
nested AS (
    SELECT g.*, w.window_id, w.step
    FROM g LEFT JOIN w0 w
      ON w.trace_id = g.trace_id
     AND g.launch_ts_us >= w.ts_us AND g.launch_ts_us < w.end_us
     AND (w.pid IS NULL OR w.pid = g.launch_pid)
    WHERE g.trace_id IN (SELECT trace_id FROM overlapping_step_traces)
    QUALIFY row_number() OVER (PARTITION BY g.trace_id, g.event_id
                               ORDER BY w.ts_us DESC NULLS LAST, w.window_id DESC) = 1
)
SELECT * EXCLUDE (hta_kept, inside, window_id, step),
       CASE WHEN coalesce(inside, false) THEN window_id END AS window_id,
       CASE WHEN coalesce(inside, false) THEN step END AS step, hta_kept
FROM single
UNION ALL
SELECT * EXCLUDE (hta_kept, window_id, step), window_id, step, hta_kept FROM nested;

-- Launch-bound, HTA's rule (get_cuda_kernel_launch_stats, include_memory_events=True): GPU
-- operations (kernels + memcpy + memset) that ran shorter than the CPU call that launched them,
-- over the operations launched inside the steps (view step_windows; every operation of a trace
-- without any), per trace. advise's launch_bound reads it.
-- Operations replayed from a CUDA or HIP graph are left out (graph_ops counts them): one
-- cudaGraphLaunch call serves all the graph's kernels, so none has a launch of its own; compared
-- with that call, as HTA's rule does, a graph of short kernels would look launch-bound because
-- it has done away with their launches.
CREATE OR REPLACE TEMP VIEW launch_bound AS
-- A trace without ProfilerStep counts the operations launched in its inferred iterations (view
-- iterations); without those it is one window: all its operations count, steps = 1.
WITH o AS (
    SELECT *, coalesce(regexp_matches(launch_name, '^(cuda|hip|cu)GraphLaunch'), false) AS graph
    FROM gpu_op_launch_times o0
    WHERE (window_id IS NOT NULL OR trace_id IN (SELECT trace_id FROM iterations WHERE basis = 'trace'))
      -- a trace named by the variable steady_from: its steady part only (view analysis_windows)
      AND (getvariable('steady_from')[trace_id] IS NULL
           OR EXISTS (SELECT 1 FROM analysis_windows a WHERE a.trace_id = o0.trace_id AND a.window_id = o0.window_id))
)
SELECT trace_id, count(*) FILTER (WHERE NOT graph) AS gpu_ops, greatest(count(DISTINCT window_id), 1) AS steps,
       count(*) FILTER (WHERE NOT graph AND gpu_us < cpu_us) AS shorter_than_launch,
       100.0 * count(*) FILTER (WHERE NOT graph AND gpu_us < cpu_us)
             / nullif(count(*) FILTER (WHERE NOT graph), 0) AS shorter_pct,
       median(gpu_us) FILTER (WHERE NOT graph) AS median_gpu_us,
       median(cpu_us) FILTER (WHERE NOT graph) AS median_launch_us,
       count(*) FILTER (WHERE graph) AS graph_ops
FROM o
GROUP BY trace_id;
