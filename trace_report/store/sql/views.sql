-- TEMP views over events, created on every connection, so they follow the code's version
-- and work on read-only databases. `-- kept per trace` after a view's AS: its rows of a trace come
-- from that trace's events alone (joins and windows within a trace_id, reading events and
-- code-defined views only, never traces), so they are kept per trace beside a database
-- (trace_report.store.kept_views). `-- a table in advise, report` (or `; a table in ...` after that
-- marker): the commands named keep the view as a table for their length (kept_views.kept_for).
CREATE OR REPLACE TEMP VIEW runtime_calls AS  -- kept per trace; a table in advise, report
    SELECT * FROM events WHERE cat IN ('cuda_runtime', 'cuda_driver');

-- The launch of a correlation id: its first runtime call (lowest event id), with that call's
-- name, process, thread and start (DuckDB computes only the columns a query uses).
CREATE OR REPLACE TEMP VIEW kernel_launches AS
    SELECT trace_id, correlation, min(event_id) AS launch_event_id,
           arg_min(name, event_id) AS launch_name, arg_min(pid, event_id) AS launch_pid,
           arg_min(tid, event_id) AS launch_tid, arg_min(ts_us, event_id) AS launch_ts_us
    FROM runtime_calls
    WHERE correlation IS NOT NULL
    GROUP BY trace_id, correlation;

CREATE OR REPLACE TEMP VIEW gpu_ops AS  -- kept per trace; a table in advise, report
    SELECT * FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset');

-- from gpu_ops, not events: the same rows, and where a command keeps gpu_ops as a table
-- (trace_report.store.kept_views) its ~30k rows are read instead of a scan of every event
CREATE OR REPLACE TEMP VIEW kernels AS
    SELECT e.*, l.launch_event_id, l.launch_name, l.launch_pid, l.launch_tid, l.launch_ts_us
    FROM gpu_ops e
    LEFT JOIN kernel_launches l ON l.trace_id = e.trace_id AND l.correlation = e.correlation
    WHERE e.cat = 'kernel';

-- GPU operations per trace and name: ops (count), dur_us (summed). What GPU time (gpu_time_of)
-- and the kernel classes (kernel_classes_of) are computed from; the flags of a large trace read
-- these rows kept beside the database (trace_report.analyses.common.gpu_op_names) instead of its events.
CREATE OR REPLACE TEMP VIEW gpu_op_names AS
    SELECT trace_id, cat, name, count(*) AS ops, sum(dur_us) AS dur_us
    FROM gpu_ops GROUP BY trace_id, cat, name;

CREATE OR REPLACE TEMP VIEW cpu_ops AS
    SELECT * FROM events WHERE cat = 'cpu_op';

CREATE OR REPLACE TEMP VIEW annotations AS
    SELECT * FROM events WHERE cat IN ('user_annotation', 'gpu_user_annotation');

-- The one place ProfilerStep numbers are read (store/steps.py says the same rule to the ingest,
-- which warns of the events left out): the digits after '#', a number from 0 to 2^31 - 1; an
-- event whose number is none (ProfilerStep#-5, #abc, #99999999999999999999) is no step.
CREATE OR REPLACE TEMP VIEW steps AS  -- kept per trace; a table in advise, report
    SELECT * FROM (
        SELECT trace_id,
               TRY_CAST(regexp_extract(name, 'ProfilerStep#(\d+)', 1) AS BIGINT) AS step,
               event_id, ts_us, dur_us, ts_us + dur_us AS end_us, pid, tid
        FROM events
        WHERE cat IN ('user_annotation', 'cpu_op') AND name LIKE 'ProfilerStep#%'
    ) WHERE step BETWEEN 0 AND 2147483647;
