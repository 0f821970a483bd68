-- nsys analyze's cuda_memcpy_sync and cuda_memset_sync rules on a Kineto trace, per rank: the GPU
-- copies and memsets launched by a synchronous runtime call (host_sync_calls' memcpy and memset
-- names: no Async suffix), one row per (rank, finding) with calls, blocked_us (the launch calls'
-- CPU time), top, top_n, top_us and where (macro top_name_of over the calls, placed by
-- host_call_where).
--   sync_memcpy   cuda_memcpy_sync: "synchronous memory transfers that block the host", host to
--                 device transfers of 64 KB or less left out (the copy's "bytes"; a copy without
--                 one is kept).
--   sync_memset   cuda_memset_sync: "synchronous memset operations with pinned host memory or
--                 Unified Memory region" (CUPTI's memory kind in the name: Memset (Pinned),
--                 Memset (Managed)).
-- Over the whole trace, as nsys' rules are. Parameters: $ids (trace ids), $h2d_min_bytes.
WITH c AS (
    SELECT CASE WHEN l.cat = 'gpu_memcpy' THEN 'sync_memcpy' ELSE 'sync_memset' END AS finding,
           l.trace_id, s.name, s.dur_us, h.enclosing
    FROM host_sync_calls s
    JOIN gpu_op_launches l ON l.trace_id = s.trace_id AND l.launch_event_id = s.event_id
    LEFT JOIN host_call_where h ON h.trace_id = s.trace_id AND h.event_id = s.event_id
    WHERE list_contains($ids, s.trace_id) AND s.name NOT LIKE '%Async%'
      AND ((l.cat = 'gpu_memcpy' AND s.name LIKE '%emcpy%'
            AND NOT (regexp_matches(l.name, 'HtoD|Pageable -> Device|Pinned -> Device')
                     AND TRY_CAST(json_extract_string(l.args, '$.bytes') AS BIGINT) <= $h2d_min_bytes))
        OR (l.cat = 'gpu_memset' AND s.name LIKE '%emset%' AND regexp_matches(l.name, '\((Pinned|Managed)\)')))
),
ranked AS (SELECT c.*, t.rank FROM c JOIN traces t USING (trace_id))
SELECT r.rank, r.finding, count(*) AS calls, sum(r.dur_us) AS blocked_us,
       any_value(t.top_name) AS top, any_value(t.top_n) AS top_n, any_value(t.top_us) AS top_us,
       any_value(t.top_where) AS "where"
FROM ranked r JOIN top_name_of('ranked') t USING (rank, finding)
GROUP BY r.rank, r.finding
ORDER BY r.rank, r.finding;
