-- The GPU operations (kernels, memcpy, memset: view kernel_launch_pairs) whose runtime launch call
-- ran on a thread that holds module calls (modules.sql, registered as `module_marks` by the caller): the call's
-- thread and start and the operation's duration (µs). Run only by trace_report/analyses/modules/tree.py.
SELECT p.trace_id, p.launch_pid AS pid, p.launch_tid AS tid, p.launch_ts_us AS ts_us, p.dur_us
FROM kernel_launch_pairs p
SEMI JOIN (SELECT DISTINCT trace_id, pid, tid FROM module_marks) h
  ON h.trace_id = p.trace_id AND h.pid = p.launch_pid AND h.tid = p.launch_tid
