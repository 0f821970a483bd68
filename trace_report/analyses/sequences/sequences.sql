-- Kernel sequences (trace-report sequences): one row per launching operator call, with the GPU
-- operations (kernels, memcpy, memset) it launched in GPU start order. The grouping into
-- repeated sequences is sequence_stats.sql; both run only from trace_report/analyses/sequences/__init__.py.
--
-- The rule is Holistic Trace Analysis' get_frequent_cuda_kernel_sequences (HTA 0.6.1,
-- hta/analyzers/cuda_kernel_analysis.py, CudaKernelAnalysis.get_frequent_cuda_kernel_sequences):
--   operators   the CPU events whose name contains $operator (HTA's operator_name, a substring
--               match over every CPU-side event: cpu_op, user_annotation, python_function).
--               Without $operator (HTA requires one): every cpu_op but the ProfilerStep#N marker
--               (a cpu_op in 2021 traces).
--   launching   the outermost operator that encloses the launch call on the launching thread
--   operator    (same pid and tid; op start <= call start < op end, HTA's call stack: at equal
--               times an end closes before a start opens, and of two ops starting together the
--               longer is the parent). HTA starts "only from the shallowest" matching operators
--               to avoid double counting; its depth is global over the rank (hta/common/
--               trace_call_graph.py, with the backward thread hung under the main thread), so it
--               drops every match deeper than the shallowest anywhere (aten:: ops of the backward
--               pass when the forward has aten:: ops at a lower depth); here the outermost match
--               on each launch's own thread keeps them.
--   GPU ops     HTA's descendants of the operator on the stream side (stream != -1): every GPU
--               operation whose first runtime call (same correlation, view gpu_op_launches) is
--               inside it, ordered by GPU start (HTA sorts them by ts).
--   gpu_us      sum of their durations (HTA: kernel_dur_sum); cpu_us the operator's duration
--               (HTA's "CPU op duration").
-- $steps_only: HTA's selection (hta/common/trace.py, _filter_irrelevant_gpu_kernels): in a trace
-- with 2+ ProfilerSteps, GPU operations whose launch call starts before the last step starts
-- (view gpu_op_launches_hta, hta_kept). $ids: the traces (a trace's rows depend on its own events
-- alone, so that each trace's rows can be kept: analyses/sequences/__init__.py adds the rank from traces).
-- GPU operations launched outside every operator make one row per trace with a NULL operator
-- (op_event_id NULL), so that their time is in the total of the trace.
-- operator: the operator's name; an nn.Module event's ('nn.Module: <Class>_<n>', <n> numbering
-- the instances of the class) without its instance number, so that the calls of every instance
-- of a class (Qwen2RMSNorm_0 .. Qwen2RMSNorm_23, one per layer) make one sequence.
-- fusible_kernels: how many of the operations are elementwise or reduction kernels (the
-- kernel_classes view, rules elementwise / reduction of views_kernel_classes.sql).
WITH ops AS (
    SELECT e.trace_id, e.event_id, e.name, e.pid, e.tid, e.ts_us, e.dur_us, e.ts_us + e.dur_us AS end_us
    FROM events e
    WHERE list_contains($ids, e.trace_id) AND CASE WHEN $operator IS NULL
               THEN e.cat = 'cpu_op' AND NOT starts_with(e.name, 'ProfilerStep#')
               ELSE e.cat IN ('cpu_op', 'user_annotation', 'python_function') AND contains(e.name, $operator) END
),
outermost AS (  -- no earlier-starting operator of the thread ends at or after this one's end
    SELECT * FROM ops
    QUALIFY coalesce(max(end_us) OVER (PARTITION BY trace_id, pid, tid ORDER BY ts_us, dur_us DESC, event_id
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) < end_us, true)
),
gpu AS (
    SELECT g.trace_id, g.event_id, g.name, g.ts_us, g.dur_us, g.launch_ts_us, g.launch_pid, g.launch_tid
    FROM gpu_op_launches_hta g
    WHERE list_contains($ids, g.trace_id) AND (g.hta_kept OR NOT $steps_only)
),
marks AS (  -- the outermost operators and the launch calls of each thread, as one time line
    SELECT trace_id, pid, tid, ts_us AS at_us, 0 AS kind,
           {'event_id': event_id, 'name': name, 'ts_us': ts_us, 'dur_us': dur_us, 'end_us': end_us} AS op,
           NULL::BIGINT AS event_id, NULL AS name, NULL::DOUBLE AS gpu_ts_us, NULL::DOUBLE AS dur_us
    FROM outermost
    UNION ALL
    SELECT trace_id, launch_pid, launch_tid, launch_ts_us, 1, NULL, event_id, name, ts_us, dur_us FROM gpu
),
assigned AS (  -- each call and the latest operator of its thread starting at or before it (an
               -- operator before a call at the same time), when the call starts before it ends
    SELECT trace_id, event_id, name, gpu_ts_us AS ts_us, dur_us,
           CASE WHEN cur.end_us > at_us THEN cur END AS op
    FROM (SELECT *, last_value(op IGNORE NULLS) OVER (
                        PARTITION BY trace_id, pid, tid ORDER BY at_us, kind
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cur
          FROM marks)
    WHERE kind = 1
),
classed AS (
    SELECT a.trace_id, a.event_id, a.name, a.ts_us, a.dur_us,
           a.op.event_id AS op_event_id,
           regexp_replace(a.op.name, '^(nn\.Module: .+)_[0-9]+$', '\1') AS op_name, a.op.ts_us AS op_ts_us, a.op.dur_us AS op_dur_us,
           coalesce(list_has_any(k.classes, ['elementwise', 'reduction']), false) AS fusible
    FROM assigned a LEFT JOIN kernel_classes k ON k.trace_id = a.trace_id AND k.name = a.name
)
SELECT c.trace_id, c.op_event_id, any_value(c.op_name) AS operator, any_value(c.op_ts_us) AS op_ts_us,
       any_value(c.op_dur_us) AS cpu_us, count(*) AS length, sum(c.dur_us) AS gpu_us,
       count(*) FILTER (WHERE c.fusible) AS fusible_kernels,
       list(c.name ORDER BY c.ts_us, c.event_id) AS kernels
FROM classed c
GROUP BY c.trace_id, c.op_event_id
