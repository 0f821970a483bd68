-- Module calls: one row per call of an nn.Module (or a "## name ##" annotation): its thread, interval
-- and ProfilerStep. Run only by trace_report/analyses/modules/__init__.py, which adds to each row its place in
-- the module tree, the GPU time of what it launched and its FLOP (analyses/modules/tree.py: sorted
-- passes per thread, O(n log n); the range self-joins that stated the rule below in SQL were
-- planned by DuckDB as hash joins on (trace, pid, tid) comparing every pair of a thread, far too
-- slow for a busy thread), then sums the rows per path
-- (modules_launches.sql and modules_flop_ops.sql give the launches and operators read).
-- The rule, as TraceLens builds its nn.Module tree (TraceLens/Trace2Tree/trace_to_tree.py,
-- build_host_call_stack_tree: a stack per (pid, tid), an event's parent is the innermost event on
-- the stack that encloses it; nn.Module events are python_function events named "nn.Module: ...";
-- TreePerf/tree_perf.py, build_nn_module_latency_tree: a module's GPU events are those of its
-- subtree):
--   marks      python_function events named 'nn.Module: <Class>_<n>' (with_stack=True;
--              <n> numbers the instances of a class) -> kind 'module', name
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
--   flop / flop_ops    the FLOP of the operators with a FLOP count (view op_costs,
--              record_shapes=True) that start inside the mark on its thread, counting only the
--              outermost such operator (aten::convolution holds aten::_convolution: counted once);
--              NULL when none has an estimate.
--   step       the ProfilerStep whose interval holds the mark's start (view steps; the highest
--              number when steps overlap), else NULL.
-- Parameter: $ids, the traces (a trace's rows depend on its own events alone, so that each trace's
-- calls can be kept: analyses/modules/tree.py). Times in microseconds on the trace's own clock.
WITH marks AS (
    SELECT e.trace_id, e.event_id, e.pid, e.tid, e.ts_us, e.dur_us, e.ts_us + e.dur_us AS end_us,
           CASE WHEN e.cat = 'python_function' THEN trim(substr(e.name, length('nn.Module:') + 1)) ELSE e.name END AS name,
           CASE WHEN e.cat = 'python_function' THEN 'module' ELSE 'annotation' END AS kind
    FROM events e
    WHERE list_contains($ids, e.trace_id) AND e.dur_us IS NOT NULL
      AND ((e.cat = 'python_function' AND e.name LIKE 'nn.Module:%')
           OR (e.cat IN ('user_annotation', 'cpu_op') AND e.name LIKE '## % ##'))
),
-- a mark's step: the highest of those holding the segment its start is in (view step_segments)
segment_steps AS (
    SELECT trace_id, seg_ts_us, seg_end_us, max(step) AS step FROM step_segments GROUP BY ALL
),
step_of AS (
    SELECT m.trace_id, m.event_id, g.step
    FROM marks m ASOF JOIN segment_steps g ON g.trace_id = m.trace_id AND m.ts_us >= g.seg_ts_us
    WHERE m.ts_us < g.seg_end_us
)
SELECT m.trace_id, m.event_id, s.step, m.pid, m.tid, m.name, m.kind, m.ts_us, m.dur_us, m.end_us
FROM marks m LEFT JOIN step_of s USING (trace_id, event_id)
ORDER BY m.trace_id, m.pid, m.tid, m.ts_us, m.end_us DESC, m.event_id
