-- Kernel duration variance per kernel name: the rows of trace-report kernel-variance and the
-- evidence of advise's kernel_variance finding (one definition). Table macro
-- kernel_variance_of(sel_rank, by_rank, min_calls, cv_threshold): sel_rank NULL = every rank;
-- by_rank: one row per (rank, name), else rank NULL. Reads view gpu_ops (cat = 'kernel': GPU
-- kernels, not memcpy/memset).
-- std_us: sample standard deviation (stddev_samp, n - 1; NULL for one call, as pandas' std);
-- cv = std_us / mean_us (NULL when the mean is 0); p50_us / p95_us: quantile_cont, linear
-- interpolation between the closest ranks (numpy's default percentile).
-- variable: cv > cv_threshold AND calls >= min_calls (TraceLens' rule: CV > 1 with >= 10 calls).
-- pct_of_gpu_time: percent of the GPU time of the selection (kernels + memcpy + memset, the
-- denominator of top-kernels and flags; of that rank's with by_rank).
CREATE OR REPLACE TEMP MACRO kernel_variance_of(sel_rank, by_rank, min_calls, cv_threshold) AS TABLE
WITH sel AS (
    SELECT CASE WHEN by_rank THEN t.rank END AS rank, g.cat, g.name, g.dur_us
    FROM gpu_ops g JOIN traces t USING (trace_id)
    WHERE sel_rank IS NULL OR t.rank = sel_rank
),
tot AS (SELECT rank, sum(dur_us) AS gpu_us FROM sel GROUP BY rank),
k AS (
    SELECT rank, name, count(*) AS calls, sum(dur_us) AS total_us, avg(dur_us) AS mean_us,
           stddev_samp(dur_us) AS std_us,
           quantile_cont(dur_us, 0.5) AS p50_us, quantile_cont(dur_us, 0.95) AS p95_us, max(dur_us) AS max_us
    FROM sel WHERE cat = 'kernel' GROUP BY rank, name
)
SELECT k.rank, k.name, k.calls, k.total_us, k.mean_us, k.std_us,
       CASE WHEN k.mean_us > 0 THEN k.std_us / k.mean_us END AS cv,
       k.p50_us, k.p95_us, k.max_us,
       100.0 * k.total_us / nullif(tot.gpu_us, 0) AS pct_of_gpu_time,
       coalesce(k.calls >= min_calls AND k.std_us / nullif(k.mean_us, 0) > cv_threshold, false) AS variable
FROM k JOIN tot ON tot.rank IS NOT DISTINCT FROM k.rank;
