-- Step time as the GPU sees it: the one definition of "step time", the denominator of every
-- "% of step time" (advise's savings, the report headline, breakdown's step columns) and
-- compare's step_time and gpu_time metrics. TEMP view, created on every connection after
-- views_step_numbers.sql (gpu_op_launch_times, gpu_busy_intervals). Times in microseconds on the
-- trace's own clock.
--
-- The rule. A GPU operation (kernel, memcpy, memset) belongs to the ProfilerStep its launch falls
-- in: the runtime call with the same correlation id starts inside the step's CPU span (view
-- gpu_op_launch_times, the step selection of kernel_steps). This is Holistic Trace Analysis'
-- rule (hta/common/trace.py, add_iteration: a GPU event takes the iteration of its correlated
-- CPU event) and torch-tb-profiler's (tb_plugin/torch_tb_profiler/profiler/event_parser.py,
-- StepParser._find_device_steps: the device nodes of the runtime calls inside each host-side
-- step). Why: when the CPU runs ahead of the GPU (a deep launch queue) the work launched in step N
-- runs long after ProfilerStep#N has ended on the CPU; it is still step N's work, and the step
-- is over only when it is done. torch-tb-profiler then ends each step at the later of the CPU
-- span's end and the end of its device work (StepParser._update_steps_duration); here:
--   cpu_start_us, cpu_end_us, cpu_us  the ProfilerStep's span on the CPU (ts, ts + dur);
--   gpu_start_us   the end of the GPU work of the earlier steps (the latest end of the operations
--                  launched in them), or, in the first step with GPU work, the start of the first
--                  operation launched in it (never after gpu_end_us);
--   gpu_end_us     the end of the last GPU operation launched in the step;
--   gpu_us         gpu_end_us - gpu_start_us: the GPU's step period (NULL without GPU work);
--   step_us        the longer of cpu_us and gpu_us;
--   bound_by       'gpu' when gpu_us > cpu_us (the GPU's work sets the pace), else 'cpu';
--   gpu_busy_us    the union of the GPU operations' intervals (view gpu_busy_intervals, all the
--                  trace's streams) inside [gpu_start_us, gpu_end_us): compare's gpu_time.
-- The GPU spans follow each other without overlap, so summed gpu_us is the time from the first
-- step's GPU work to the last one's end; summed step_us is at least that and at least summed
-- CPU span, so a share of it of either side's time stays within 100%.
-- One row per ProfilerStep (view steps); a trace without ProfilerStep has one per iteration
-- inferred from what repeats (view iterations: its CPU span is the iteration's window, step its
-- number), none without those (its one window is the first-to-last GPU operation span, view
-- gpu_utilization).
CREATE OR REPLACE TEMP VIEW step_time AS
WITH g AS (
    SELECT trace_id, window_id, min(ts_us) AS first_us, max(ts_us + gpu_us) AS last_end_us, count(*) AS gpu_ops
    FROM gpu_op_launch_times WHERE window_id IS NOT NULL
    GROUP BY trace_id, window_id
),
s AS (
    SELECT s.trace_id, s.step, s.event_id AS window_id, s.ts_us AS cpu_start_us, s.end_us AS cpu_end_us,
           s.dur_us AS cpu_us, g.first_us, g.last_end_us AS gpu_end_us, coalesce(g.gpu_ops, 0) AS gpu_ops,
           max(g.last_end_us) OVER (PARTITION BY s.trace_id ORDER BY s.ts_us, s.event_id
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_end_us
    FROM (SELECT trace_id, step, window_id AS event_id, ts_us, end_us, dur_us FROM iterations WHERE basis <> 'trace') s
    LEFT JOIN g ON g.trace_id = s.trace_id AND g.window_id = s.event_id
),
t AS (
    SELECT *, least(coalesce(earlier_end_us, first_us), gpu_end_us) AS gpu_start_us FROM s
),
busy AS (
    SELECT t.trace_id, t.window_id,
           sum(greatest(0.0, least(b.end_us, t.gpu_end_us) - greatest(b.start_us, t.gpu_start_us))) AS busy_us
    FROM t JOIN gpu_busy_intervals b
      ON b.trace_id = t.trace_id AND b.start_us < t.gpu_end_us AND b.end_us > t.gpu_start_us
    GROUP BY t.trace_id, t.window_id
)
SELECT t.trace_id, r.rank, t.step, t.window_id, t.cpu_start_us, t.cpu_end_us, t.cpu_us,
       t.gpu_start_us, t.gpu_end_us, t.gpu_end_us - t.gpu_start_us AS gpu_us,
       greatest(t.cpu_us, coalesce(t.gpu_end_us - t.gpu_start_us, 0.0)) AS step_us,
       CASE WHEN t.gpu_end_us - t.gpu_start_us > t.cpu_us THEN 'gpu' ELSE 'cpu' END AS bound_by,
       t.gpu_ops, CASE WHEN t.gpu_end_us IS NOT NULL THEN coalesce(b.busy_us, 0.0) END AS gpu_busy_us
FROM t JOIN traces r ON r.trace_id = t.trace_id
LEFT JOIN busy b ON b.trace_id = t.trace_id AND b.window_id = t.window_id;
