-- The CPU operators with a FLOP count (view op_costs, the operator cost model; record_shapes=True) on
-- a thread that holds module calls (modules.sql, registered as `module_marks` by the caller): thread, interval (µs),
-- event id, FLOP. Run only by trace_report/analyses/modules/tree.py.
SELECT c.trace_id, c.pid, c.tid, c.ts_us, c.ts_us + c.dur_us AS end_us, c.dur_us, c.event_id, c.flop
FROM op_costs c
SEMI JOIN (SELECT DISTINCT trace_id, pid, tid FROM module_marks) h
  ON h.trace_id = c.trace_id AND h.pid = c.pid AND h.tid = c.tid
WHERE c.flop IS NOT NULL AND c.dur_us IS NOT NULL
