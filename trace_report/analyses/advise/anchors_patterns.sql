-- The operator patterns of PyTorch's pattern matcher (torch/profiler/_pattern_matcher.py), per
-- rank: one row per (rank, finding) with calls (matched events), cpu_us (their summed duration),
-- gpu_us (the GPU operations launched inside them: a launch call on the event's thread within its
-- span; those of advise's windows, view window_gpu_ops, as its other GPU-time figures), top,
-- top_n, top_us and where (macro top_name_of over the matches, each placed in the innermost user
-- annotation or nn.Module event around it). Parameters: $ids (trace ids).
--   optimizer_single_tensor   OptimizerSingleTensorPattern: an event whose name ends with
--                             _single_tensor_adam, _single_tensor_sgd or _single_tensor_adamw.
--   grad_not_set_to_none      GradNotSetToNonePattern: an aten::zero_ inside a zero_grad (a
--                             Python function event ending ': zero_grad', or the optimizer's
--                             record_function 'Optimizer.zero_grad#...') on the same thread, not
--                             inside an aten::zeros.
--   conv_bias_before_batchnorm  Conv2dBiasFollowedByBatchNorm2dPattern: an aten::conv2d whose third
--                             input has a type (its bias; "Input type", record_shapes) inside an
--                             'nn.Module: Conv2d' event, the next nn.Module event on that thread
--                             after it being 'nn.Module: BatchNorm2d'.
--   matmul_dims_not_aligned   MatMulDimInFP16Pattern: aten::mm, aten::bmm or aten::addmm whose first
--                             input is c10::Half or c10::BFloat16 and one of the last two dimensions
--                             of an input ("Input Dims") is not a multiple of 8.
WITH ev AS (SELECT * FROM events WHERE list_contains($ids, trace_id)),
marker AS (
    SELECT trace_id, pid, tid, ts_us, ts_us + dur_us AS end_us, name FROM ev
    WHERE (cat = 'user_annotation' AND name NOT LIKE 'ProfilerStep#%')
       OR (cat = 'python_function' AND name LIKE 'nn.Module: %')
),
single AS (
    SELECT 'optimizer_single_tensor' AS finding, trace_id, event_id, pid, tid, ts_us, dur_us, name FROM ev
    WHERE regexp_matches(name, '_single_tensor_(adam|sgd|adamw)$')
),
zero_grad AS (
    SELECT trace_id, pid, tid, ts_us, ts_us + dur_us AS end_us FROM ev
    WHERE suffix(name, ': zero_grad') OR name LIKE 'Optimizer.zero_grad#%'
),
zeros AS (SELECT trace_id, pid, tid, ts_us, ts_us + dur_us AS end_us FROM ev WHERE name = 'aten::zeros'),
zero_ AS (
    SELECT DISTINCT 'grad_not_set_to_none' AS finding, z.trace_id, z.event_id, z.pid, z.tid, z.ts_us, z.dur_us, z.name
    FROM ev z SEMI JOIN zero_grad g
      ON g.trace_id = z.trace_id AND g.pid = z.pid AND g.tid = z.tid AND z.ts_us >= g.ts_us AND z.ts_us < g.end_us
    WHERE z.cat = 'cpu_op' AND z.name = 'aten::zero_'
      AND NOT EXISTS (SELECT 1 FROM zeros p WHERE p.trace_id = z.trace_id AND p.pid = z.pid AND p.tid = z.tid
                      AND p.ts_us <= z.ts_us AND p.end_us >= z.ts_us + z.dur_us)
),
conv AS (
    SELECT trace_id, event_id, pid, tid, ts_us, dur_us, name FROM ev
    WHERE cat = 'cpu_op' AND name = 'aten::conv2d'
      AND coalesce(json_extract_string(args, '$."Input type"[2]'), '') <> ''
),
conv_module AS (  -- the innermost nn.Module: Conv2d around each biased conv2d
    SELECT c.*, arg_max(m.end_us, m.ts_us) AS module_end_us
    FROM conv c JOIN marker m ON m.trace_id = c.trace_id AND m.pid = c.pid AND m.tid = c.tid
      AND m.ts_us <= c.ts_us AND m.end_us >= c.ts_us + c.dur_us AND m.name LIKE 'nn.Module: Conv2d%'
    GROUP BY ALL
),
modules AS (SELECT * FROM marker WHERE name LIKE 'nn.Module: %'),
conv_bn AS (
    SELECT 'conv_bias_before_batchnorm' AS finding, c.trace_id, c.event_id, c.pid, c.tid, c.ts_us, c.dur_us, c.name
    FROM conv_module c ASOF JOIN modules n
      ON n.trace_id = c.trace_id AND n.pid = c.pid AND n.tid = c.tid AND n.ts_us >= c.module_end_us
    WHERE n.name LIKE 'nn.Module: BatchNorm2d%'
),
mm AS (
    SELECT 'matmul_dims_not_aligned' AS finding, trace_id, event_id, pid, tid, ts_us, dur_us, name FROM ev
    WHERE cat = 'cpu_op' AND name IN ('aten::mm', 'aten::bmm', 'aten::addmm')
      AND json_extract_string(args, '$."Input type"[0]') IN ('c10::Half', 'c10::BFloat16')
      AND list_bool_or(list_transform(
            TRY_CAST(json_extract(args, '$."Input Dims"') AS BIGINT[][]),
            lambda s: coalesce(list_bool_or(list_transform(s[-2:], lambda d: d % 8 <> 0)), false)))
),
hits AS (SELECT * FROM single UNION ALL SELECT * FROM zero_ UNION ALL SELECT * FROM conv_bn UNION ALL SELECT * FROM mm),
gpu AS (
    SELECT h.finding, h.trace_id, h.event_id, sum(l.dur_us) AS gpu_us
    FROM hits h JOIN window_gpu_ops l ON l.trace_id = h.trace_id AND l.launch_pid = h.pid
      AND l.launch_tid = h.tid AND l.launch_ts_us >= h.ts_us AND l.launch_ts_us <= h.ts_us + h.dur_us
    GROUP BY ALL
),
placed AS (
    SELECT h.*, coalesce(g.gpu_us, 0.0) AS gpu_us,
           (SELECT arg_max(m.name, m.ts_us) FROM marker m WHERE m.trace_id = h.trace_id AND m.pid = h.pid
              AND m.tid = h.tid AND m.ts_us <= h.ts_us AND m.end_us >= h.ts_us + h.dur_us
              AND m.name NOT LIKE 'Optimizer.zero_grad#%') AS enclosing
    FROM hits h LEFT JOIN gpu g USING (finding, trace_id, event_id)
),
ranked AS (SELECT p.*, t.rank FROM placed p JOIN traces t USING (trace_id))
SELECT r.rank, r.finding, count(*) AS calls, sum(r.dur_us) AS cpu_us, sum(r.gpu_us) AS gpu_us,
       any_value(t.top_name) AS top, any_value(t.top_n) AS top_n, any_value(t.top_us) AS top_us,
       any_value(t.top_where) AS "where"
FROM ranked r JOIN top_name_of('ranked') t USING (rank, finding)
GROUP BY r.rank, r.finding
ORDER BY r.rank, r.finding;
