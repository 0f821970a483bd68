-- One-time work inside the profiled window (trace_report.analyses.startup): start-up costs that a
-- steady training step never pays again, found from the trace alone. Four rules, each row naming
-- the event, its time and the typical time of its name:
--
-- runtime_outlier: a CUDA/HIP runtime or driver call longer than 10 ms while the GPU ran nothing
--   for most of it (so it was not waiting for the GPU), not a synchronising call
--   (host_sync_calls), every earlier call of its name as long, and, when its name has 3 calls or
--   more, a later call under a tenth of it (the name's steady cost; typical_us: the shortest later
--   call). A launch or an allocation from the caching allocator costs microseconds; what takes
--   more with an idle GPU, and only at first, is CUDA context creation (the first
--   cudaMalloc/cudaFree/cudaStreamCreate/cudaGetDevice*/cudaDeviceGetStreamPriorityRange),
--   lazy module loading or library initialisation.
-- first_call: an operator or annotation (cpu_op, user_annotation; 3 calls or more) whose first
--   call is longer than 10x the middle value of its later calls and by more than 10 ms: cuDNN/cuBLAS
--   handle creation, cudnn.benchmark autotuning, lazy initialisation, a DataLoader's first
--   __next__ starting its workers, a compiled region's first call compiling.
-- compilation: annotations of a compiler at work: TorchDynamo/Inductor (record_function
--   '<phase> (dynamo_timed)', compile_fx, fx_codegen_and_compile, call_user_compiler,
--   create_aot_dispatcher_function, compile_to_module, async_compile), Triton, nvFuser
--   (KernelExecutor::compileFusion, NVRTC). Not 'Torch-Compiled Region' nor 'CompiledFunction':
--   those run every call (their first call is first_call's).
-- module_load: cuModuleLoad*/cuLibraryLoad*/hipModuleLoad* (code loaded onto the GPU once, on
--   first use under CUDA lazy loading).
--
-- Why 10x and 10 ms: run-to-run jitter of one call is well within 2x, so 10x is an outlier by an
-- order of magnitude; 10 ms is about a thousand launches, more than a small model's whole step,
-- and under the known start-up costs (context creation: hundreds of ms; cuDNN/cuBLAS init and
-- autotuning: tens of ms to seconds), so that what is left is worth naming.
CREATE OR REPLACE TEMP VIEW startup_evidence AS
WITH rt AS (
    SELECT trace_id, event_id, cat, name, ts_us, dur_us,
           count(*) OVER (PARTITION BY trace_id, name) AS calls,
           min(dur_us) OVER (PARTITION BY trace_id, name ORDER BY ts_us, event_id
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_min_us,
           min(dur_us) OVER (PARTITION BY trace_id, name ORDER BY ts_us, event_id
                             ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later_min_us
    FROM runtime_calls
),
rt_long AS (
    SELECT r.*, r.later_min_us AS typical_us FROM rt r
    WHERE r.dur_us > 10000 AND coalesce(r.earlier_min_us, 1e18) > 10000
      AND (r.calls < 3 OR r.later_min_us * 10 < r.dur_us)
      AND NOT regexp_matches(r.name, '^(cu|hip)(Module|Library)Load')
      AND NOT EXISTS (SELECT 1 FROM host_sync_calls s WHERE s.trace_id = r.trace_id AND s.event_id = r.event_id)
),
rt_idle AS (
    SELECT r.trace_id, r.event_id, r.cat, r.name, r.ts_us, r.dur_us, r.calls, r.typical_us,
           coalesce(sum(least(r.ts_us + r.dur_us, b.end_us) - greatest(r.ts_us, b.start_us))
                    FILTER (WHERE b.trace_id IS NOT NULL), 0) AS gpu_busy_us  -- least() skips NULLs
    FROM rt_long r LEFT JOIN gpu_busy_intervals b
      ON b.trace_id = r.trace_id AND b.start_us < r.ts_us + r.dur_us AND b.end_us > r.ts_us
    GROUP BY ALL
),
ops AS (
    SELECT trace_id, event_id, cat, name, ts_us, dur_us,
           row_number() OVER (PARTITION BY trace_id, cat, name ORDER BY ts_us, event_id) AS nth,
           count(*) OVER (PARTITION BY trace_id, cat, name) AS calls
    FROM events
    WHERE cat IN ('cpu_op', 'user_annotation') AND NOT starts_with(name, 'ProfilerStep#')
),
later AS (SELECT trace_id, cat, name, median(dur_us) AS typical_us FROM ops WHERE nth > 1 GROUP BY ALL),
firsts AS (
    SELECT o.*, l.typical_us FROM ops o JOIN later l USING (trace_id, cat, name)
    WHERE o.nth = 1 AND o.calls >= 3 AND o.dur_us > 10 * l.typical_us AND o.dur_us - l.typical_us > 10000
),
compiles AS (
    SELECT trace_id, event_id, cat, name, ts_us, dur_us FROM events
    WHERE cat IN ('cpu_op', 'user_annotation') AND dur_us > 0 AND regexp_matches(name,
        '\(dynamo_timed\)|compile_fx|fx_codegen_and_compile|compile_inner|call_user_compiler'
        || '|create_aot_dispatcher_function|compile_to_module|async_compile|(?i:triton.*compil)'
        || '|compileFusion|compileKernel|(?i:nvrtc)|CompileProgram')
),
loads AS (
    SELECT trace_id, event_id, cat, name, ts_us, dur_us FROM runtime_calls
    WHERE regexp_matches(name, '^(cu|hip)(Module|Library)Load')
)
SELECT trace_id, 'runtime_outlier' AS rule, event_id, cat, name, ts_us, dur_us, ts_us + dur_us AS end_us,
       calls, typical_us
FROM rt_idle WHERE gpu_busy_us < 0.5 * dur_us
UNION ALL
SELECT trace_id, 'first_call', event_id, cat, name, ts_us, dur_us, ts_us + dur_us, calls, typical_us FROM firsts
UNION ALL
SELECT trace_id, 'compilation', event_id, cat, name, ts_us, dur_us, ts_us + dur_us, NULL, NULL FROM compiles
UNION ALL
SELECT trace_id, 'module_load', event_id, cat, name, ts_us, dur_us, ts_us + dur_us, NULL, NULL FROM loads;

-- Per trace: the profiled window (first to last event), the one-time work in it (the union of the
-- evidence intervals, nested ones counted once: one_time_us), the end of the last one-time
-- interval (startup_end_us, trace clock) and how many evidence rows. Only traces whose one-time
-- work is 10 ms or more (the same floor as the rules).
CREATE OR REPLACE TEMP VIEW startup_windows AS
WITH ev AS (
    SELECT trace_id, ts_us AS s, end_us AS e,
           max(end_us) OVER (PARTITION BY trace_id ORDER BY ts_us, end_us
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS run_end
    FROM startup_evidence
),
islands AS (
    SELECT *, sum(CASE WHEN run_end IS NULL OR s > run_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY trace_id ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
    FROM ev
),
span AS (SELECT trace_id, min(ts_us) AS window_start_us, max(ts_us + dur_us) AS window_end_us
         FROM events WHERE cat <> 'Trace' GROUP BY trace_id)
SELECT m.trace_id, p.window_start_us, p.window_end_us, max(m.e) AS startup_end_us,
       sum(m.e - m.s) AS one_time_us, sum(m.rows) AS evidence_rows
FROM (SELECT trace_id, island, min(s) AS s, max(e) AS e, count(*) AS rows FROM islands GROUP BY ALL) m
JOIN span p USING (trace_id)
GROUP BY ALL
HAVING sum(m.e - m.s) >= 10000;

-- The one-time work inside each analysis window (view analysis_windows: the ProfilerSteps, or
-- the GPU span without them), per trace: what advise's startup_in_window compares with the
-- windows' wall time.
CREATE OR REPLACE TEMP VIEW startup_in_windows AS
WITH merged AS (
    SELECT trace_id, s, e FROM (
        SELECT trace_id, island, min(s) AS s, max(e) AS e FROM (
            SELECT trace_id, s, e, sum(CASE WHEN run_end IS NULL OR s > run_end THEN 1 ELSE 0 END)
                       OVER (PARTITION BY trace_id ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
            FROM (SELECT trace_id, ts_us AS s, end_us AS e,
                         max(end_us) OVER (PARTITION BY trace_id ORDER BY ts_us, end_us
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS run_end
                  FROM startup_evidence))
        GROUP BY ALL)
    WHERE trace_id IN (SELECT trace_id FROM startup_windows)
)
SELECT w.trace_id, w.rank, sum(greatest(0, least(m.e, w.end_us) - greatest(m.s, w.ts_us))) AS one_time_us,
       max(least(m.e, w.end_us)) AS startup_end_us
FROM analysis_windows w JOIN merged m ON m.trace_id = w.trace_id AND m.s < w.end_us AND m.e > w.ts_us
GROUP BY ALL;
