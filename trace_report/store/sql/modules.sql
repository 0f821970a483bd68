-- Module view: one row per call of an nn.Module (or a "## name ##" annotation) with its place in
-- the module tree, its CPU time, the GPU time of what it launched and its FLOP. Run only by
-- trace_report/analyses/modules.py (the per-path sums are computed there over these rows).
-- The rule, as TraceLens builds its nn.Module tree (TraceLens/Trace2Tree/trace_to_tree.py,
-- build_host_call_stack_tree: a stack per (pid, tid), an event's parent is the innermost event on
-- the stack that encloses it; nn.Module events are python_function events named "nn.Module: ...";
-- TreePerf/tree_perf.py, build_nn_module_latency_tree: a module's GPU events are those of its
-- subtree):
--   marks      python_function events named 'nn.Module: <Class>_<n>' (with_modules=True /
--              with_stack=True; <n> numbers the instances of a class) -> kind 'module', name
--              '<Class>_<n>'; user_annotation / cpu_op events named '## ... ##' (record_function
--              phase markers such as '## forward ##', inductor's '## Call CompiledFxGraph ... ##')
--              -> kind 'annotation', the name as it is.
--   path       the names of the marks enclosing the mark on its (trace, pid, tid), outermost first,
--              then its own, joined by '.'; depth = the number of names. Enclosing: starts no later
--              and ends no earlier; of two with the same interval the one recorded first (lower
--              event_id) is the outer.
--   cpu_us     the mark's duration (inclusive: its children's time is in it).
--   gpu_ops / gpu_us   the GPU operations (kernels, memcpy, memset; view kernel_launch_pairs: same
--              correlation) whose runtime launch call starts inside [ts, ts + dur) of the mark on
--              the mark's pid and tid: their count and summed duration (a sum: concurrent streams
--              are counted twice, unlike TraceLens' busy time). Kernels launched from another
--              thread (backward, on the autograd threads) belong to no module.
--   flop / flop_ops    the FLOP of the operators with a FLOP estimate (view op_flops,
--              record_shapes=True) that start inside the mark on its thread, counting only the
--              outermost such operator (aten::convolution holds aten::_convolution: counted once);
--              NULL when none has an estimate.
--   step       the ProfilerStep whose interval holds the mark's start (view steps), else NULL.
-- Parameters: $rank (NULL = every rank). Times in microseconds on the trace's own clock.
WITH marks AS (
    SELECT e.trace_id, t.rank, e.event_id, e.pid, e.tid, e.ts_us, e.dur_us, e.ts_us + e.dur_us AS end_us,
           CASE WHEN e.cat = 'python_function' THEN trim(substr(e.name, length('nn.Module:') + 1)) ELSE e.name END AS name,
           CASE WHEN e.cat = 'python_function' THEN 'module' ELSE 'annotation' END AS kind
    FROM events e JOIN traces t USING (trace_id)
    WHERE ($rank IS NULL OR t.rank = $rank) AND e.dur_us IS NOT NULL
      AND ((e.cat = 'python_function' AND e.name LIKE 'nn.Module:%')
           OR (e.cat IN ('user_annotation', 'cpu_op') AND e.name LIKE '## % ##'))
),
enclosing AS (
    SELECT m.trace_id, m.event_id, a.event_id AS outer_id, a.name AS outer_name, a.ts_us AS outer_ts,
           a.dur_us AS outer_dur
    FROM marks m JOIN marks a
      ON a.trace_id = m.trace_id AND a.pid = m.pid AND a.tid = m.tid
     AND a.ts_us <= m.ts_us AND a.end_us >= m.end_us AND a.event_id <> m.event_id
     AND (a.ts_us < m.ts_us OR a.dur_us > m.dur_us OR a.event_id < m.event_id)
),
paths AS (
    SELECT m.trace_id, m.event_id,
           coalesce(string_agg(x.outer_name, '.' ORDER BY x.outer_ts, x.outer_dur DESC, x.outer_id) || '.', '')
               || m.name AS path,
           count(x.outer_id) + 1 AS depth
    FROM marks m LEFT JOIN enclosing x USING (trace_id, event_id)
    GROUP BY m.trace_id, m.event_id, m.name
),
gpu AS (
    SELECT m.trace_id, m.event_id, count(*) AS gpu_ops, sum(p.dur_us) AS gpu_us
    FROM marks m JOIN kernel_launch_pairs p
      ON p.trace_id = m.trace_id AND p.launch_pid = m.pid AND p.launch_tid = m.tid
     AND p.launch_ts_us >= m.ts_us AND p.launch_ts_us < m.end_us
    GROUP BY m.trace_id, m.event_id
),
flop_ops AS (
    SELECT c.trace_id, c.event_id, c.pid, c.tid, c.ts_us, c.dur_us, c.ts_us + c.dur_us AS end_us, f.flop
    FROM cpu_ops c JOIN op_flops f USING (trace_id, event_id)
    WHERE f.flop IS NOT NULL AND c.trace_id IN (SELECT trace_id FROM marks)
),
outer_flop_ops AS (
    SELECT o.* FROM flop_ops o
    WHERE NOT EXISTS (
        SELECT 1 FROM flop_ops a
        WHERE a.trace_id = o.trace_id AND a.pid = o.pid AND a.tid = o.tid
          AND a.ts_us <= o.ts_us AND a.end_us >= o.end_us AND a.event_id <> o.event_id
          AND (a.ts_us < o.ts_us OR a.dur_us > o.dur_us OR a.event_id < o.event_id))
),
flop AS (
    SELECT m.trace_id, m.event_id, count(*) AS flop_ops, sum(o.flop) AS flop
    FROM marks m JOIN outer_flop_ops o
      ON o.trace_id = m.trace_id AND o.pid = m.pid AND o.tid = m.tid
     AND o.ts_us >= m.ts_us AND o.ts_us < m.end_us
    GROUP BY m.trace_id, m.event_id
),
step_of AS (
    SELECT m.trace_id, m.event_id, max(s.step) AS step
    FROM marks m JOIN steps s ON s.trace_id = m.trace_id AND m.ts_us >= s.ts_us AND m.ts_us < s.end_us
    GROUP BY m.trace_id, m.event_id
)
SELECT m.rank, m.trace_id, m.event_id, s.step, p.path, p.depth, m.name, m.kind, m.ts_us,
       m.dur_us AS cpu_us, coalesce(g.gpu_ops, 0) AS gpu_ops, coalesce(g.gpu_us, 0.0) AS gpu_us,
       coalesce(f.flop_ops, 0) AS flop_ops, f.flop
FROM marks m
JOIN paths p USING (trace_id, event_id)
LEFT JOIN gpu g USING (trace_id, event_id)
LEFT JOIN flop f USING (trace_id, event_id)
LEFT JOIN step_of s USING (trace_id, event_id)
