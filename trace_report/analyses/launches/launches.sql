-- One row per kernel launch of the selection: the runtime call, the GPU operation (kernel, memcpy,
-- memset) it launched, launch_us, gpu_dur_us, delay_us and HTA's outlier flags. The rule is
-- Holistic Trace Analysis' get_cuda_kernel_launch_stats (hta/analyzers/cuda_kernel_analysis.py,
-- CudaKernelAnalysis.cuda_kernel_launch_stats; outliers as visualize_cuda_launch_kernel_info):
--   launch calls   those of view launch_calls (views_launches.sql) with hta_stats: cudaLaunchKernel,
--                  cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync, MTIA's runFunction.
--                  cuLaunchKernel (triton), cuLaunchKernelEx and the hip* calls are not HTA's:
--                  $all_launches adds them (every row of launch_calls).
--   pairs          every runtime call and every GPU operation sharing the correlation of a launch
--                  call (view kernel_launch_pairs: HTA's inner merge on correlation).
--   launch_us      the runtime call's duration (HTA: cpu_duration);
--   gpu_dur_us     the GPU operation's duration (gpu_duration);
--   delay_us       GPU start - runtime call end, clipped to 0 (launch_delay);
--   runtime_outlier  launch_us > $runtime_cutoff_us (HTA's runtime_cutoff, default 50 µs);
--   delay_outlier    delay_us > $launch_delay_cutoff_us (launch_delay_cutoff, default 100 µs);
--   short_kernel     launch_us <= $runtime_cutoff_us and gpu_dur_us < launch_us (HTA's "short GPU
--                    kernels": the GPU ran shorter than the call that launched it).
-- $steps_only: HTA's selection (hta/common/trace.py, _filter_irrelevant_gpu_kernels with
-- include_last_profiler_step=False): in a trace with 2+ ProfilerSteps (view last_step_starts) the
-- pairs whose runtime call starts before the last ProfilerStep starts; else every pair.
-- $hta_rounding: HTA's rounding of fractional (ns-resolution) timestamps
-- (hta/common/trace_parser.py, round_down_time_stamps): start up, end = ts + dur down,
-- dur = end - start; the last step's start is rounded up too.
-- Parameters: $rank (NULL = every rank), $steps_only, $hta_rounding, $all_launches,
-- $runtime_cutoff_us, $launch_delay_cutoff_us. hta_launch: the correlation has one of HTA's launch
-- calls; in_steps: the launch is in HTA's step selection (analyses/launches/__init__.py counts what
-- $all_launches and $steps_only changed from them). No ORDER BY: launch_stats.sql reads it as a CTE.
WITH launchers AS (
    SELECT r.trace_id, r.correlation, bool_or(n.hta_stats) AS hta_launch
    FROM runtime_calls r JOIN launch_calls n ON n.name = r.name
    WHERE r.correlation IS NOT NULL
    GROUP BY r.trace_id, r.correlation
),
picked AS (
    SELECT p.*, c.hta_launch,
           CASE WHEN $hta_rounding THEN ceil(p.launch_ts_us) ELSE p.launch_ts_us END AS l_start,
           CASE WHEN $hta_rounding THEN floor(p.launch_ts_us + p.launch_dur_us) - ceil(p.launch_ts_us)
                ELSE p.launch_dur_us END AS launch_us,
           CASE WHEN $hta_rounding THEN ceil(p.ts_us) ELSE p.ts_us END AS g_start,
           CASE WHEN $hta_rounding THEN floor(p.ts_us + p.dur_us) - ceil(p.ts_us) ELSE p.dur_us END AS gpu_dur_us,
           CASE WHEN $hta_rounding THEN ceil(s.last_step_ts_us) ELSE s.last_step_ts_us END AS last_step
    FROM kernel_launch_pairs p
    JOIN launchers c ON c.trace_id = p.trace_id AND c.correlation = p.correlation
    LEFT JOIN last_step_starts s ON s.trace_id = p.trace_id
),
timed AS (  -- HTA's arithmetic, in its order: ts_gpu - ts_cpu - dur_cpu (durations not from ts + dur - ts)
    SELECT *, greatest(g_start - l_start - launch_us, 0) AS delay_us,
           last_step IS NULL OR l_start < last_step AS in_steps
    FROM picked
)
SELECT tr.rank, t.correlation, t.cat, t.name, t.launch_name, t.l_start AS launch_ts_us, t.launch_us,
       t.gpu_dur_us, t.delay_us,
       t.launch_us > $runtime_cutoff_us AS runtime_outlier,
       t.delay_us > $launch_delay_cutoff_us AS delay_outlier,
       t.launch_us <= $runtime_cutoff_us AND t.gpu_dur_us < t.launch_us AS short_kernel,
       t.trace_id, t.event_id, t.stream, t.hta_launch, t.in_steps
FROM timed t JOIN traces tr ON tr.trace_id = t.trace_id
WHERE ($rank IS NULL OR tr.rank = $rank) AND (t.hta_launch OR $all_launches) AND (t.in_steps OR NOT $steps_only)
