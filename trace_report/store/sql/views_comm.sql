-- Communication, computation and memory GPU operations, and the step selection HTA analyses.
-- TEMP views, created on every connection. Times in microseconds on the trace's own clock.
-- Used by trace_report/analyses/{overlap,queue,collectives}.py (docs/analysis.md).

-- Every distinct GPU operation name (kernel, memcpy, memset) with its kind, by HTA's patterns
-- (hta/common/types.py: CommunicateKernelGroupingPattern, MemoryKernelGroupingPattern,
-- ComputeKernelGroupingPattern; Python re.match, so a pattern without '^' may still only match
-- at the start): 'communication' first, then 'memory', then 'computation' unless the name is one
-- of the non-compute shapes, else 'other'. The patterns run once per distinct name (a dozen on
-- a 1M-event trace): as a plain subquery, DuckDB pushed a filter on kind (overlap.sql, the
-- report's communication check) below the DISTINCT, so they ran on every GPU operation; a
-- MATERIALIZED CTE is computed whole first.
CREATE OR REPLACE TEMP VIEW gpu_op_kind_names AS
WITH kinds AS MATERIALIZED (
SELECT name,
       CASE
           WHEN regexp_matches(name, '^(nccl|hip|hccl)|ncclKernel') THEN 'communication'
           WHEN regexp_matches(name, '^((hip)?Memcpy|(hip)?Memset|dma)') THEN 'memory'
           WHEN regexp_matches(name, '^(nccl|hip|hccl|runFunction|job_exe|packet|pe_exe|cpum_exe_subgraph|collective_subgraph_execution|Stream Wait Event)|Memcpy|Memset|dma|Sync|^cuda.*LaunchKernel')
               THEN 'other'
           ELSE 'computation'
       END AS kind
FROM (SELECT DISTINCT name FROM gpu_ops))
SELECT name, kind FROM kinds;

CREATE OR REPLACE TEMP VIEW gpu_op_kinds AS
SELECT g.*, n.kind FROM gpu_ops g JOIN gpu_op_kind_names n USING (name);

-- HTA's selection of a trace (hta/common/trace.py, _filter_irrelevant_gpu_kernels with
-- include_last_profiler_step=False): CPU-side events that start before the last ProfilerStep
-- starts, and the GPU operations launched by them (runtime call with the same correlation).
-- A trace with fewer than two ProfilerSteps keeps every GPU operation that has a launch (HTA
-- would keep none: its analyses are empty on one-step traces such as param_dlrm_kineto_v100x8).
CREATE OR REPLACE TEMP VIEW last_step_starts AS
SELECT trace_id, max(ts_us) AS last_step_ts_us FROM steps GROUP BY trace_id HAVING count(*) >= 2;

-- The launch of each GPU operation: the runtime call of its correlation with the lowest event id
-- (found first, then joined: DuckDB turned a row_number() = 1 over the joined rows into an
-- arg_min over a struct of every column, args included, which is slower).
CREATE OR REPLACE TEMP VIEW gpu_op_launches AS  -- kept per trace; a table in advise, report
SELECT g.*, r.event_id AS launch_event_id, r.name AS launch_name, r.ts_us AS launch_ts_us,
       r.pid AS launch_pid, r.tid AS launch_tid
FROM gpu_op_kinds g
JOIN (SELECT trace_id, correlation, min(event_id) AS event_id FROM runtime_calls
      WHERE correlation IS NOT NULL GROUP BY trace_id, correlation) f
  ON f.trace_id = g.trace_id AND f.correlation = g.correlation
JOIN runtime_calls r ON r.trace_id = f.trace_id AND r.event_id = f.event_id;

-- hta_kept: the operation is in HTA's selection (the one definition; steps_only_gpu_ops keeps
-- these rows, gpu_op_launch_times shows the flag).
CREATE OR REPLACE TEMP VIEW gpu_op_launches_hta AS
SELECT g.*, coalesce(l.last_step_ts_us IS NULL OR g.launch_ts_us < l.last_step_ts_us, false) AS hta_kept
FROM gpu_op_launches g LEFT JOIN last_step_starts l USING (trace_id);

CREATE OR REPLACE TEMP VIEW steps_only_gpu_ops AS
SELECT * EXCLUDE (hta_kept) FROM gpu_op_launches_hta WHERE hta_kept;

-- comp_comm_overlap_of(ops, hta_rounding): computation/communication overlap per trace of the
-- relation named ops (columns trace_id, kind, ts_us, dur_us: rows of gpu_op_kinds, or of a
-- selection of them), as HTA's get_comm_comp_overlap (hta/analyzers/communication_analysis.py):
-- comp_us and comm_us, the union of each kind's intervals; overlap_us, the time both run at once.
-- hta_rounding: HTA's rounding of fractional timestamps (start up, end down, to whole µs). The one
-- definition of overlap.sql (the overlap command) and advise's exposed communication (over the
-- GPU operations of its windows, view window_gpu_ops).
CREATE OR REPLACE TEMP MACRO comp_comm_overlap_of(ops, hta_rounding) AS TABLE
WITH sel AS (
    SELECT p.trace_id, p.kind,
           CASE WHEN hta_rounding THEN ceil(p.ts_us) ELSE p.ts_us END AS s,
           CASE WHEN hta_rounding THEN floor(p.ts_us + p.dur_us) ELSE p.ts_us + p.dur_us END AS e
    FROM query_table(ops) p
    WHERE p.kind IN ('computation', 'communication')
),
-- Merge each kind's intervals: a new run starts where an interval starts after every earlier
-- one has ended (HTA's merge_kernel_intervals).
flagged AS (
    SELECT *, coalesce(s > max(e) OVER (PARTITION BY trace_id, kind ORDER BY s, e
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), true) AS new_run
    FROM sel
),
runs AS (
    SELECT *, sum(new_run::INTEGER) OVER (PARTITION BY trace_id, kind ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS run_no
    FROM flagged
),
merged AS (SELECT trace_id, kind, min(s) AS s, max(e) AS e FROM runs GROUP BY trace_id, kind, run_no),
-- Sweep: communication adds 1, computation 2; state 3 = both running.
edges AS (
    SELECT trace_id, s AS t, CASE kind WHEN 'communication' THEN 1 ELSE 2 END AS d FROM merged
    UNION ALL
    SELECT trace_id, e, CASE kind WHEN 'communication' THEN -1 ELSE -2 END FROM merged
),
sweep AS (
    SELECT trace_id, sum(d) OVER w AS state, lead(t) OVER w - t AS seg_us
    FROM edges WINDOW w AS (PARTITION BY trace_id ORDER BY t, d ROWS UNBOUNDED PRECEDING)
),
busy AS (
    SELECT trace_id,
           coalesce(sum(e - s) FILTER (WHERE kind = 'computation'), 0) AS comp_us,
           coalesce(sum(e - s) FILTER (WHERE kind = 'communication'), 0) AS comm_us
    FROM merged GROUP BY trace_id
),
both_busy AS (
    SELECT trace_id, coalesce(sum(seg_us) FILTER (WHERE state = 3), 0) AS overlap_us
    FROM sweep GROUP BY trace_id
)
SELECT b.trace_id, b.comp_us, b.comm_us, o.overlap_us FROM busy b JOIN both_busy o USING (trace_id);
