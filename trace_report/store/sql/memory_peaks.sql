-- Peak allocated and reserved bytes per trace, device and ProfilerStep (view memory_events).
-- A step's peak counts the level it starts at (the last event before it) as well as the events
-- inside it; step NULL = memory events outside every ProfilerStep (or a trace without steps).
-- Parameters: $rank (NULL = all).
WITH m AS (
    SELECT m.*, t.rank FROM memory_events m JOIN traces t USING (trace_id)
    WHERE $rank IS NULL OR t.rank = $rank
),
devices AS (SELECT DISTINCT trace_id, rank, device FROM m),
inside AS (
    SELECT m.trace_id, m.rank, m.device, s.step, m.allocated_bytes, m.reserved_bytes
    FROM m LEFT JOIN steps s ON s.trace_id = m.trace_id AND m.ts_us >= s.ts_us AND m.ts_us < s.end_us
),
at_start AS (
    SELECT d.trace_id, d.rank, d.device, s.step,
           (SELECT arg_max(allocated_bytes, ts_us) FROM m WHERE m.trace_id = d.trace_id AND m.device = d.device AND m.ts_us < s.ts_us) AS allocated_bytes,
           (SELECT arg_max(reserved_bytes, ts_us) FROM m WHERE m.trace_id = d.trace_id AND m.device = d.device AND m.ts_us < s.ts_us) AS reserved_bytes
    FROM devices d JOIN steps s USING (trace_id)
)
SELECT rank, device, step, count(*) FILTER (WHERE NOT from_start) AS events,
       max(allocated_bytes) AS peak_allocated_bytes, max(reserved_bytes) AS peak_reserved_bytes, trace_id
FROM (SELECT *, false AS from_start FROM inside UNION ALL BY NAME SELECT *, true AS from_start FROM at_start)
GROUP BY rank, device, step, trace_id
HAVING count(*) FILTER (WHERE NOT from_start) > 0 OR max(allocated_bytes) IS NOT NULL
ORDER BY rank, trace_id, device, step NULLS LAST;
