-- The GPU of each trace: its deviceProperties name and compute capability when the trace records
-- them, else the architecture its kernel names were built for (trace_report.analyses.device_arch).
--
-- Vendor libraries name their kernels after the architecture they were compiled and tuned for:
-- cuBLAS/cuDNN `volta_sgemm_*`, `turing_fp16_s1688gemm_*`, `ampere_sgemm_*`, `sm80_xmma_*`,
-- `sm90_xmma_*`, CUTLASS 3 `cutlass3x_sm90_*`/`sm100_*`, cuBLAS's `nvjet_*` (Hopper and later); on
-- AMD, Tensile/hipBLASLt GEMMs `Cijk_*_MI16x16x1_*_ISA942_*` (MFMA instruction, gfx target) and
-- composable_kernel's `ck::` namespace (mangled `_ZN2ck`). A kernel built for an architecture runs
-- on it or a later one (a 2080 Ti, sm75, runs cuBLAS's volta_sgemm), so the architecture inferred
-- is the newest one the names show: a lower bound of the device's, never above it, which keeps
-- the sm80-only rules (TF32) from firing on an older GPU.
-- Sources: CUDA C++ Programming Guide, "Binary Compatibility" (a cubin built for compute
-- capability X.y runs only on X.z, z >= y: the name's architecture is a lower bound); the names in
-- ../shared/data (V100 volta_*, A100 ampere_*/sm80_xmma_*, H100 sm90_xmma_*, B200 sm100_*/nvjet_*,
-- MI250 Cijk_*_ISA90a_*, MI300X Cijk_*_ISA942_* and _ZN2ck, tests/analyses/test_device_arch.py);
-- ROCm Tensile docs, "Nomenclature" and "Kernel parameters" (solution names: Cijk_ contraction,
-- MT macro tile, MI MatrixInstruction = MFMA, found on CDNA/Instinct, ISA gfx target);
-- ROCm composable_kernel (C++ namespace ck, include/ck/ck.hpp).
--
-- device_arch_rules: token (as the evidence names it), RE2 pattern over the kernel name, vendor,
-- arch, label (the class of GPU), cc (compute capability as deviceProperties would give it; AMD:
-- HIP's major.minor of the gfx target), rank (newer architectures higher), source.
CREATE OR REPLACE TEMP VIEW device_arch_rules AS
SELECT * FROM (VALUES
    ('volta_', '(^|[^A-Za-z])volta_', 'NVIDIA', 'sm70', 'V100-class', 7.0, 70,
     'cuBLAS/cuDNN kernel names: volta_sgemm_*, volta_fp16_s884gemm_*, volta_scudnn_*'),
    ('sm70', '(?i)(^|[^a-z0-9])sm_?70([^0-9]|$)', 'NVIDIA', 'sm70', 'V100-class', 7.0, 70,
     'cuDNN/CUTLASS kernel names: sm70_xmma_*'),
    ('turing_', '(^|[^A-Za-z])turing_', 'NVIDIA', 'sm75', 'T4/2080-class', 7.5, 75,
     'cuBLAS/cuDNN kernel names: turing_fp16_s1688gemm_*'),
    ('sm75', '(?i)(^|[^a-z0-9])sm_?75([^0-9]|$)', 'NVIDIA', 'sm75', 'T4/2080-class', 7.5, 75,
     'cuDNN/CUTLASS kernel names: sm75_xmma_*'),
    ('ampere_', '(^|[^A-Za-z])ampere_', 'NVIDIA', 'sm80', 'A100-class', 8.0, 80,
     'cuBLAS/cuDNN kernel names: ampere_sgemm_*, ampere_fp16_s16816gemm_*'),
    ('sm80', '(?i)(^|[^a-z0-9])sm_?80([^0-9]|$)', 'NVIDIA', 'sm80', 'A100-class', 8.0, 80,
     'cuDNN/cuBLASLt/CUTLASS kernel names: sm80_xmma_*'),
    ('sm86', '(?i)(^|[^a-z0-9])sm_?86([^0-9]|$)', 'NVIDIA', 'sm86', 'A10/3090-class', 8.6, 86,
     'cuDNN/CUTLASS kernel names: sm86_xmma_*'),
    ('sm89', '(?i)(^|[^a-z0-9])sm_?89([^0-9]|$)', 'NVIDIA', 'sm89', 'L40/4090-class', 8.9, 89,
     'cuDNN/CUTLASS kernel names: sm89_xmma_*'),
    ('sm90', '(?i)(^|[^a-z0-9])sm_?90a?([^0-9]|$)', 'NVIDIA', 'sm90', 'H100-class', 9.0, 90,
     'cuDNN/cuBLASLt/CUTLASS kernel names: sm90_xmma_*, cutlass3x_sm90_*'),
    ('hopper', '(?i)hopper', 'NVIDIA', 'sm90', 'H100-class', 9.0, 90,
     'kernel names that say Hopper'),
    ('nvjet_', '^nvjet_', 'NVIDIA', 'sm90', 'H100-class', 9.0, 90,
     'cuBLAS 12 nvjet_* GEMM kernels, made for Hopper and later'),
    ('sm100', '(?i)(^|[^a-z0-9])sm_?10[0-3][af]?([^0-9]|$)', 'NVIDIA', 'sm100', 'Blackwell-class (B200)', 10.0, 100,
     'cuBLASLt/CUTLASS kernel names: sm100_xmma_*, cutlass3x_sm100_*'),
    ('sm120', '(?i)(^|[^a-z0-9])sm_?12[0-1][af]?([^0-9]|$)', 'NVIDIA', 'sm120', 'Blackwell-class (RTX 50)', 12.0, 120,
     'CUTLASS kernel names: sm120_*'),
    ('Cijk_', '^Cijk_', 'AMD', 'gfx9xx', 'AMD Instinct', 9.0, 900,
     'Tensile (rocBLAS/hipBLASLt) GEMM kernel names: Cijk_<layout>_<types>_MT<tile>_MI<mfma>_..._ISA<gfx>'),
    ('_ZN2ck', '^_ZN2ck|(^|[^a-z])ck::', 'AMD', 'gfx9xx', 'AMD Instinct', 9.0, 900,
     'composable_kernel kernels: C++ namespace ck (mangled _ZN2ck)')
) AS t(token, pattern, vendor, arch, label, cc, rank, source);

-- Per trace (rows of `names`, a relation of gpu_op_names' rows): the device as recorded, else the
-- architecture its kernel names show. arch: 'sm80', 'gfx942'... (NULL when neither says);
-- vendor: 'NVIDIA' | 'AMD'; cc: DOUBLE, the recorded compute capability or the inferred lower
-- bound; evidence: e.g. 'V100-class, from 9,538 volta_* kernels' (the token of the inferred
-- architecture with the most kernels, and their count); source: 'deviceProperties' | 'kernel names'.
CREATE OR REPLACE TEMP MACRO device_arch_of(names) AS TABLE
WITH hits AS (
    SELECT n.trace_id, r.token, r.vendor, r.arch, r.label, r.cc, r.rank, sum(n.ops) AS kernels
    FROM query_table(names) n JOIN device_arch_rules r ON regexp_matches(n.name, r.pattern)
    WHERE n.cat = 'kernel'
    GROUP BY ALL
),
-- the gfx target Tensile writes (ISA942, ISA90a) or a gfx name, for AMD
gfx AS (
    SELECT n.trace_id,
           arg_max(lower(coalesce(nullif(regexp_extract(n.name, '_ISA(9[0-9][0-9a-f])(_|$)', 1), ''),
                                  regexp_extract(n.name, 'gfx(9[0-9][0-9a-f])', 1))), n.ops) AS target
    FROM query_table(names) n
    WHERE n.cat = 'kernel' AND regexp_matches(n.name, '_ISA9[0-9][0-9a-f](_|$)|gfx9[0-9][0-9a-f]')
    GROUP BY ALL
),
-- the vendor with the most kernels, then its newest architecture, then that one's commonest token
per_vendor AS (SELECT *, sum(kernels) OVER (PARTITION BY trace_id, vendor) AS vendor_kernels FROM hits),
best AS (
    SELECT * EXCLUDE (vendor_kernels) FROM per_vendor
    QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY vendor_kernels DESC, rank DESC, kernels DESC, token) = 1
),
inferred AS (
    SELECT b.trace_id, b.vendor, b.token, b.kernels,
           CASE WHEN b.vendor = 'AMD' AND g.target IS NOT NULL THEN 'gfx' || g.target ELSE b.arch END AS arch,
           CASE WHEN b.vendor = 'AMD' AND g.target IS NOT NULL
                THEN CASE g.target WHEN '942' THEN 'AMD Instinct MI300-class' WHEN '950' THEN 'AMD Instinct MI350-class'
                                   WHEN '90a' THEN 'AMD Instinct MI200-class' WHEN '908' THEN 'AMD Instinct MI100-class'
                                   ELSE b.label END
                ELSE b.label END AS label,
           CASE WHEN b.vendor = 'AMD' AND g.target IS NOT NULL
                THEN 9 + coalesce(try_cast(substr(g.target, 2, 1) AS INTEGER), 0) / 10.0 ELSE b.cc END AS cc
    FROM best b LEFT JOIN gfx g ON g.trace_id = b.trace_id
),
described AS (
    SELECT *, label || ', from ' || format('{:,}', kernels) || ' ' || token
              || CASE WHEN ends_with(token, '_') THEN '* ' ELSE ' ' END
              || CASE WHEN kernels = 1 THEN 'kernel' ELSE 'kernels' END AS evidence
    FROM inferred
),
recorded AS (
    SELECT trace_id, device_name, try_cast(compute_capability AS DOUBLE) AS cc,
           regexp_matches(coalesce(device_name, ''), '(?i)\bamd\b|instinct|radeon|\bmi[0-9]{3}') AS amd
    FROM traces
)
SELECT t.trace_id, t.device_name,
       CASE WHEN t.cc IS NULL THEN i.arch
            WHEN t.amd THEN coalesce(CASE WHEN i.vendor = 'AMD' THEN i.arch END,
                                     'gfx' || replace(CAST(t.cc AS VARCHAR), '.', '') || 'x')
            ELSE 'sm' || CAST(round(t.cc * 10) AS INTEGER) END AS arch,
       CASE WHEN t.cc IS NULL THEN i.vendor WHEN t.amd THEN 'AMD' ELSE 'NVIDIA' END AS vendor,
       coalesce(t.cc, i.cc) AS cc,
       CASE WHEN t.cc IS NULL AND i.trace_id IS NOT NULL THEN i.evidence ELSE t.device_name END AS evidence,
       CASE WHEN t.cc IS NOT NULL OR (t.device_name IS NOT NULL AND i.trace_id IS NULL) THEN 'deviceProperties'
            WHEN i.trace_id IS NOT NULL THEN 'kernel names' END AS source,
       i.arch AS inferred_arch, i.vendor AS inferred_vendor, i.cc AS inferred_cc, i.label AS inferred_label,
       i.evidence AS inferred_evidence
FROM recorded t LEFT JOIN described i ON i.trace_id = t.trace_id;

CREATE OR REPLACE TEMP VIEW device_arch AS SELECT * FROM device_arch_of('gpu_op_names');
