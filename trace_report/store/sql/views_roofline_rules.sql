-- Roofline rules (docs/roofline.md): the one definition of a row's roof, bound and share of roof,
-- used by the ncu `roofline` view and by the estimated and per-name rooflines
-- (trace_report/analyses/roofline/measured.py).
-- roof_for: the roof (FLOP/s, OP/s for int8) of a precision class; a user override wins; fp16 without
--   its own peak falls back to fp32, fp64_tensor to fp64.
-- roof_bound: 'memory' below the ridge point (roof / DRAM bandwidth, FLOP/byte), else 'compute';
--   NULL without a precision, roof, bandwidth, work or bytes.
-- roof_pct: achieved / attainable x 100, attainable = min(roof, bandwidth x intensity) (Williams,
--   Waterman and Patterson, "Roofline", CACM 2009); least() skips an unknown bound.
CREATE OR REPLACE TEMP MACRO roof_for(precision, override, fp64, fp64_tensor, fp32, fp16, tf32_tensor,
                                      fp16_tensor, int8_tensor) AS
    coalesce(override, CASE precision
        WHEN 'fp64' THEN fp64 WHEN 'fp32' THEN fp32 WHEN 'fp16' THEN coalesce(fp16, fp32)
        WHEN 'fp64_tensor' THEN coalesce(fp64_tensor, fp64) WHEN 'tf32_tensor' THEN tf32_tensor
        WHEN 'fp16_tensor' THEN fp16_tensor WHEN 'int8_tensor' THEN int8_tensor END);

CREATE OR REPLACE TEMP MACRO roof_bound(precision, work, bytes, roof, bw) AS
    CASE WHEN precision IS NULL OR roof IS NULL OR bw IS NULL OR work IS NULL OR nullif(bytes, 0) IS NULL THEN NULL
         WHEN work / bytes < roof / bw THEN 'memory' ELSE 'compute' END;

CREATE OR REPLACE TEMP MACRO roof_pct(work, time_s, bytes, roof, bw) AS
    100.0 * (work / nullif(time_s, 0)) / nullif(least(roof, bw * work / nullif(bytes, 0)), 0);
