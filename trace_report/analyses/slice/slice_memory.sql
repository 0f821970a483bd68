-- Counter track of `trace-report slice`: allocated and reserved bytes per device over time, the
-- values of view memory_events (what `trace-report memory --timeline` prints) with its rules
-- (store/sql/views_memory.sql: the fields of view memory_event_fields; allocated = "Total
-- Allocated", or, in 2021 traces that carry only "Bytes", the running sum of Bytes since the
-- trace began in (ts_us, event_id) order), evaluated over [$lo, $hi] alone: the view's running
-- sum sorts every [memory] event of the trace, and a trace may hold millions. The level before
-- $lo is the last event before it (its totals) and the sum of Bytes before it, both plain
-- aggregates. tests/analyses/slice/test_slice.py checks the values against the view.
-- Rows: device, pid (the process that recorded the events), ts_us (the first row of a device is
-- the level in force at $lo, moved to $lo), allocated_bytes, reserved_bytes.
-- Parameters: $trace_id, $lo, $hi (µs on the trace's clock).
WITH m AS (
    SELECT event_id, ts_us, pid, device, bytes, total_allocated, reserved_bytes
    FROM memory_event_fields WHERE trace_id = $trace_id
),
before AS (
    SELECT device, arg_max(pid, (ts_us, event_id)) AS pid, arg_max(total_allocated, (ts_us, event_id)) AS total,
           arg_max(reserved_bytes, (ts_us, event_id)) AS reserved_bytes, CAST(sum(bytes) AS BIGINT) AS bytes_before
    FROM m WHERE ts_us < $lo GROUP BY device
),
inside AS (
    SELECT m.*, coalesce(m.total_allocated, coalesce(b.bytes_before, 0) + CAST(sum(m.bytes) OVER (
               PARTITION BY m.device ORDER BY m.ts_us, m.event_id ROWS UNBOUNDED PRECEDING) AS BIGINT)) AS allocated_bytes
    FROM m LEFT JOIN before b USING (device) WHERE m.ts_us >= $lo AND m.ts_us <= $hi
)
SELECT device, pid, $lo AS ts_us, -1 AS event_id, coalesce(total, bytes_before) AS allocated_bytes, reserved_bytes
FROM before
UNION ALL
SELECT device, pid, ts_us, event_id, allocated_bytes, reserved_bytes FROM inside
ORDER BY device, ts_us, event_id;
