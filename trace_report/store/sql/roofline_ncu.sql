-- Roofline views over the Nsight Compute tables (docs/roofline.md explains every formula).
-- Created by trace_report.formats.ncu.create_views once ncu_kernels/ncu_metrics exist.
-- roofline_peaks is filled per report by trace_report.analyses.roofline.measured (peaks in FLOP/s and
-- byte/s; NULL = unknown for that GPU).
CREATE TEMP TABLE IF NOT EXISTS roofline_peaks (
    report_id INTEGER, gpu VARCHAR, peak_fp64 DOUBLE, peak_fp64_tensor DOUBLE, peak_fp32 DOUBLE,
    peak_fp16 DOUBLE, peak_tf32_tensor DOUBLE, peak_fp16_tensor DOUBLE, peak_int8_tensor DOUBLE,
    peak_bw DOUBLE, peak_override DOUBLE
);

-- Per launch: duration (s), SM cycles per second, DRAM bytes.
CREATE OR REPLACE TEMP VIEW ncu_launch_basics AS
SELECT report_id, launch_id,
       max(value) FILTER (WHERE metric = 'gpu__time_duration.sum') AS time_s,
       coalesce(max(value) FILTER (WHERE metric = 'smsp__cycles_elapsed.avg.per_second'),
                max(value) FILTER (WHERE metric = 'sm__cycles_elapsed.avg.per_second')) AS sm_hz,
       max(value) FILTER (WHERE metric = 'dram__bytes.sum') AS dram_bytes,
       max(value) FILTER (WHERE metric = 'dram__bytes_read.sum') AS dram_read,
       max(value) FILTER (WHERE metric = 'dram__bytes_write.sum') AS dram_write,
       max(value) FILTER (WHERE metric = 'dram__bytes.sum.per_second') AS dram_bw,
       max(value) FILTER (WHERE metric = 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active')
           AS tensor_pipe_pct,
       -- MMA cycles (sm90: sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active;
       -- sm80: sm__pipe_tensor_op_{hmma,imma,dmma}_cycles_active), in % of peak, on the busiest SM
       -- (.max) or on average: >= 1% is matrix work. Batch-norm, layout and GEMV kernels show up
       -- to 0.01% there (HFMA2.MMA moves), implicit-GEMM convolutions 20-30% (H100 ResNet-18).
       coalesce(max(value) FILTER (WHERE metric SIMILAR TO
           'sm__pipe_tensor_(type_[a-z_]*mma|op_[hid]mma)_cycles_active[.](max|avg)[.]pct_of_peak_sustained_(elapsed|active)'),
           0) >= 1.0 AS mma_active
FROM ncu_metrics
WHERE instance IS NULL
GROUP BY report_id, launch_id;

-- Launches that have per-opcode SASS counts (the Instruction Statistics instances); without them
-- tensor-core work cannot be counted (an ncu CSV export carries only their sums).
CREATE OR REPLACE TEMP VIEW ncu_opcode_counted AS
SELECT DISTINCT report_id, launch_id FROM ncu_metrics
WHERE metric = 'sass__inst_executed_per_opcode_with_modifier_all' AND instance IS NOT NULL;

-- Per launch and CUDA-core floating-point operation: thread-instruction count, from (1) the
-- counter itself (--metrics ...pred_on.sum), (2) the Source Counters per-opcode thread counts
-- (exact integers), (3) its per_cycle_elapsed rate times SM cycles/s times duration (what the
-- --set full roofline section stores; equal to (2) where both exist).
CREATE OR REPLACE TEMP VIEW ncu_fp_ops AS
WITH ops(op, precision, flop_per_inst, opcodes) AS (VALUES
    ('ffma', 'fp32', 2, ['FFMA', 'FFMA32I']), ('fadd', 'fp32', 1, ['FADD', 'FADD32I']),
    ('fmul', 'fp32', 1, ['FMUL', 'FMUL32I']), ('dfma', 'fp64', 2, ['DFMA']),
    ('dadd', 'fp64', 1, ['DADD']), ('dmul', 'fp64', 1, ['DMUL']),
    ('hfma', 'fp16', 2, ['HFMA2', 'HFMA']), ('hadd', 'fp16', 1, ['HADD2', 'HADD']),
    ('hmul', 'fp16', 1, ['HMUL2', 'HMUL'])
),
m AS (
    SELECT * FROM ncu_metrics
    WHERE metric LIKE '%sass_thread_inst_executed_op_%' OR metric = 'sass__thread_inst_executed_true_per_opcode'
),
v AS (
    SELECT k.report_id, k.launch_id, o.op, o.precision, o.flop_per_inst,
        max(m.value) FILTER (WHERE m.instance IS NULL AND m.metric IN (
            'smsp__sass_thread_inst_executed_op_' || o.op || '_pred_on.sum',
            'sm__sass_thread_inst_executed_op_' || o.op || '_pred_on.sum')) AS n_counter,
        coalesce(
            max(m.value) FILTER (WHERE m.metric = 'smsp__sass_thread_inst_executed_op_' || o.op || '_pred_on.sum.per_cycle_elapsed'),
            max(m.value) FILTER (WHERE m.metric = 'derived__smsp__sass_thread_inst_executed_op_' || o.op || '_pred_on_x2') / 2
        ) AS rate_per_cycle,
        sum(m.value) FILTER (WHERE m.metric = 'sass__thread_inst_executed_true_per_opcode'
                             AND list_contains(o.opcodes, m.instance)) AS n_opcode,
        bool_or(m.metric = 'sass__thread_inst_executed_true_per_opcode') AS has_opcodes
    FROM ncu_kernels k CROSS JOIN ops o
    LEFT JOIN m ON m.report_id = k.report_id AND m.launch_id = k.launch_id
    GROUP BY ALL
)
SELECT v.report_id, v.launch_id, v.op, v.precision, v.flop_per_inst,
       coalesce(v.n_counter, v.n_opcode, CASE WHEN v.has_opcodes THEN 0 END,
                v.rate_per_cycle * b.sm_hz * b.time_s) AS thread_inst,
       CASE WHEN v.n_counter IS NOT NULL THEN 'counter'
            WHEN v.n_opcode IS NOT NULL OR v.has_opcodes THEN 'opcode'
            WHEN v.rate_per_cycle IS NOT NULL AND b.sm_hz IS NOT NULL AND b.time_s IS NOT NULL THEN 'rate' END AS source
FROM v JOIN ncu_launch_basics b USING (report_id, launch_id);

-- Tensor-core work from warp-level SASS MMA instruction counts with their shape modifier.
-- mma.sync (sm70-sm90: HMMA/IMMA/DMMA/BMMA): HMMA.16816.F32 = one m16n8k16 MMA per warp
-- instruction = 2*16*8*16 operations. Warpgroup MMA (sm90 wgmma: HGMMA/IGMMA/QGMMA/BGMMA):
-- HGMMA.64x128x8.F32.TF32 is one m64n128k8 MMA issued by the 4 warps of a warpgroup, and the
-- warp-level count sees each of the 4, so one counted instruction = 2*64*128*8/4 operations
-- (PTX ISA, wgmma.mma_async; checked on an H100 ResNet-18 forward pass against
-- FlopCounterMode: docs/roofline.md).
CREATE OR REPLACE TEMP VIEW ncu_tensor_ops AS
WITH shapes(shape, m, n, k) AS (VALUES
    ('884', 8, 8, 4), ('8816', 8, 8, 16), ('8832', 8, 8, 32), ('88128', 8, 8, 128),
    ('1684', 16, 8, 4), ('1688', 16, 8, 8), ('16816', 16, 8, 16), ('16832', 16, 8, 32),
    ('16864', 16, 8, 64), ('168128', 16, 8, 128), ('168256', 16, 8, 256)
),
t AS (
    SELECT report_id, launch_id, instance, value AS warp_inst,
           split_part(instance, '.', 1) AS opcode, split_part(instance, '.', 2) AS shape
    FROM ncu_metrics
    WHERE metric = 'sass__inst_executed_per_opcode_with_modifier_all'
      AND split_part(instance, '.', 1) IN ('HMMA', 'IMMA', 'DMMA', 'BMMA',
                                          'HGMMA', 'IGMMA', 'QGMMA', 'BGMMA')
),
g AS (  -- warpgroup shapes MxNxK, per warp
    SELECT *, TRY_CAST(regexp_extract(shape, '^([0-9]+)x([0-9]+)x([0-9]+)$', 1) AS BIGINT) AS gm,
              TRY_CAST(regexp_extract(shape, '^([0-9]+)x([0-9]+)x([0-9]+)$', 2) AS BIGINT) AS gn,
              TRY_CAST(regexp_extract(shape, '^([0-9]+)x([0-9]+)x([0-9]+)$', 3) AS BIGINT) AS gk
    FROM t
)
SELECT g.report_id, g.launch_id, g.instance, g.opcode, g.warp_inst,
       CASE WHEN g.opcode = 'DMMA' THEN 'fp64_tensor'
            WHEN g.opcode IN ('IMMA', 'BMMA', 'IGMMA', 'BGMMA') THEN 'int8_tensor'
            WHEN g.opcode = 'QGMMA' THEN 'fp8_tensor'
            WHEN g.instance LIKE '%TF32%' THEN 'tf32_tensor'
            ELSE 'fp16_tensor' END AS precision,
       CASE WHEN g.opcode LIKE '_GMMA' THEN 2.0 * g.gm * g.gn * g.gk / 4 * g.warp_inst
            ELSE 2.0 * s.m * s.n * s.k * g.warp_inst END AS ops
FROM g LEFT JOIN shapes s USING (shape);

-- One row per profiled launch: work per precision (FLOP), DRAM bytes, duration, arithmetic
-- intensity, achieved FLOP/s; bound and pct_of_roof against roofline_peaks (the macros of
-- views_roofline_rules.sql).
CREATE OR REPLACE TEMP VIEW roofline AS
WITH fp AS (
    SELECT report_id, launch_id,
           sum(flop_per_inst * thread_inst) FILTER (WHERE precision = 'fp64') AS flop_fp64,
           sum(flop_per_inst * thread_inst) FILTER (WHERE precision = 'fp32') AS flop_fp32,
           sum(flop_per_inst * thread_inst) FILTER (WHERE precision = 'fp16') AS flop_fp16,
           string_agg(DISTINCT source, ',' ORDER BY source) AS flop_source
    FROM ncu_fp_ops GROUP BY ALL
),
tc AS (
    SELECT report_id, launch_id,
           sum(ops) FILTER (WHERE precision <> 'int8_tensor') AS tensor_flop,
           sum(ops) FILTER (WHERE precision = 'int8_tensor') AS int_ops,
           arg_max(precision, coalesce(ops, 0)) AS tensor_precision,
           bool_or(ops IS NULL) AS unknown_shapes
    FROM ncu_tensor_ops GROUP BY ALL
),
w AS (
    SELECT k.report_id, k.launch_id, k.kernel, k.function, k.device_name, k.compute_capability,
           fp.flop_fp64, fp.flop_fp32, fp.flop_fp16, tc.tensor_flop, tc.int_ops, tc.tensor_precision,
           coalesce(tc.unknown_shapes, false) AS unknown_tensor_shapes,
           coalesce(b.mma_active, false) AND oc.launch_id IS NULL AS tensor_uncounted,
           coalesce(fp.flop_fp64, 0) + coalesce(fp.flop_fp32, 0) + coalesce(fp.flop_fp16, 0)
               + coalesce(tc.tensor_flop, 0) AS flop,
           coalesce(b.dram_bytes, b.dram_read + b.dram_write, b.dram_bw * b.time_s) AS bytes,
           CASE WHEN b.dram_bytes IS NOT NULL THEN 'dram__bytes.sum'
                WHEN b.dram_read IS NOT NULL AND b.dram_write IS NOT NULL THEN 'dram__bytes_read+write.sum'
                WHEN b.dram_bw IS NOT NULL THEN 'dram__bytes.sum.per_second*duration' END AS bytes_source,
           b.time_s, b.tensor_pipe_pct, fp.flop_source,
           CASE WHEN fp.flop_fp64 IS NULL AND fp.flop_fp32 IS NULL AND fp.flop_fp16 IS NULL
                     AND tc.tensor_flop IS NULL THEN true ELSE false END AS no_flop_metrics
    FROM ncu_kernels k
    LEFT JOIN fp USING (report_id, launch_id)
    LEFT JOIN tc USING (report_id, launch_id)
    LEFT JOIN ncu_launch_basics b USING (report_id, launch_id)
    LEFT JOIN ncu_opcode_counted oc USING (report_id, launch_id)
),
p AS (
    -- unknown, not a smaller number: MMA work without opcode counts or of an unknown shape
    SELECT w.* REPLACE (CASE WHEN NOT (tensor_uncounted OR unknown_tensor_shapes) THEN flop END AS flop),
           CASE WHEN tensor_uncounted OR unknown_tensor_shapes THEN NULL
                WHEN greatest(coalesce(flop_fp64, 0), coalesce(flop_fp32, 0), coalesce(flop_fp16, 0),
                              coalesce(tensor_flop, 0), coalesce(int_ops, 0)) = 0 THEN NULL
                WHEN coalesce(int_ops, 0) > flop THEN 'int8_tensor'
                WHEN coalesce(tensor_flop, 0) >= greatest(coalesce(flop_fp64, 0), coalesce(flop_fp32, 0),
                                                          coalesce(flop_fp16, 0)) THEN tensor_precision
                WHEN coalesce(flop_fp64, 0) >= greatest(coalesce(flop_fp32, 0), coalesce(flop_fp16, 0)) THEN 'fp64'
                WHEN coalesce(flop_fp32, 0) >= coalesce(flop_fp16, 0) THEN 'fp32'
                ELSE 'fp16' END AS precision
    FROM w
),
r AS (
    SELECT p.*, pk.gpu, pk.peak_bw,
           CASE WHEN precision = 'int8_tensor' THEN int_ops ELSE flop END AS work,
           roof_for(precision, pk.peak_override, pk.peak_fp64, pk.peak_fp64_tensor, pk.peak_fp32, pk.peak_fp16,
                    pk.peak_tf32_tensor, pk.peak_fp16_tensor, pk.peak_int8_tensor) AS roof_flop_per_s
    FROM p LEFT JOIN roofline_peaks pk USING (report_id)
)
SELECT report_id, launch_id, kernel, function, device_name, gpu,
       flop_fp64, flop_fp32, flop_fp16, tensor_flop, int_ops, flop, bytes, time_s,
       flop / nullif(bytes, 0) AS ai_flop_per_byte,
       flop / nullif(time_s, 0) AS achieved_flop_per_s,
       precision, roof_flop_per_s, peak_bw AS roof_bytes_per_s,
       roof_flop_per_s / nullif(peak_bw, 0) AS ridge_ai,
       roof_bound(precision, work, bytes, roof_flop_per_s, peak_bw) AS bound,
       roof_pct(work, time_s, bytes, roof_flop_per_s, peak_bw) AS pct_of_roof,
       tensor_precision, tensor_pipe_pct, unknown_tensor_shapes, tensor_uncounted, flop_source, bytes_source,
       'ncu' AS source
FROM r
ORDER BY report_id, launch_id;
