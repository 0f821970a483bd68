-- The CPU operators with a FLOP estimate (view op_flops, record_shapes=True) on a thread that holds
-- module calls (modules.sql, named `marks` by the caller): thread, interval (µs), event id, FLOP.
-- Run only by trace_report/analyses/modules/__init__.py.
SELECT c.trace_id, c.pid, c.tid, c.ts_us, c.ts_us + c.dur_us AS end_us, c.dur_us, c.event_id, f.flop
FROM cpu_ops c JOIN op_flops f USING (trace_id, event_id)
SEMI JOIN (SELECT DISTINCT trace_id, pid, tid FROM marks) h
  ON h.trace_id = c.trace_id AND h.pid = c.pid AND h.tid = c.tid
WHERE f.flop IS NOT NULL AND c.dur_us IS NOT NULL
