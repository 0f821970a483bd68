-- Kernel duration variance per kernel name (trace-report kernel-variance): the rows of table
-- macro kernel_variance_of (store/sql/views_kernel_variance.sql, which advise reads too), most
-- time first. Parameters: $rank (NULL = every rank), $by_rank (BOOLEAN), $min_calls, $cv_threshold.
SELECT * FROM kernel_variance_of($rank, $by_rank, $min_calls, $cv_threshold)
ORDER BY rank NULLS FIRST, total_us DESC, name;
