-- The caching allocator's [memory] instant events (profile_memory=True) as a timeline.
-- TEMP view, created on every connection; used by trace_report/analyses/memory/__init__.py.
-- args: "Total Allocated" and "Total Reserved" (bytes on that device after the event),
-- "Bytes" (this allocation, negative for a free), "Device Type" (c10::DeviceType: 0 CPU,
-- 1 CUDA, which ROCm builds use for HIP too), "Device Id" (-1 for the CPU). 2021 traces carry
-- only "Bytes": allocated_bytes is then the running sum of Bytes since the trace began
-- (relative: what was allocated before is unknown, as in torch-tb-profiler's memory curve) and
-- totals_known is false.
-- memory_event_fields: each [memory] event's fields parsed from its args (the one place they are
-- read: memory_events below, and slice_memory.sql's counter track over one window).
-- The five fields come from one json_extract_string with a list of paths: each args text is parsed
-- once (a ->> per field parses it again for each).
CREATE OR REPLACE TEMP VIEW memory_event_fields AS
SELECT trace_id, event_id, ts_us, pid,
       CASE TRY_CAST(f[1] AS INTEGER)
           WHEN 0 THEN 'cpu'
           WHEN 1 THEN 'cuda:' || coalesce(f[2], '0')
           ELSE 'type' || coalesce(f[1], '?') || ':' || coalesce(f[2], '?')
       END AS device,
       TRY_CAST(f[3] AS BIGINT) AS bytes,
       TRY_CAST(f[4] AS BIGINT) AS total_allocated,
       TRY_CAST(f[5] AS BIGINT) AS reserved_bytes
FROM (SELECT trace_id, event_id, ts_us, pid,
             json_extract_string(args, ['$."Device Type"', '$."Device Id"', '$."Bytes"', '$."Total Allocated"',
                                        '$."Total Reserved"']) AS f
      FROM events WHERE name = '[memory]');

CREATE OR REPLACE TEMP VIEW memory_events AS  -- kept per trace; a table in advise, report
SELECT trace_id, event_id, ts_us, device, bytes,
       coalesce(total_allocated, CAST(sum(bytes) OVER (PARTITION BY trace_id, device ORDER BY ts_us, event_id
                                                      ROWS UNBOUNDED PRECEDING) AS BIGINT)) AS allocated_bytes,
       reserved_bytes, total_allocated IS NOT NULL AS totals_known
FROM memory_event_fields;
