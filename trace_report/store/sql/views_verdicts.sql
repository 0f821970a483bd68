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

-- The GPU operations (kernel, memcpy, memset) of the analysis windows: all that advise's GPU-time
-- findings count (pageable copies, exposed communication, layout conversions, tensor cores,
-- gpu_bound's kernel groups and fusible chains, eager softmax, the zeroing kernels of
-- grad_not_set_to_none) and the GPU time their "% of GPU time" divides by, so that the GPU work
-- and the time it is divided by are those of the same windows. (The whole trace's GPU time over
-- its steps' time counts the work launched before, between and after them, start-up included, and
-- a share of step time could pass 100%.) The rule is step_time's (views_step_time.sql): an
-- operation belongs to the window its launch falls in, the runtime call with its correlation
-- starting inside the window on the window's process (view gpu_op_launch_times, window_id), as
-- Holistic Trace Analysis (hta/common/trace.py, add_iteration) and torch-tb-profiler
-- (StepParser._find_device_steps) assign GPU work to steps: the work launched in step N and run
-- after ProfilerStep#N has ended on the CPU is still step N's, and step time (the longer of the
-- CPU span and the GPU's period of the work launched in it) covers it. The GPU's start would
-- instead give a step the tail of the previous step's queue. Besides:
--   a trace whose one window is its GPU span (basis 'gpu_span': no ProfilerStep, no inferred
--   iteration) counts every operation, the operations that span is made of (window_id -1);
--   in a trace where no operation has a launch call, an operation belongs to the window its start
--   falls in; where others have one, an operation without is the tail of a queue launched before
--   the trace began, in no window (kernel_steps' rule).
-- While steady_from is set, analysis_windows holds the steady part only, and so does this view.
-- Launch columns: the launch call of view gpu_op_launches (NULL without one).
CREATE OR REPLACE TEMP VIEW window_gpu_ops AS
WITH w AS MATERIALIZED (SELECT trace_id, window_id, basis, ts_us, end_us FROM analysis_windows),
whole AS (SELECT DISTINCT trace_id FROM w WHERE basis = 'gpu_span'),
launching AS (SELECT DISTINCT trace_id FROM gpu_op_launches),
placed AS (
    SELECT o.trace_id, o.event_id, o.window_id FROM gpu_op_launch_times o
    SEMI JOIN w ON w.trace_id = o.trace_id AND w.window_id = o.window_id
    WHERE o.trace_id NOT IN (SELECT trace_id FROM whole)
    UNION ALL
    SELECT g.trace_id, g.event_id, w.window_id
    FROM gpu_ops g ASOF JOIN w ON w.trace_id = g.trace_id AND g.ts_us >= w.ts_us
    WHERE g.ts_us < w.end_us AND g.trace_id NOT IN (SELECT trace_id FROM whole)
      AND g.trace_id NOT IN (SELECT trace_id FROM launching)
    UNION ALL
    SELECT trace_id, event_id, -1 FROM gpu_ops WHERE trace_id IN (SELECT trace_id FROM whole)
)
SELECT g.trace_id, g.event_id, g.cat, g.name, g.stream, g.correlation, g.ts_us, g.dur_us, p.window_id,
       l.launch_event_id, l.launch_pid, l.launch_tid, l.launch_ts_us
FROM placed p
JOIN gpu_ops g ON g.trace_id = p.trace_id AND g.event_id = p.event_id
LEFT JOIN gpu_op_launches l ON l.trace_id = p.trace_id AND l.event_id = p.event_id;

-- window_gpu_ops per trace and name, in the shape of gpu_op_names (ops, summed dur_us): the
-- relation advise's GPU time (gpu_time_of), kernel classes and kernel groups read.
CREATE OR REPLACE TEMP VIEW window_gpu_op_names AS
SELECT trace_id, cat, name, count(*) AS ops, sum(dur_us) AS dur_us FROM window_gpu_ops GROUP BY trace_id, cat, name;

-- Per rank: how much of the analysis windows the trace recorded anything in. recorded_us: the
-- summed durations of the events inside them (CPU operators, Python functions, runtime and driver
-- calls, GPU operations; each clipped to its window; annotations such as the ProfilerStep itself
-- are ranges, not work, and are left out), at least the time their union covers (nested or
-- concurrent events count twice): when even that is a sliver of the windows (advise:
-- Thresholds.min_recorded_pct), the profile shows nothing of the rest and its idle time has no
-- cause the trace can show. A rank whose windows hold no such event has no row.
CREATE OR REPLACE TEMP VIEW window_recorded AS
WITH e AS (
    SELECT trace_id, ts_us, ts_us + dur_us AS end_us FROM events
    WHERE cat IN ('cpu_op', 'python_function', 'cuda_runtime', 'cuda_driver', 'kernel', 'gpu_memcpy', 'gpu_memset')
      AND dur_us > 0
)
SELECT w.rank, sum(least(e.end_us, w.end_us) - greatest(e.ts_us, w.ts_us)) AS recorded_us
FROM analysis_windows w JOIN e ON e.trace_id = w.trace_id AND e.ts_us < w.end_us AND e.end_us > w.ts_us
GROUP BY w.rank;

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
-- A window that begins with the GPU idle before the trace's first GPU operation waits for the CPU
-- the same way when nothing was queued at its start (the first operation's launch call returned
-- after the window began): 'launch' from the window's start. Why: the GPU runs only what the CPU
-- has queued, so an idle GPU with an empty queue inside a step is waiting for the CPU, whether the
-- CPU is launching, running operators or Python (a pipeline's preprocessing before the model's
-- first kernel); advise's launch_bound/cpu_bound split says which. Before a window, or with the
-- first operation queued before it began, that idle has no known cause ('other'). Idle after the
-- trace's last operation is never a sync's cost (a synchronisation at the end of a profiled window
-- only waits for the work to finish): it is 'other' too.
-- cpu_wait_us: of a 'launch' period, the part before the launch call of the operation that ends
-- it began: the GPU idle with nothing queued and no launch under way, the CPU running operators,
-- Python or other host work (the rest is the launch call itself). A deep launch queue elsewhere
-- does not shorten it: the CPU-bound time of advise's cpu_bound.
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
-- calls (an operation is in the queue once its launch call has returned), and when that call began
resume_launch AS (
    SELECT g.trace_id, g.ts_us AS resume_us, min(r.ts_us + r.dur_us) AS launch_end_us,
           arg_min(r.ts_us, r.ts_us + r.dur_us) AS launch_start_us
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
            WHEN r.launch_end_us > coalesce(q.gone_idle_us, q.s) THEN 'launch'
            ELSE 'other' END AS cause,
       r.launch_end_us AS resume_launch_end_us,
       CASE WHEN y.gone_idle_us IS NULL AND r.launch_end_us > coalesce(q.gone_idle_us, q.s)
            THEN greatest(0.0, least(r.launch_start_us, q.e) - q.s) ELSE 0.0 END AS cpu_wait_us
FROM pieces q
LEFT JOIN dl d ON d.trace_id = q.trace_id AND d.window_id = q.window_id AND d.s = q.s
LEFT JOIN synced y ON y.trace_id = q.trace_id AND y.gone_idle_us = q.gone_idle_us
LEFT JOIN resume_launch r ON r.trace_id = q.trace_id AND r.resume_us = q.resume_us
WHERE q.e > q.s;

-- Per rank: step time, windows, and the GPU idle split by cause (idle during data loading first,
-- then host_sync / launch / other for the rest of each period; cpu_wait_idle_us: the part of the
-- launch idle with no launch call under way, cpu_wait_periods and cpu_wait_max_us its periods
-- and the longest). One definition for advise's data_loading, host_sync, launch_bound, cpu_bound
-- and low_gpu_utilization savings. step_us: step time as
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
           count(*) FILTER (WHERE cause = 'launch' AND idle_us > data_loading_us) AS launch_periods,
           sum(greatest(0.0, cpu_wait_us - data_loading_us)) FILTER (WHERE cause = 'launch') AS cpu_wait_us,
           count(*) FILTER (WHERE cause = 'launch' AND cpu_wait_us > data_loading_us) AS cpu_wait_periods,
           max(cpu_wait_us - data_loading_us) FILTER (WHERE cause = 'launch') AS cpu_wait_max_us
    FROM gpu_idle_causes GROUP BY rank
)
SELECT w.rank, w.basis, w.windows, w.wall_us, w.busy_us, w.step_us,
       coalesce(i.idle_us, 0.0) AS idle_us, coalesce(i.data_loading_us, 0.0) AS data_loading_idle_us,
       coalesce(i.host_sync_us, 0.0) AS host_sync_idle_us, coalesce(i.launch_us, 0.0) AS launch_idle_us,
       coalesce(i.other_us, 0.0) AS other_idle_us,
       coalesce(i.host_sync_periods, 0) AS host_sync_periods, coalesce(i.launch_periods, 0) AS launch_periods,
       coalesce(i.cpu_wait_us, 0.0) AS cpu_wait_idle_us, coalesce(i.cpu_wait_periods, 0) AS cpu_wait_periods,
       greatest(coalesce(i.cpu_wait_max_us, 0.0), 0.0) AS cpu_wait_max_us
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
-- memory is not page-locked: "Memcpy HtoD (Pageable -> Device)"), inside the analysis windows as
-- advise's GPU time is (view window_gpu_ops). top_name: the copy name with the most GPU time, with
-- its copies (top_copies), time (top_us) and where its launches were made most (top_where), as
-- top_name_of gives them.
CREATE OR REPLACE TEMP VIEW pageable_copies_by_rank AS
WITH c AS (
    SELECT t.rank, 'pageable_memcpy' AS finding, g.name, g.dur_us, h.enclosing
    FROM window_gpu_ops g JOIN traces t USING (trace_id)
    LEFT JOIN host_call_where h ON h.trace_id = g.trace_id AND h.event_id = g.launch_event_id
    WHERE g.cat = 'gpu_memcpy' AND g.name LIKE '%Pageable%'
)
SELECT n.rank, sum(n.n) AS copies, sum(n.us) AS pageable_us, any_value(t.top_name) AS top_name,
       any_value(t.top_n) AS top_copies, any_value(t.top_us) AS top_us, any_value(t.top_where) AS top_where
FROM (SELECT rank, name, count(*) AS n, sum(dur_us) AS us FROM c GROUP BY ALL) n JOIN top_name_of('c') t USING (rank)
GROUP BY n.rank;

-- What the CPU did while the GPU waited for a launch (gpu_idle_causes' 'launch' periods), on the
-- thread whose launch ended each period: advise's launch_bound vs cpu_bound. Each moment is given
-- to the innermost event over it on that thread (cpu_op, python_function, runtime call; none:
-- Python outside any recorded event), and each event's (or stretch's) time in the periods is
--   launch     a launch runtime call: one that launched a GPU operation (gpu_op_launches) or a
--              cudaLaunchKernel/hipExtModuleLaunchKernel/cuLaunchKernel/cudaGraphLaunch/
--              Memcpy*Async/Memset*Async-like name, whatever its length;
--   dispatch   any other event or stretch of at most dispatch_us: the fixed cost of issuing one
--              operation (Python binding, autograd and ATen dispatch, allocator, attribute
--              queries); and the own time of torch.compile's wrappers (CompiledFunction,
--              CompiledFunctionBackward, '## Call CompiledFxGraph', 'Torch-Compiled Region'),
--              whose generated Python launches the compiled kernels one by one;
--   op         an operator's own time longer than that (host-side work inside it: a library's
--              algorithm search, a CPU kernel);
--   runtime    another runtime call longer than that (cudaFree/hipFree, cudaMalloc, module loads);
--   python     a Python function's own time or a stretch outside every event longer than that.
-- One row per rank: cpu_us (the periods' time), launch_us, dispatch_us, op_us, runtime_us,
-- python_us, launches, and top_name, top_kind, top_n, top_us: the name with the most op, runtime
-- or python time ('host code outside recorded events' for stretches outside every event: Python,
-- or untraced host code in an nsys import) and its kind. The rule's reason and sources: advise's
-- Thresholds (launch_path_pct, dispatch_us).
CREATE OR REPLACE TEMP MACRO launch_cpu_split_of(dispatch_us) AS TABLE
WITH p AS (
    SELECT q.trace_id, q.rank, q.start_us AS ps, q.end_us AS pe,
           arg_min(l.launch_pid, l.launch_ts_us) AS pid, arg_min(l.launch_tid, l.launch_ts_us) AS tid
    FROM gpu_idle_causes q JOIN gpu_op_launches l ON l.trace_id = q.trace_id AND l.ts_us = q.resume_us
    WHERE q.cause = 'launch'
    GROUP BY ALL
),
e AS (
    SELECT e.trace_id, e.event_id, e.cat, e.name, e.pid, e.tid, e.ts_us, e.ts_us + e.dur_us AS end_us
    FROM events e SEMI JOIN (SELECT DISTINCT trace_id, pid, tid FROM p) h
      ON h.trace_id = e.trace_id AND h.pid = e.pid AND h.tid = e.tid
    WHERE e.cat IN ('cpu_op', 'cuda_runtime', 'cuda_driver', 'python_function') AND e.dur_us > 0
),
pe AS (  -- the events over the periods, clipped to them
    SELECT p.trace_id, p.rank, p.pid, p.tid, p.ps, e.event_id, e.cat, e.name,
           greatest(e.ts_us, p.ps) AS s, least(e.end_us, p.pe) AS t
    FROM p JOIN e ON e.trace_id = p.trace_id AND e.pid = p.pid AND e.tid = p.tid AND e.ts_us < p.pe AND e.end_us > p.ps
),
b AS (
    SELECT trace_id, rank, pid, tid, ps, s AS x FROM pe
    UNION SELECT trace_id, rank, pid, tid, ps, t FROM pe
    UNION SELECT trace_id, rank, pid, tid, ps, ps FROM p
    UNION SELECT trace_id, rank, pid, tid, ps, pe FROM p
),
seg AS (  -- the pieces between consecutive boundaries
    SELECT * FROM (SELECT *, lead(x) OVER (PARTITION BY trace_id, pid, tid, ps ORDER BY x) AS y FROM b) WHERE y > x
),
inner_ AS (  -- the innermost event over each piece: the latest started, then the shortest
    SELECT s.trace_id, s.rank, s.x, s.y - s.x AS us,
           arg_max({'id': pe.event_id, 'cat': pe.cat, 'name': pe.name}, (pe.s, -pe.t, pe.event_id)) AS ev
    FROM seg s LEFT JOIN pe ON pe.trace_id = s.trace_id AND pe.pid = s.pid AND pe.tid = s.tid AND pe.ps = s.ps
      AND pe.s <= s.x AND pe.t >= s.y
    GROUP BY ALL
),
own AS (  -- each event's own time in the periods; each stretch outside every event on its own
    SELECT trace_id, rank, coalesce(ev.id, -1) AS id, CASE WHEN ev.id IS NULL THEN x END AS x, ev.cat AS cat,
           ev.name AS name, sum(us) AS us
    FROM inner_ GROUP BY ALL
),
k AS (
    SELECT *, CASE WHEN cat IN ('cuda_runtime', 'cuda_driver')
                        AND (regexp_matches(name, '^(cuda|hip|hipExt|cu)(Module)?Launch|^(cuda|hip|cu)Graph(Exec)?Launch'
                                                  || '|^(cuda|hip|cu)Mem(cpy|set)\w*Async')
                             OR l.id IS NOT NULL)
                   THEN 'launch'
                   WHEN us <= dispatch_us OR regexp_matches(coalesce(name, ''),
                        '^(CompiledFunction|CompiledFunctionBackward|## Call CompiledFxGraph|Torch-Compiled Region)')
                   THEN 'dispatch'
                   WHEN cat = 'cpu_op' THEN 'op' WHEN cat IN ('cuda_runtime', 'cuda_driver') THEN 'runtime'
                   ELSE 'python' END AS kind
    FROM own o LEFT JOIN (SELECT DISTINCT trace_id, launch_event_id AS id FROM gpu_op_launches) l USING (trace_id, id)
),
top AS (
    SELECT rank, arg_max({'name': name, 'kind': kind, 'n': n, 'us': us}, (us, name)) AS t
    FROM (SELECT rank, coalesce(name, 'host code outside recorded events') AS name, arg_max(kind, us) AS kind,
                 count(*) AS n, sum(us) AS us
          FROM k WHERE kind IN ('op', 'runtime', 'python') GROUP BY ALL)
    GROUP BY rank
)
SELECT k.rank, sum(k.us) AS cpu_us,
       coalesce(sum(k.us) FILTER (WHERE kind = 'launch'), 0.0) AS launch_us,
       coalesce(sum(k.us) FILTER (WHERE kind = 'dispatch'), 0.0) AS dispatch_us,
       coalesce(sum(k.us) FILTER (WHERE kind = 'op'), 0.0) AS op_us,
       coalesce(sum(k.us) FILTER (WHERE kind = 'runtime'), 0.0) AS runtime_us,
       coalesce(sum(k.us) FILTER (WHERE kind = 'python'), 0.0) AS python_us,
       count(*) FILTER (WHERE kind = 'launch') AS launches,
       any_value(t.t.name) AS top_name, any_value(t.t.kind) AS top_kind, any_value(t.t.n) AS top_n,
       any_value(t.t.us) AS top_us
FROM k LEFT JOIN top t USING (rank)
GROUP BY k.rank;

-- The operator and place behind advise's launch_bound and layout_conversions, per launch of a GPU
-- operation: rows for top_name_of (rank, finding, name, dur_us, enclosing), name the operator that
-- launched it (of the cpu_ops around the call on its thread, the innermost of those carrying the
-- call's External id, else the innermost: an External id alone can name an operator elsewhere in
-- traces that number launch calls by their correlation; the call's name when no operator is
-- around it) and enclosing the innermost user annotation or nn.Module event
-- around the call on its thread (as host_call_where's).
--   launch_bound         every launch inside the analysis windows, dur_us the launch call's
--                        duration (the operator that spends the most time launching);
--   layout_conversions   the launches of layout_conversion kernels (kernel classes) over the
--                        whole trace, as the finding's GPU time is, dur_us the kernel's.
CREATE OR REPLACE TEMP VIEW culprit_launches AS
WITH conv AS (SELECT DISTINCT trace_id, name FROM kernel_classes WHERE list_contains(classes, 'layout_conversion')),
l AS (
    SELECT g.trace_id, t.rank, g.launch_event_id, g.launch_pid, g.launch_tid, g.launch_ts_us, g.launch_name,
           r.external_id, r.dur_us AS launch_us, g.dur_us AS gpu_us,
           EXISTS (SELECT 1 FROM analysis_windows w WHERE w.trace_id = g.trace_id AND g.launch_ts_us >= w.ts_us
                   AND g.launch_ts_us < w.end_us) AS in_window,
           c.name IS NOT NULL AS conversion
    FROM gpu_op_launches g JOIN traces t USING (trace_id)
    JOIN runtime_calls r ON r.trace_id = g.trace_id AND r.event_id = g.launch_event_id
    LEFT JOIN conv c ON c.trace_id = g.trace_id AND c.name = g.name
),
m AS (
    SELECT trace_id, pid, tid, ts_us, ts_us + dur_us AS end_us, name FROM events
    WHERE (cat = 'user_annotation' AND name NOT LIKE 'ProfilerStep#%')
       OR (cat = 'python_function' AND name LIKE 'nn.Module: %')
),
wh AS (
    SELECT l.trace_id, l.launch_event_id, arg_max(m.name, m.ts_us) AS enclosing
    FROM (SELECT DISTINCT trace_id, launch_event_id, launch_pid, launch_tid, launch_ts_us FROM l
          WHERE in_window OR conversion) l
    JOIN m ON m.trace_id = l.trace_id AND m.pid = l.launch_pid AND m.tid = l.launch_tid
          AND m.ts_us <= l.launch_ts_us AND m.end_us >= l.launch_ts_us
    GROUP BY ALL
),
around AS (  -- the launches' operators: those around the call on its thread, the innermost first
    SELECT l.trace_id, l.launch_event_id,
           arg_max(c.name, (c.external_id IS NOT DISTINCT FROM l.external_id, c.ts_us)) AS op
    FROM (SELECT DISTINCT trace_id, launch_event_id, launch_pid, launch_tid, launch_ts_us, external_id FROM l
          WHERE in_window OR conversion) l
    JOIN cpu_ops c ON c.trace_id = l.trace_id AND c.pid = l.launch_pid AND c.tid = l.launch_tid
          AND c.ts_us <= l.launch_ts_us AND c.ts_us + c.dur_us >= l.launch_ts_us
    GROUP BY ALL
),
named AS (
    SELECT l.*, coalesce(a.op, l.launch_name) AS op, wh.enclosing
    FROM l LEFT JOIN around a USING (trace_id, launch_event_id) LEFT JOIN wh USING (trace_id, launch_event_id)
    WHERE l.in_window OR l.conversion
)
SELECT rank, 'launch_bound' AS finding, op AS name, launch_us AS dur_us, enclosing FROM named WHERE in_window
UNION ALL
SELECT rank, 'layout_conversions', op, gpu_us, enclosing FROM named WHERE conversion;
