-- What the GPU waits for, and the evidence of advise's findings (docs/analysis.md, "advise").
-- TEMP views, created on every connection after views_step_numbers.sql (gpu_busy_intervals,
-- gpu_utilization), views_comm.sql (gpu_op_launches) and views_regions.sql (region_markers).
-- Times in microseconds on the trace's own clock.

-- The windows "step time" is measured over: the ProfilerSteps, else the inferred iterations, else
-- a trace's first-to-last GPU operation span (view gpu_utilization: the figure the report headline
-- shows). While the variable steady_from is set (advise, when one-time work dominates a trace: a
-- MAP from trace_id to the end of that work), a trace it names keeps only the windows that start
-- at or after that end: its steady part.
CREATE OR REPLACE TEMP VIEW analysis_windows AS
SELECT trace_id, rank, window_id, step, basis, ts_us, end_us, wall_us, busy_us FROM gpu_utilization
WHERE ts_us >= coalesce(getvariable('steady_from')[trace_id], '-infinity'::DOUBLE);

-- Runtime calls that block the calling CPU thread until the GPU has finished earlier work
-- (CUDA Runtime API "API synchronization behavior": cudaDeviceSynchronize, cudaStreamSynchronize,
-- cudaEventSynchronize; cudaMemcpy and cudaMemset without Async are synchronous; the driver's
-- cuCtx/cuStream/cuEventSynchronize; HIP's counterparts), and the launch of a device-to-pageable
-- copy (a cudaMemcpyAsync to pageable host memory returns only once the copy is done: what
-- tensor.cpu() and .item() do, followed by a stream synchronisation).
CREATE OR REPLACE TEMP VIEW host_sync_calls AS
SELECT r.trace_id, r.event_id, r.name, r.pid, r.tid, r.ts_us, r.dur_us, r.ts_us + r.dur_us AS end_us
FROM runtime_calls r
WHERE regexp_matches(r.name, '^(cuda|hip)(Device|Stream|Event)Synchronize$|^cu(Ctx|Stream|Event)Synchronize$'
                             || '|^(cuda|hip)Memcpy(2D|3D|Peer)?$|^(cuda|hip)Memset(2D|3D)?$|^cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?$')
   OR r.event_id IN (SELECT launch_event_id FROM gpu_op_launches
                     WHERE cat = 'gpu_memcpy' AND name LIKE '%-> Pageable)%');

-- Data-loading intervals on the CPU (the breakdown's data_loading markers: enumerate(DataLoader)#...
-- and data-loading labels, view region_markers; plus the DataLoader's __next__ as a Python
-- function event of with_stack traces), merged per trace.
CREATE OR REPLACE TEMP VIEW data_loading_intervals AS  -- kept per trace; a table in advise, report
WITH d AS (
    SELECT trace_id, ts_us AS s, end_us AS e FROM region_markers
    WHERE region = 'data_loading' AND cat <> 'gpu_user_annotation'
    UNION ALL
    SELECT trace_id, ts_us, ts_us + dur_us FROM events
    WHERE cat = 'python_function' AND suffix(name, ': __next__')
      AND regexp_matches(name, 'torch/utils/data/dataloader\.py\(\d+\): __next__$')
),
m AS (
    SELECT *, max(e) OVER (PARTITION BY trace_id ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              AS run_end
    FROM d WHERE e > s
),
g AS (
    SELECT *, sum(CASE WHEN run_end IS NULL OR s > run_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY trace_id ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
    FROM m
)
SELECT trace_id, min(s) AS start_us, max(e) AS end_us FROM g GROUP BY trace_id, island;

-- Every period the whole GPU (all streams of the trace) did nothing, clipped to each analysis
-- window, with its cause. A period runs from the end of a run of GPU operations (gone_idle_us;
-- NULL before the trace's first operation) to the start of the next (NULL after the last).
-- The parts of it during which the CPU was loading data are data_loading_us; the rest is
--   'host_sync'   when the GPU went idle while a host_sync_calls call was blocking the CPU: the
--                 queue drained because the CPU waited, and nothing new was queued until it returned;
--   'launch'      when the next operation's launch call returned only after the GPU went idle: the
--                 queue was empty and the GPU waited for the CPU to launch work (HTA's "host wait",
--                 which compares the call's start, for the whole GPU here: a call under way when
--                 the GPU drains has not queued its operation yet);
--   'other'       otherwise (work queued but waiting on something else, or no launch recorded).
-- Idle before the trace's first GPU operation has no known cause ('other'); idle after its last
-- is never a sync's cost (a synchronisation at the end of a profiled window only waits for the
-- work to finish): it is 'other' too.
CREATE OR REPLACE TEMP VIEW gpu_idle_causes AS
WITH isl AS (SELECT trace_id, start_us, end_us FROM gpu_busy_intervals),
gaps AS (
    SELECT trace_id, end_us AS gone_idle_us, lead(start_us) OVER w AS resume_us FROM isl
    WINDOW w AS (PARTITION BY trace_id ORDER BY start_us)
    UNION ALL
    SELECT trace_id, NULL, min(start_us) FROM isl GROUP BY trace_id
),
-- the periods of a trace are disjoint and in order (NULL ends: before the first operation, after
-- the last), so the periods a window overlaps are consecutive: numbered here, each window's first
-- and last found by ASOF joins (the last starting before its start, the last starting before its
-- end), then joined by number (a range join of every period to every window costs their product)
numbered AS (
    SELECT *, coalesce(gone_idle_us, '-infinity'::DOUBLE) AS lo, coalesce(resume_us, 'infinity'::DOUBLE) AS hi,
           row_number() OVER (PARTITION BY trace_id ORDER BY gone_idle_us NULLS FIRST) AS n
    FROM gaps
),
window_first AS (
    SELECT w.trace_id, w.rank, w.window_id, w.ts_us, w.end_us, CASE WHEN p.hi > w.ts_us THEN p.n ELSE p.n + 1 END AS a
    FROM analysis_windows w ASOF JOIN numbered p ON p.trace_id = w.trace_id AND p.lo <= w.ts_us
),
window_pairs AS (
    SELECT f.trace_id, f.rank, f.window_id, f.ts_us, f.end_us, unnest(range(f.a, p.n + 1)) AS n
    FROM window_first f ASOF JOIN numbered p ON p.trace_id = f.trace_id AND p.lo < f.end_us
    WHERE f.ts_us < f.end_us
),
-- when the operations that start as the GPU resumes were queued: the earliest end of their launch
-- calls (an operation is in the queue once its launch call has returned)
resume_launch AS (
    SELECT g.trace_id, g.ts_us AS resume_us, min(r.ts_us + r.dur_us) AS launch_end_us
    FROM gpu_op_launches g
    JOIN runtime_calls r ON r.trace_id = g.trace_id AND r.event_id = g.launch_event_id
    SEMI JOIN gaps p ON p.trace_id = g.trace_id AND p.resume_us = g.ts_us
    GROUP BY ALL
),
pieces AS (
    SELECT p.trace_id, w.rank, w.window_id, p.gone_idle_us, p.resume_us,
           greatest(coalesce(p.gone_idle_us, w.ts_us), w.ts_us) AS s,
           least(coalesce(p.resume_us, w.end_us), w.end_us) AS e
    FROM window_pairs w JOIN numbered p USING (trace_id, n)
),
dl AS (
    SELECT q.trace_id, q.window_id, q.s,
           sum(greatest(0.0, least(d.end_us, q.e) - greatest(d.start_us, q.s))) AS data_loading_us
    FROM pieces q JOIN data_loading_intervals d
      ON d.trace_id = q.trace_id AND d.start_us < q.e AND d.end_us > q.s
    GROUP BY ALL
),
-- how far the host_sync calls started by each time reach (calls on several threads may overlap):
-- a time is inside a call when the calls started at or before it (ASOF: the last start) reach it
sync_reach AS (
    SELECT trace_id, ts_us AS s, max(end_us) OVER (PARTITION BY trace_id ORDER BY ts_us) AS reach
    FROM host_sync_calls WHERE ts_us IS NOT NULL AND end_us IS NOT NULL
),
synced AS (
    SELECT DISTINCT q.trace_id, q.gone_idle_us
    FROM pieces q ASOF JOIN sync_reach c ON c.trace_id = q.trace_id AND q.gone_idle_us >= c.s
    WHERE q.resume_us IS NOT NULL AND q.gone_idle_us <= c.reach
)
SELECT q.trace_id, q.rank, q.window_id, q.gone_idle_us, q.resume_us, q.s AS start_us, q.e AS end_us,
       q.e - q.s AS idle_us, least(coalesce(d.data_loading_us, 0.0), q.e - q.s) AS data_loading_us,
       CASE WHEN y.gone_idle_us IS NOT NULL THEN 'host_sync'
            WHEN q.gone_idle_us IS NOT NULL AND r.launch_end_us > q.gone_idle_us THEN 'launch'
            ELSE 'other' END AS cause,
       r.launch_end_us AS resume_launch_end_us
FROM pieces q
LEFT JOIN dl d ON d.trace_id = q.trace_id AND d.window_id = q.window_id AND d.s = q.s
LEFT JOIN synced y ON y.trace_id = q.trace_id AND y.gone_idle_us = q.gone_idle_us
LEFT JOIN resume_launch r ON r.trace_id = q.trace_id AND r.resume_us = q.resume_us
WHERE q.e > q.s;

-- Per rank: step time, windows, and the GPU idle split by cause (idle during data loading first,
-- then host_sync / launch / other for the rest of each period). One definition for advise's
-- data_loading, host_sync, launch_bound and low_gpu_utilization savings. step_us: step time as
-- the GPU sees it (view step_time: the longer of the CPU span and the GPU's step period), the
-- denominator of advise's "% of step time"; a window without ProfilerStep counts its wall_us.
CREATE OR REPLACE TEMP VIEW gpu_idle_by_cause AS
WITH w AS (
    SELECT a.rank, count(*) AS windows, sum(a.wall_us) AS wall_us, sum(a.busy_us) AS busy_us, min(a.basis) AS basis,
           sum(coalesce(s.step_us, a.wall_us)) AS step_us
    FROM analysis_windows a LEFT JOIN step_time s ON s.trace_id = a.trace_id AND s.window_id = a.window_id
    WHERE a.busy_us IS NOT NULL GROUP BY a.rank
),
i AS (
    SELECT rank, sum(idle_us) AS idle_us, sum(data_loading_us) AS data_loading_us,
           sum(idle_us - data_loading_us) FILTER (WHERE cause = 'host_sync') AS host_sync_us,
           sum(idle_us - data_loading_us) FILTER (WHERE cause = 'launch') AS launch_us,
           sum(idle_us - data_loading_us) FILTER (WHERE cause = 'other') AS other_us,
           count(*) FILTER (WHERE cause = 'host_sync' AND idle_us > data_loading_us) AS host_sync_periods,
           count(*) FILTER (WHERE cause = 'launch' AND idle_us > data_loading_us) AS launch_periods
    FROM gpu_idle_causes GROUP BY rank
)
SELECT w.rank, w.basis, w.windows, w.wall_us, w.busy_us, w.step_us,
       coalesce(i.idle_us, 0.0) AS idle_us, coalesce(i.data_loading_us, 0.0) AS data_loading_idle_us,
       coalesce(i.host_sync_us, 0.0) AS host_sync_idle_us, coalesce(i.launch_us, 0.0) AS launch_idle_us,
       coalesce(i.other_us, 0.0) AS other_idle_us,
       coalesce(i.host_sync_periods, 0) AS host_sync_periods, coalesce(i.launch_periods, 0) AS launch_periods
FROM w LEFT JOIN i USING (rank);

-- Where a host call was made: the innermost user annotation (record_function, such as TorchRec's
-- '## sparse_data_dist ##'; ProfilerStep#N left out) or nn.Module event that encloses it on its
-- own thread; NULL when none does. For the calls of host_sync_calls and the launches of pageable
-- copies alone: a range join of every runtime call to every annotation costs their product.
CREATE OR REPLACE TEMP VIEW host_call_where AS
WITH c AS (
    SELECT trace_id, event_id, pid, tid, ts_us FROM host_sync_calls
    UNION
    SELECT l.trace_id, l.launch_event_id, l.launch_pid, l.launch_tid, l.launch_ts_us FROM gpu_op_launches l
    WHERE l.cat = 'gpu_memcpy' AND l.name LIKE '%Pageable%'
),
m AS (
    SELECT trace_id, pid, tid, ts_us, ts_us + dur_us AS end_us, name FROM events
    WHERE (cat = 'user_annotation' AND name NOT LIKE 'ProfilerStep#%')
       OR (cat = 'python_function' AND name LIKE 'nn.Module: %')
)
SELECT c.trace_id, c.event_id, arg_max(m.name, m.ts_us) AS enclosing
FROM c JOIN m ON m.trace_id = c.trace_id AND m.pid = c.pid AND m.tid = c.tid
             AND m.ts_us <= c.ts_us AND m.end_us >= c.ts_us
GROUP BY ALL;

-- top_name_of(rows): "the name with the most time, its count and where it sat", one definition
-- for advise's evidence. rows names a relation with columns rank, finding, name, dur_us and
-- enclosing (host_call_where's annotation or module, NULL when none); one row per (rank, finding):
-- top_name (the name with the most dur_us, the first by name among equals), top_n (its rows),
-- top_us (its dur_us) and top_where (the enclosing with the most of the top name's dur_us, the
-- first by name among equals; NULL when none encloses it).
CREATE OR REPLACE TEMP MACRO top_name_of(rows) AS TABLE
WITH r AS (SELECT rank, finding, name, dur_us, enclosing FROM query_table(rows)),
by_name AS (SELECT rank, finding, name, count(*) AS n, sum(dur_us) AS us FROM r GROUP BY ALL),
top AS (SELECT rank, finding, arg_max({'name': name, 'n': n, 'us': us}, (us, name)) AS t FROM by_name GROUP BY ALL),
wh AS (
    SELECT w.rank, w.finding, arg_max(w.enclosing, (w.us, w.enclosing)) AS top_where
    FROM (SELECT rank, finding, name, enclosing, sum(dur_us) AS us FROM r WHERE enclosing IS NOT NULL
          GROUP BY ALL) w
    JOIN top t ON t.rank = w.rank AND t.finding = w.finding AND t.t.name = w.name
    GROUP BY ALL
)
SELECT t.rank, t.finding, t.t.name AS top_name, t.t.n AS top_n, t.t.us AS top_us, wh.top_where
FROM top t LEFT JOIN wh ON wh.rank = t.rank AND wh.finding = t.finding;

-- Synchronising calls per rank inside the analysis windows: how many, and the CPU time they
-- blocked (the evidence of host_sync; the cost is the GPU idle that follows, gpu_idle_by_cause).
-- top_call: the call name with the most blocked time, with its calls (top_calls), time (top_us)
-- and where it was made most (top_where), as top_name_of gives them.
CREATE OR REPLACE TEMP VIEW host_syncs_by_rank AS
WITH c AS (
    SELECT w.rank, 'host_sync' AS finding, c.name, least(c.end_us, w.end_us) - greatest(c.ts_us, w.ts_us) AS dur_us,
           h.enclosing
    FROM host_sync_calls c
    JOIN analysis_windows w ON w.trace_id = c.trace_id AND c.ts_us >= w.ts_us AND c.ts_us < w.end_us
    LEFT JOIN host_call_where h ON h.trace_id = c.trace_id AND h.event_id = c.event_id
)
SELECT n.rank, sum(n.n) AS calls, sum(n.us) AS blocked_us, any_value(t.top_name) AS top_call,
       any_value(t.top_n) AS top_calls, any_value(t.top_us) AS top_us, any_value(t.top_where) AS top_where
FROM (SELECT rank, name, count(*) AS n, sum(dur_us) AS us FROM c GROUP BY ALL) n JOIN top_name_of('c') t USING (rank)
GROUP BY n.rank;

-- Pageable host<->device copies per rank (CUPTI names a copy's host side Pageable when the host
-- memory is not page-locked: "Memcpy HtoD (Pageable -> Device)"), over the whole trace as
-- the GPU time (view gpu_time) is. top_name: the copy name with the most GPU time, with its
-- copies (top_copies), time (top_us) and where its launches were made most (top_where), as
-- top_name_of gives them.
CREATE OR REPLACE TEMP VIEW pageable_copies_by_rank AS
WITH c AS (
    SELECT t.rank, 'pageable_memcpy' AS finding, g.name, g.dur_us, h.enclosing
    FROM gpu_ops g JOIN traces t USING (trace_id)
    LEFT JOIN gpu_op_launches l ON l.trace_id = g.trace_id AND l.event_id = g.event_id
    LEFT JOIN host_call_where h ON h.trace_id = l.trace_id AND h.event_id = l.launch_event_id
    WHERE g.cat = 'gpu_memcpy' AND g.name LIKE '%Pageable%'
)
SELECT n.rank, sum(n.n) AS copies, sum(n.us) AS pageable_us, any_value(t.top_name) AS top_name,
       any_value(t.top_n) AS top_copies, any_value(t.top_us) AS top_us, any_value(t.top_where) AS top_where
FROM (SELECT rank, name, count(*) AS n, sum(dur_us) AS us FROM c GROUP BY ALL) n JOIN top_name_of('c') t USING (rank)
GROUP BY n.rank;
