-- Rows of the Operator view's nesting pass (trace_report/analyses/ops/nesting.py sorts them by
-- thread, ts_us, end_us descending, kind, id). Parameter: $ids, the traces (a trace's rows depend on
-- its own events alone, so each trace's result can be kept: trace_report/analyses/ops/nesting_kept.py).
-- * kind 0: each CPU operator and annotation (cpu_op, user_annotation), with its dur_us and gpu_us = µs of the GPU
--   operations (kernels, memcpy, memset) whose launch call (same correlation) carries its External
--   id (the lowest event_id of the operators carrying it);
-- * kind 1: each launch call whose External id names no operator (the 2022 param traces carry the
--   call's own correlation there), with gpu_us = µs of its GPU operations: it belongs to the
--   innermost operator or annotation around it on its thread, which the pass finds.
-- * thread numbers (trace_id, pid, tid); -1 where pid, tid or the end is NULL: such a row encloses
--   nothing and nothing encloses it, as every comparison with NULL is false (its NULLs read 0 here;
--   non-finite ts_us and dur_us never reach events: ingest/normalize.py drops them).
WITH ev AS (
    SELECT e.trace_id, e.event_id, e.pid, e.tid, e.ts_us, e.dur_us, e.ts_us + e.dur_us AS end_us, e.external_id
    FROM events e
    WHERE e.cat IN ('cpu_op', 'user_annotation') AND list_contains($ids, e.trace_id)
),
calls AS (
    SELECT g.trace_id, g.dur_us, r.event_id AS call_id, r.external_id, r.pid, r.tid, r.ts_us
    FROM gpu_ops g
    JOIN kernel_launches l ON l.trace_id = g.trace_id AND l.correlation = g.correlation
    JOIN runtime_calls r ON r.trace_id = l.trace_id AND r.event_id = l.launch_event_id
    WHERE list_contains($ids, g.trace_id)
),
by_id AS (
    SELECT c.trace_id, c.call_id, min(op.event_id) AS event_id
    FROM (SELECT DISTINCT trace_id, call_id, external_id FROM calls) c
    JOIN ev op ON op.trace_id = c.trace_id AND op.external_id = c.external_id
    GROUP BY ALL
),
by_id_us AS (
    SELECT c.trace_id, b.event_id, sum(c.dur_us) AS gpu_us
    FROM calls c JOIN by_id b USING (trace_id, call_id)
    GROUP BY ALL
),
timed AS (
    SELECT trace_id, call_id, pid, tid, ts_us, sum(dur_us) AS gpu_us
    FROM calls c
    WHERE NOT EXISTS (SELECT 1 FROM by_id b WHERE b.trace_id = c.trace_id AND b.call_id = c.call_id)
    GROUP BY ALL
),
nodes AS (
    SELECT ev.trace_id, pid, tid, ts_us, end_us, dur_us, 0 AS kind, ev.event_id AS id, coalesce(u.gpu_us, 0.0) AS gpu_us
    FROM ev LEFT JOIN by_id_us u USING (trace_id, event_id)
    UNION ALL
    SELECT trace_id, pid, tid, ts_us, ts_us, 0.0, 1, call_id, gpu_us FROM timed
),
threads AS (
    SELECT trace_id, pid, tid, row_number() OVER () AS thread FROM (SELECT DISTINCT trace_id, pid, tid FROM ev)
)
SELECT n.trace_id, CASE WHEN n.end_us IS NULL THEN -1 ELSE coalesce(h.thread, -1) END AS thread,
       coalesce(n.ts_us, 0.0) AS ts_us, coalesce(n.end_us, 0.0) AS end_us, coalesce(n.dur_us, 0.0) AS dur_us,
       n.kind, n.id, n.gpu_us
FROM nodes n LEFT JOIN threads h ON h.trace_id = n.trace_id AND h.pid = n.pid AND h.tid = n.tid;
