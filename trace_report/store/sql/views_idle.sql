-- GPU idle time between consecutive operations of a stream, broken down by cause, as Holistic
-- Trace Analysis' idle-time breakdown (hta/analyzers/breakdown_analysis.py,
-- BreakdownAnalysis._analyze_idle_time_for_stream and get_idle_time_breakdown; called through
-- TraceAnalysis.get_idle_time_breakdown in hta/trace_analysis.py). TEMP views and macros,
-- created on every connection after views.sql (gpu_ops, kernel_launches) and views_comm.sql
-- (last_step_starts). Times in microseconds on the trace's own clock.
-- Used by trace_report/analyses/common/idle.py.
--
-- The rule, per trace (rank) and stream: the GPU operations (kernel, gpu_memcpy, gpu_memset)
-- with a stream, in start order; idle_us = ts_us - the previous operation's end (ts + dur) on
-- that stream (<= 0 when they overlap, kept as HTA keeps it); the first operation of a stream has
-- no gap. Each gap is, in this order:
--   'host_wait'   the runtime call that launched the operation (same correlation) started after
--                 the previous operation ended: the CPU did not enqueue work fast enough;
--   'kernel_wait' idle_us < 30 µs (HTA's default consecutive_kernel_delay, trace_analysis.py):
--                 the delay of launching back-to-back kernels;
--   'other'       the rest (waiting on an event, a collective, ...).
-- An operation without a launch call (launch_ts_us NULL) is never 'host_wait'. (HTA's join falls
-- back to the trace's first event as the "runtime" of an operation that has a correlation and no
-- launch call, so it calls such a gap 'host_wait' when that event starts after the previous
-- operation ended: a slip of its code, not its rule; tests/analyses/common/test_idle.py shows it.)
-- The launch is the first runtime call (lowest event_id) with the operation's correlation
-- (view kernel_launches), the one gpu_op_launches uses.

-- gpu_idle_gaps_of(steps_only, hta_rounding): one row per operation that follows an earlier one
-- on its (trace_id, stream). steps_only: HTA's selection (hta/common/trace.py,
-- _filter_irrelevant_gpu_kernels): in a trace with 2+ ProfilerSteps the operations launched before
-- the last one starts (view last_step_starts; the rule of gpu_op_launches_hta.hta_kept, so these
-- are the rows of steps_only_gpu_ops), in a trace with fewer every operation, with or without a
-- launch call (HTA filters nothing there; steps_only_gpu_ops keeps only the launched ones); else
-- every GPU operation. (The rule is restated over kernel_launches rather than read from
-- steps_only_gpu_ops: binding that chain of views twice more would slow every connection.)
-- hta_rounding: HTA's rounding of fractional (ns-resolution) timestamps to whole µs, start up and
-- end down (the launch's start up too), as overlap.sql does. Ties of ts_us are ordered by
-- event_id (file order).
CREATE OR REPLACE TEMP MACRO gpu_idle_gaps_of(steps_only, hta_rounding) AS TABLE
WITH picked AS (
    SELECT g.trace_id, g.event_id, g.stream, g.ts_us, g.dur_us, l.launch_ts_us
    FROM gpu_ops g
    LEFT JOIN kernel_launches l ON l.trace_id = g.trace_id AND l.correlation = g.correlation
    LEFT JOIN last_step_starts s ON s.trace_id = g.trace_id
    WHERE NOT steps_only OR s.last_step_ts_us IS NULL OR l.launch_ts_us < s.last_step_ts_us
),
rounded AS (
    SELECT trace_id, event_id, stream,
           CASE WHEN hta_rounding THEN ceil(ts_us) ELSE ts_us END AS ts_us,
           CASE WHEN hta_rounding THEN floor(ts_us + dur_us) ELSE ts_us + dur_us END AS end_us,
           CASE WHEN hta_rounding THEN ceil(launch_ts_us) ELSE launch_ts_us END AS launch_ts_us
    FROM picked
    WHERE stream IS NOT NULL
),
ordered AS (
    SELECT *, lag(end_us) OVER (PARTITION BY trace_id, stream ORDER BY ts_us, event_id) AS prev_end_us
    FROM rounded
)
SELECT trace_id, stream, event_id, prev_end_us, ts_us, ts_us - prev_end_us AS idle_us, launch_ts_us,
       CASE WHEN launch_ts_us > prev_end_us THEN 'host_wait'
            WHEN ts_us - prev_end_us < 30 THEN 'kernel_wait'
            ELSE 'other'
       END AS idle_category
FROM ordered
WHERE prev_end_us IS NOT NULL;

CREATE OR REPLACE TEMP VIEW gpu_idle_gaps AS SELECT * FROM gpu_idle_gaps_of(false, false);

-- gpu_idle_breakdown_of(gaps): per trace, stream and category of the rows of the relation named
-- gaps (gpu_idle_gaps, or a CTE over gpu_idle_gaps_of(...): idle.py), idle_us (sum of the gaps)
-- and idle_ratio (its share of the stream's idle time; NULL when that is 0). HTA also lists
-- 'other' with 0 for a stream that has no 'other' gap (its first operation counts as an 'other'
-- gap of NaN µs); here a category without gaps has no row, nor a stream with one operation.
-- (A relation's name rather than the selection's flags: DuckDB binds a table macro's body when it
-- is created, and this one then costs nothing on the connection.)
CREATE OR REPLACE TEMP MACRO gpu_idle_breakdown_of(gaps) AS TABLE
SELECT g.trace_id, t.rank, g.stream, g.idle_category, sum(g.idle_us) AS idle_us,
       sum(g.idle_us) / nullif(sum(sum(g.idle_us)) OVER (PARTITION BY g.trace_id, g.stream), 0) AS idle_ratio
FROM query_table(gaps) g
JOIN traces t ON t.trace_id = g.trace_id
GROUP BY g.trace_id, t.rank, g.stream, g.idle_category;

CREATE OR REPLACE TEMP VIEW gpu_idle_breakdown AS SELECT * FROM gpu_idle_breakdown_of('gpu_idle_gaps');
