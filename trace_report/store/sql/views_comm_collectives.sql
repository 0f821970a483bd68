-- Collective calls: one row per communication kernel (view gpu_op_kinds, HTA's patterns) with
-- its collective, message size and group size. TEMP view, created on every connection; used by
-- trace_report/analyses/collectives/__init__.py (docs/analysis.md). Sources, first found wins:
--   1. the kernel's own args (PyTorch >= 2.1: "Collective name", "In msg nelems",
--      "Out msg nelems", "dtype", "Group size");
--   2. the innermost event around its launch call on the launching thread: a `nccl:<collective>`
--      annotation ("Input Dims", "Input type"; 2022 traces such as param_dlrm_kineto_v100x8) or
--      a `record_param_comms` operator (same args as 1);
--   3. the kernel name (ncclKernel_AllReduce_..., ncclDevKernel_AllGather_...), and the
--      trace's world size for the group.
-- nelems is the larger of the input and output element counts: the whole buffer nccl-tests
-- calls the size (allgather: the gathered output; reducescatter: the input).
CREATE OR REPLACE TEMP VIEW collective_dtype_bytes AS
SELECT * FROM (VALUES
    ('float', 4), ('float32', 4), ('half', 2), ('float16', 2), ('c10::half', 2), ('bfloat16', 2),
    ('c10::bfloat16', 2), ('double', 8), ('float64', 8), ('long', 8), ('long int', 8), ('int64', 8),
    ('int', 4), ('int32', 4), ('short', 2), ('short int', 2), ('int16', 2), ('char', 1),
    ('signed char', 1), ('int8', 1), ('byte', 1), ('unsigned char', 1), ('uint8', 1), ('bool', 1),
    ('float8_e4m3fn', 1), ('float8_e5m2', 1), ('c10::float8_e4m3fn', 1), ('c10::float8_e5m2', 1)
) AS t(dtype, elem_bytes);

CREATE OR REPLACE TEMP VIEW collective_calls AS
WITH comm AS (
    SELECT g.trace_id, g.event_id, g.name, g.stream, g.ts_us, g.dur_us, g.args::JSON AS a,
           r.ts_us AS launch_ts_us, r.pid AS launch_pid, r.tid AS launch_tid
    FROM gpu_op_kinds g
    LEFT JOIN runtime_calls r ON r.trace_id = g.trace_id AND r.correlation = g.correlation
    WHERE g.kind = 'communication'
    QUALIFY row_number() OVER (PARTITION BY g.trace_id, g.event_id ORDER BY r.event_id) = 1
),
ctx AS (
    SELECT c.trace_id, c.event_id, e.name AS ctx_name, e.args::JSON AS ca
    FROM comm c
    JOIN events e ON e.trace_id = c.trace_id AND e.pid = c.launch_pid AND e.tid = c.launch_tid
     AND e.ts_us <= c.launch_ts_us AND e.ts_us + e.dur_us >= c.launch_ts_us
     AND ((e.cat = 'user_annotation' AND e.name LIKE 'nccl:%') OR (e.cat = 'cpu_op' AND e.name = 'record_param_comms'))
    QUALIFY row_number() OVER (PARTITION BY c.trace_id, c.event_id ORDER BY e.ts_us DESC, e.event_id DESC) = 1
),
raw AS (
    SELECT c.trace_id, c.event_id, c.name, c.stream, c.ts_us, c.dur_us,
           coalesce(c.a ->> 'Collective name', ca ->> 'Collective name',
                    CASE WHEN x.ctx_name LIKE 'nccl:%' THEN substr(x.ctx_name, 6) END,
                    regexp_extract(c.name, '^nccl(?:Dev)?Kernel_([A-Za-z]+)', 1)) AS raw_kind,
           coalesce(greatest(TRY_CAST(c.a ->> 'In msg nelems' AS BIGINT), TRY_CAST(c.a ->> 'Out msg nelems' AS BIGINT)),
                    greatest(TRY_CAST(ca ->> 'In msg nelems' AS BIGINT), TRY_CAST(ca ->> 'Out msg nelems' AS BIGINT)),
                    CASE WHEN x.ctx_name LIKE 'nccl:%' THEN
                        CAST(list_aggregate(TRY_CAST(ca -> '$."Input Dims"[0]' AS BIGINT[]), 'product') AS BIGINT) END)
               AS nelems,
           lower(coalesce(c.a ->> 'dtype', ca ->> 'dtype', ca ->> '$."Input type"[0]')) AS dtype,
           coalesce(TRY_CAST(c.a ->> 'Group size' AS BIGINT), TRY_CAST(ca ->> 'Group size' AS BIGINT)) AS arg_group_size
    FROM comm c LEFT JOIN ctx x USING (trace_id, event_id)
)
SELECT r.trace_id, r.event_id, r.name, r.stream, r.ts_us, r.dur_us,
       CASE
           WHEN k IN ('allreduce', 'allgather', 'reducescatter', 'broadcast', 'reduce', 'alltoall', 'sendrecv',
                      'send', 'recv', 'barrier') THEN k
           WHEN k LIKE 'allgather%' THEN 'allgather'
           WHEN k LIKE 'reducescatter%' THEN 'reducescatter'
           WHEN k LIKE 'alltoall%' THEN 'alltoall'
           WHEN k LIKE 'allreduce%' THEN 'allreduce'
           ELSE coalesce(k, 'unknown')
       END AS collective,
       r.nelems, r.dtype, d.elem_bytes, r.nelems * d.elem_bytes AS bytes,
       coalesce(r.arg_group_size, t.world_size) AS group_size
FROM (SELECT *, replace(regexp_replace(lower(raw_kind), '^_+|_base$|_coalesced$', '', 'g'), '_', '') AS k FROM raw) r
JOIN traces t USING (trace_id)
LEFT JOIN collective_dtype_bytes d ON d.dtype = r.dtype;
