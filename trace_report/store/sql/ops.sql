-- Operator view (torch-tb-profiler's Operator view, TraceLens' ops summary): each CPU operator
-- with its self CPU time, the GPU time it launched and its FLOP (view op_flops).
-- Parameters: $rank (NULL = all), $all_ops (else only aten:: operators), $by_shape (one row per
-- name and "Input Dims").
-- * self_cpu_us: dur minus the dur of the direct children (cpu_op or user_annotation nested on the
--   same thread; the direct parent is the innermost enclosing one).
-- * A GPU operation (kernel, memcpy, memset) belongs to the operator whose External id its launch
--   call (same correlation) carries, else to the innermost operator or annotation around the
--   call on its thread: gpu_self_us sums those; gpu_us adds those of every operator
--   nested in it (what the operator caused on the GPU).
WITH ev AS (
    SELECT e.trace_id, e.event_id, e.cat, e.name, e.pid, e.tid, e.ts_us, e.dur_us, e.ts_us + e.dur_us AS end_us,
           e.external_id, t.rank,
           CASE WHEN $by_shape AND e.cat = 'cpu_op'
                THEN coalesce(CAST(TRY_CAST(json_extract(e.args, '$."Input Dims"') AS BIGINT[][]) AS VARCHAR), '')
           END AS input_dims
    FROM events e JOIN traces t USING (trace_id)
    WHERE e.cat IN ('cpu_op', 'user_annotation') AND ($rank IS NULL OR t.rank = $rank)
),
-- every (ancestor, descendant) pair on a thread; equal intervals nest in file order
encl AS (
    SELECT p.trace_id, p.event_id AS anc_id, c.event_id AS desc_id, c.dur_us AS desc_dur_us,
           row_number() OVER (PARTITION BY c.trace_id, c.event_id ORDER BY p.ts_us DESC, p.end_us, p.event_id DESC) AS nearness
    FROM ev c JOIN ev p
      ON p.trace_id = c.trace_id AND p.pid = c.pid AND p.tid = c.tid
     AND p.ts_us <= c.ts_us AND p.end_us >= c.end_us AND p.event_id <> c.event_id
     AND (p.ts_us < c.ts_us OR p.end_us > c.end_us OR p.event_id < c.event_id)
),
children AS (SELECT trace_id, anc_id AS event_id, sum(desc_dur_us) AS child_us FROM encl WHERE nearness = 1 GROUP BY ALL),
calls AS (
    SELECT g.trace_id, g.dur_us, r.event_id AS call_id, r.external_id, r.pid, r.tid, r.ts_us
    FROM gpu_ops g
    JOIN kernel_launches l ON l.trace_id = g.trace_id AND l.correlation = g.correlation
    JOIN runtime_calls r ON r.trace_id = l.trace_id AND r.event_id = l.launch_event_id
),
by_id AS (
    SELECT c.trace_id, c.call_id, op.event_id
    FROM (SELECT DISTINCT trace_id, call_id, external_id FROM calls) c
    JOIN ev op ON op.trace_id = c.trace_id AND op.external_id = c.external_id
    QUALIFY row_number() OVER (PARTITION BY c.trace_id, c.call_id ORDER BY op.event_id) = 1
),
-- traces whose runtime calls carry their own correlation as External id (2022 param traces):
-- the innermost operator or annotation around the call on its thread
by_time AS (
    SELECT c.trace_id, c.call_id, op.event_id
    FROM (SELECT DISTINCT trace_id, call_id, pid, tid, ts_us FROM calls) c
    JOIN ev op ON op.trace_id = c.trace_id AND op.pid = c.pid AND op.tid = c.tid
     AND op.ts_us <= c.ts_us AND op.end_us >= c.ts_us
    WHERE NOT EXISTS (SELECT 1 FROM by_id b WHERE b.trace_id = c.trace_id AND b.call_id = c.call_id)
    QUALIFY row_number() OVER (PARTITION BY c.trace_id, c.call_id ORDER BY op.ts_us DESC, op.end_us, op.event_id DESC) = 1
),
launched AS (
    SELECT c.trace_id, o.event_id, sum(c.dur_us) AS gpu_us, count(*) AS gpu_ops
    FROM calls c JOIN (SELECT * FROM by_id UNION ALL SELECT * FROM by_time) o USING (trace_id, call_id)
    GROUP BY ALL
),
caused AS (
    SELECT trace_id, event_id, sum(gpu_us) AS gpu_us FROM (
        SELECT trace_id, event_id, gpu_us FROM launched
        UNION ALL
        SELECT e.trace_id, e.anc_id, l.gpu_us FROM encl e JOIN launched l ON l.trace_id = e.trace_id AND l.event_id = e.desc_id
    ) GROUP BY ALL
),
ops AS (
    SELECT ev.*, greatest(ev.dur_us - coalesce(c.child_us, 0), 0) AS self_cpu_us,
           coalesce(l.gpu_us, 0) AS gpu_self_us, coalesce(x.gpu_us, 0) AS gpu_us, f.flop
    FROM ev
    LEFT JOIN children c USING (trace_id, event_id)
    LEFT JOIN launched l USING (trace_id, event_id)
    LEFT JOIN caused x USING (trace_id, event_id)
    LEFT JOIN op_flops f USING (trace_id, event_id)
    WHERE ev.cat = 'cpu_op' AND ($all_ops OR ev.name LIKE 'aten::%')
)
SELECT name, input_dims, count(*) AS count, sum(self_cpu_us) AS self_cpu_us, sum(dur_us) AS cpu_us,
       sum(gpu_self_us) AS gpu_self_us, sum(gpu_us) AS gpu_us,
       sum(flop) AS flop, count(flop) AS counted,
       sum(flop) FILTER (WHERE gpu_us > 0) / nullif(sum(gpu_us) FILTER (WHERE flop IS NOT NULL), 0) / 1e6 AS tflop_per_s
FROM ops
GROUP BY name, input_dims
ORDER BY gpu_us DESC, self_cpu_us DESC, name, input_dims;
