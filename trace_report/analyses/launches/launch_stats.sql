-- Kernel launch statistics per trace (rank) and GPU operation name, over the rows of launches.sql
-- (the CTE "launches"; analyses/launches/__init__.py puts it in front): launches, mean / p50 / p95 / max of
-- launch_us, gpu_dur_us and delay_us (percentiles interpolate linearly between the closest ranks,
-- as numpy's and pandas' default), and the counts of HTA's outliers. Most launches first.
SELECT rank, cat, name, count(*) AS launches,
       avg(launch_us) AS launch_mean_us, quantile_cont(launch_us, 0.5) AS launch_p50_us,
       quantile_cont(launch_us, 0.95) AS launch_p95_us, max(launch_us) AS launch_max_us,
       avg(gpu_dur_us) AS gpu_dur_mean_us, quantile_cont(gpu_dur_us, 0.5) AS gpu_dur_p50_us,
       quantile_cont(gpu_dur_us, 0.95) AS gpu_dur_p95_us, max(gpu_dur_us) AS gpu_dur_max_us,
       avg(delay_us) AS delay_mean_us, quantile_cont(delay_us, 0.5) AS delay_p50_us,
       quantile_cont(delay_us, 0.95) AS delay_p95_us, max(delay_us) AS delay_max_us,
       count(*) FILTER (WHERE runtime_outlier) AS runtime_outliers,
       count(*) FILTER (WHERE delay_outlier) AS delay_outliers,
       count(*) FILTER (WHERE short_kernel) AS short_kernels,
       trace_id
FROM launches
GROUP BY rank, trace_id, cat, name
ORDER BY rank, trace_id, launches DESC, name, cat
