-- Collectives per kind and message size (view collective_calls): count, kernel time, the wait for
-- the last peer, the transfer time after it, and algorithm and bus bandwidth over the transfer time
-- with nccl-tests' factors (NVIDIA/nccl-tests doc/PERFORMANCE.md, and src/alltoall.cu /
-- sendrecv.cu): busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and
-- alltoall, 1 for broadcast, reduce and send/recv; algbw = bytes / time.
-- wait_us: where the traces of one job (same run_id, distinct ranks, the same sequence of
-- collectives) are all present, the i-th collective of each rank is matched with its peers' and
-- each rank waits from its own kernel start to the last peer's start (its arrival): NCCL's kernel
-- moves no data before every peer's kernel runs. transfer_us = dur_us - wait_us (the kernel time
-- after the last arrival). bw_basis says which time algbw is over:
--   'transfer'                        wait known and shorter than the kernel: bytes / transfer_us;
--   'kernel (wait unknown)'           no peers' traces: bytes / dur_us, the wait included;
--   'kernel (peer started after end)' the last peer's kernel started at or after this one ended
--                                     (the traces' clocks disagree, or a sender that did not wait
--                                     for its receiver): bytes / dur_us, transfer_us NULL.
-- Rows are split by bw_basis, so no row mixes the two times.
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
based AS (
    SELECT *,
           CASE WHEN wait_us < dur_us THEN dur_us - wait_us END AS transfer_us,
           CASE WHEN wait_us IS NULL THEN 'kernel (wait unknown)'
                WHEN wait_us < dur_us THEN 'transfer'
                ELSE 'kernel (peer started after end)' END AS bw_basis
    FROM waited
),
g AS (
    SELECT CASE WHEN $by_rank THEN rank END AS rank, collective, dtype, bytes, group_size, bw_basis,
           count(*) AS count, sum(dur_us) AS time_us, avg(dur_us) AS mean_us, sum(wait_us) AS wait_us,
           sum(transfer_us) AS transfer_us, sum(bytes) AS sum_bytes
    FROM based GROUP BY ALL
),
bw AS (
    SELECT *, sum_bytes / nullif(CASE WHEN bw_basis = 'transfer' THEN transfer_us ELSE time_us END, 0) / 1e3
               AS algbw_gbps
    FROM g
)
SELECT rank, collective, dtype, bytes, group_size, count, time_us, mean_us, wait_us, transfer_us, algbw_gbps,
       algbw_gbps * CASE
           WHEN collective = 'allreduce' THEN 2.0 * (group_size - 1) / group_size
           WHEN collective IN ('allgather', 'reducescatter', 'alltoall') THEN (group_size - 1) * 1.0 / group_size
           WHEN collective IN ('broadcast', 'reduce', 'sendrecv', 'send', 'recv') THEN 1.0
       END AS busbw_gbps,
       bw_basis
FROM bw
ORDER BY rank NULLS FIRST, time_us DESC, collective, bytes, bw_basis, dtype, group_size;
