-- Kernel launches: the CPU runtime call and the GPU operation it launched, for the launch
-- statistics of Holistic Trace Analysis' get_cuda_kernel_launch_stats (hta/trace_analysis.py,
-- implemented in hta/analyzers/cuda_kernel_analysis.py: CudaKernelAnalysis.cuda_kernel_launch_stats,
-- outliers as its visualize_cuda_launch_kernel_info). A TEMP view created on every connection after
-- views.sql (runtime_calls, gpu_ops), so it is one plain join that binds cheaply; which calls count
-- as launches is the view launch_calls below; HTA's step selection, its rounding, the times, the
-- outliers and the statistics are the queries launches.sql and launch_stats.sql (the rule is stated
-- there), run only by trace_report/analyses/launches/compute.py. Times in microseconds on the trace's own clock.

-- One row per (runtime call, GPU operation: kernel, memcpy, memset) sharing a correlation id: HTA's
-- inner merge on correlation of the CPU events and the GPU events (in every shared trace a
-- correlation has one runtime call and at most one GPU operation).
CREATE OR REPLACE TEMP VIEW kernel_launch_pairs AS
SELECT g.trace_id, g.correlation, g.event_id, g.cat, g.name, g.stream, g.ts_us, g.dur_us,
       r.event_id AS launch_event_id, r.name AS launch_name, r.ts_us AS launch_ts_us,
       r.dur_us AS launch_dur_us, r.pid AS launch_pid, r.tid AS launch_tid
FROM runtime_calls r
JOIN gpu_ops g ON g.trace_id = r.trace_id AND g.correlation = r.correlation;

-- The runtime calls that launch a GPU operation (kernel, memcpy, memset) and which of HTA's rules
-- count them: the one definition read by launches.sql, queue.sql, slice_queue.sql and the critical
-- path (analyses/critical_path_load.py).
--   hta_stats  HTA's launch statistics (hta/analyzers/cuda_kernel_analysis.py,
--              cuda_kernel_launch_stats, include_memory_events=True): cudaLaunchKernel,
--              cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync and MTIA's
--              'runFunction - job_prep_and_submit_for_execution';
--   hta_queue  HTA's queue length and critical path (hta/common/trace_symbol_table.py,
--              TraceSymbolTable.get_runtime_launch_events_mask): those, cuLaunchKernel(Ex) (triton)
--              and hipLaunchKernel, hipExtModuleLaunchKernel, hipMemsetAsync, hipMemcpyAsync,
--              hipMemcpyWithStream (ROCm);
--   every row  a launch (`launches --all-launches`): also hipExtLaunchKernel, hipModuleLaunchKernel.
CREATE OR REPLACE TEMP VIEW launch_calls AS
SELECT * FROM (VALUES
    ('cudaLaunchKernel', true, true), ('cudaLaunchKernelExC', true, true), ('cudaMemcpyAsync', true, true),
    ('cudaMemsetAsync', true, true), ('runFunction - job_prep_and_submit_for_execution', true, true),
    ('cuLaunchKernel', false, true), ('cuLaunchKernelEx', false, true), ('hipLaunchKernel', false, true),
    ('hipExtModuleLaunchKernel', false, true), ('hipMemcpyAsync', false, true), ('hipMemsetAsync', false, true),
    ('hipMemcpyWithStream', false, true), ('hipExtLaunchKernel', false, false), ('hipModuleLaunchKernel', false, false)
) AS t(name, hta_stats, hta_queue);
