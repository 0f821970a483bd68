-- Peak allocated and reserved bytes per trace, device and ProfilerStep (view memory_events).
-- A step's peak counts the level it starts at (the last event before it) as well as the events
-- inside it; step NULL = memory events outside every ProfilerStep (or a trace without steps).
-- Parameters: $rank (NULL = all).
WITH m AS (
    SELECT m.*, t.rank FROM memory_events m JOIN traces t USING (trace_id)
    WHERE $rank IS NULL OR t.rank = $rank
),
devices AS (SELECT DISTINCT trace_id, rank, device FROM m),
-- Each event once per step holding it (ts_us <= event < end_us; overlapping steps: each of them),
-- once with step NULL when none does: the steps of the segment it falls in (view step_segments;
-- a range join of every event to every step of its trace grew with events times steps).
inside AS (
    SELECT m.trace_id, m.rank, m.device, h.step, m.allocated_bytes, m.reserved_bytes
    FROM m ASOF LEFT JOIN (SELECT DISTINCT trace_id, seg_ts_us FROM step_segments) g
      ON g.trace_id = m.trace_id AND m.ts_us >= g.seg_ts_us
    LEFT JOIN step_segments h ON h.trace_id = m.trace_id AND h.seg_ts_us = g.seg_ts_us AND m.ts_us < h.seg_end_us
),
-- The level each step starts at: the last event of the device before the step (by time, then
-- event id) with a value, found by ASOF joins (a subquery per device and step read every earlier
-- event, quadratic in a long trace).
last_allocated AS (
    SELECT trace_id, device, ts_us, arg_max(allocated_bytes, event_id) AS allocated_bytes
    FROM m WHERE allocated_bytes IS NOT NULL GROUP BY trace_id, device, ts_us
),
last_reserved AS (
    SELECT trace_id, device, ts_us, arg_max(reserved_bytes, event_id) AS reserved_bytes
    FROM m WHERE reserved_bytes IS NOT NULL GROUP BY trace_id, device, ts_us
),
starts AS (SELECT d.trace_id, d.rank, d.device, s.step, s.ts_us FROM devices d JOIN steps s USING (trace_id)),
at_start AS (
    SELECT a.trace_id, a.rank, a.device, a.step, a.allocated_bytes, r.reserved_bytes
    FROM (SELECT s.*, l.allocated_bytes FROM starts s ASOF LEFT JOIN last_allocated l
          ON l.trace_id = s.trace_id AND l.device = s.device AND s.ts_us > l.ts_us) a
    ASOF LEFT JOIN last_reserved r ON r.trace_id = a.trace_id AND r.device = a.device AND a.ts_us > r.ts_us
)
SELECT rank, device, step, count(*) FILTER (WHERE NOT from_start) AS events,
       max(allocated_bytes) AS peak_allocated_bytes, max(reserved_bytes) AS peak_reserved_bytes, trace_id
FROM (SELECT *, false AS from_start FROM inside UNION ALL BY NAME SELECT *, true AS from_start FROM at_start)
GROUP BY rank, device, step, trace_id
HAVING count(*) FILTER (WHERE NOT from_start) > 0 OR max(allocated_bytes) IS NOT NULL
ORDER BY rank, trace_id, device, step NULLS LAST;
