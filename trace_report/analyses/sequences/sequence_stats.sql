-- Repeated kernel sequences per rank (trace) and launching operator, over the rows of
-- sequences.sql (the CTE "calls"; analyses/sequences/__init__.py puts it in front). A sequence is the
-- operator's name and the names of the GPU operations one call of it launched, in order: HTA's
-- pattern (get_frequent_cuda_kernel_sequences: tuple([name] + kernel names sorted by ts), counted
-- per distinct tuple). Every group is returned, kept says which ones the command shows:
--   kept         an operator (not the row of operations launched outside every operator),
--                $min_length <= length <= $max_length (HTA filters num_kernels >= min_pattern_len
--                and has no maximum) and count >= $min_count (HTA keeps count 1 too).
--   count        calls of the operator that launched exactly this sequence;
--   total_us     their GPU time (HTA: "GPU kernel duration (us)"), mean_us = total_us / count;
--   pct          total_us as a percentage of the GPU time of every operation of the trace in
--                the selection (those launched outside operators included);
--   cpu_us       the calls' summed duration (HTA: "CPU op duration (us)");
--   fusible      every operation of the sequence is an elementwise or reduction kernel: one
--                fused (torch.compile / inductor) kernel could do the work of the sequence.
-- Most GPU time first (HTA orders by count: count is a column here).
SELECT rank, operator, length, count(*) AS count, sum(gpu_us) AS total_us, sum(gpu_us) / count(*) AS mean_us,
       100.0 * sum(gpu_us) / any_value(trace_gpu_us) AS pct, sum(cpu_us) AS cpu_us,
       any_value(fusible_kernels) = length AS fusible, any_value(fusible_kernels) AS fusible_kernels,
       kernels, trace_id,
       operator IS NOT NULL AND length BETWEEN $min_length AND $max_length AND count(*) >= $min_count AS kept
FROM (SELECT *, sum(gpu_us) OVER (PARTITION BY trace_id) AS trace_gpu_us FROM calls)
GROUP BY rank, trace_id, operator, length, kernels
ORDER BY rank, trace_id, total_us DESC, count DESC, operator, kernels
