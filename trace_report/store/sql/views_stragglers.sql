-- Step time per rank and how far each rank is behind the fastest on the same ProfilerStep
-- (same step number, same run): the rows of trace-report breakdown --stragglers and advise's
-- stragglers finding (one definition). step_us: the ProfilerStep's duration on the CPU (what the
-- training loop waited for, collectives included); behind_us / behind_pct: more than the fastest
-- rank of that step; spread_us / spread_pct: slowest - fastest; slowest: the slowest of several
-- ranks; ranks: how many ranks ran that step.
CREATE OR REPLACE TEMP VIEW step_stragglers AS
WITH s AS (
    SELECT t.rank, coalesce(t.run_id, '') AS job, s.step, s.dur_us AS step_us, s.trace_id
    FROM steps s JOIN traces t USING (trace_id)
),
w AS (
    SELECT *, min(step_us) OVER g AS fastest_us, max(step_us) OVER g AS slowest_us, count(*) OVER g AS ranks
    FROM s WINDOW g AS (PARTITION BY job, step)
)
SELECT job, step, rank, step_us, step_us - fastest_us AS behind_us,
       100.0 * (step_us - fastest_us) / nullif(fastest_us, 0) AS behind_pct,
       slowest_us - fastest_us AS spread_us, 100.0 * (slowest_us - fastest_us) / nullif(fastest_us, 0) AS spread_pct,
       ranks > 1 AND step_us = slowest_us AS slowest, ranks, trace_id
FROM w;
