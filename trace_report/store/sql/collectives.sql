-- Collectives per kind and message size (view collective_calls): count, kernel time, algorithm
-- and bus bandwidth with nccl-tests' factors (NVIDIA/nccl-tests doc/PERFORMANCE.md, and
-- src/alltoall.cu / sendrecv.cu): busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for allgather,
-- reducescatter and alltoall, 1 for broadcast, reduce and send/recv; algbw = bytes / time.
-- wait_us: where the traces of one job (same run_id, distinct ranks, the same sequence of
-- collectives) are all present, the i-th collective of each rank is matched with its peers' and
-- each rank waits from its own kernel start to the last peer's start (its arrival).
-- Parameters: $rank (NULL = all), $by_rank (one group per rank).
WITH calls AS (
    SELECT c.*, t.rank, coalesce(t.run_id, '') AS job,
           row_number() OVER (PARTITION BY c.trace_id ORDER BY c.ts_us, c.event_id) AS seq
    FROM collective_calls c JOIN traces t USING (trace_id)
),
per_trace AS (SELECT job, trace_id, rank, count(*) AS n FROM calls GROUP BY ALL),
jobs AS (
    SELECT job FROM per_trace GROUP BY job
    HAVING count(*) >= 2 AND count(DISTINCT rank) = count(*) AND count(DISTINCT n) = 1
),
arrivals AS (
    SELECT job, seq, max(ts_us) AS last_arrival_us, count(DISTINCT collective) AS kinds
    FROM calls WHERE job IN (SELECT job FROM jobs) GROUP BY job, seq
),
matched AS (SELECT job FROM arrivals GROUP BY job HAVING max(kinds) = 1),
waited AS (
    SELECT c.*, CASE WHEN c.job IN (SELECT job FROM matched) THEN a.last_arrival_us - c.ts_us END AS wait_us
    FROM calls c LEFT JOIN arrivals a USING (job, seq)
    WHERE $rank IS NULL OR c.rank = $rank
),
g AS (
    SELECT CASE WHEN $by_rank THEN rank END AS rank, collective, dtype, bytes, group_size,
           count(*) AS count, sum(dur_us) AS time_us, avg(dur_us) AS mean_us, sum(wait_us) AS wait_us,
           sum(bytes) / nullif(sum(dur_us), 0) / 1e3 AS algbw_gbps
    FROM waited GROUP BY ALL
)
SELECT rank, collective, dtype, bytes, group_size, count, time_us, mean_us, wait_us, algbw_gbps,
       algbw_gbps * CASE
           WHEN collective = 'allreduce' THEN 2.0 * (group_size - 1) / group_size
           WHEN collective IN ('allgather', 'reducescatter', 'alltoall') THEN (group_size - 1) * 1.0 / group_size
           WHEN collective IN ('broadcast', 'reduce', 'sendrecv', 'send', 'recv') THEN 1.0
       END AS busbw_gbps
FROM g
ORDER BY rank NULLS FIRST, time_us DESC, collective, bytes;
