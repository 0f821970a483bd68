-- FLOP of one operator call from its name and args (record_shapes=True), by the formulas of
-- torch.utils.flop_counter (FlopCounterMode): mm/addmm 2mkn, bmm/baddbmm 2bmkn, convolution
-- 2 * N * K * C/g * prod(filter) * prod(output spatial) (input spatial when transposed;
-- output from stride/padding/dilation in "Concrete Inputs"), convolution_backward (grad input
-- and/or grad weight per output_mask), scaled-dot-product attention 2bh*s_q*s_k*(d_q + d_v)
-- and its backward (five bmm's). NULL where the args do not allow it (no shapes, no concrete
-- stride). TEMP macro and view, created on every connection; used by analyses/ops/ops.sql.
CREATE OR REPLACE TEMP MACRO op_conv_out(x, w, stride, pad, dil) AS
    list_transform(range(len(x) - 2), lambda i:
        (x[i + 3] + 2 * pad[i + 1] - dil[i + 1] * (w[i + 3] - 1) - 1) // stride[i + 1] + 1);

CREATE OR REPLACE TEMP MACRO op_prod(l) AS
    CAST(coalesce(list_aggregate(l, 'product'), 1) AS DOUBLE);

CREATE OR REPLACE TEMP VIEW op_flop_inputs AS
SELECT trace_id, event_id, name,
       TRY_CAST(a -> '$."Input Dims"' AS BIGINT[][]) AS dims,
       TRY_CAST(a -> '$."Concrete Inputs"' AS VARCHAR[]) AS conc
FROM (SELECT trace_id, event_id, name, args::JSON AS a FROM cpu_ops
      WHERE name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::convolution',
                     'aten::_convolution', 'aten::convolution_backward',
                     'aten::_scaled_dot_product_efficient_attention', 'aten::_scaled_dot_product_flash_attention',
                     'aten::_scaled_dot_product_cudnn_attention',
                     'aten::_scaled_dot_product_efficient_attention_backward',
                     'aten::_scaled_dot_product_flash_attention_backward',
                     'aten::_scaled_dot_product_cudnn_attention_backward'));

CREATE OR REPLACE TEMP VIEW op_flops AS  -- kept per trace
WITH d AS (
    SELECT *,
           TRY_CAST(conc[4] AS BIGINT[]) AS c4, TRY_CAST(conc[5] AS BIGINT[]) AS c5,
           TRY_CAST(conc[6] AS BIGINT[]) AS c6, lower(conc[7]) = 'true' AS c7_true,
           TRY_CAST(lower(conc[11]) AS BOOLEAN[]) AS c11
    FROM op_flop_inputs
)
SELECT trace_id, event_id, CASE
    WHEN name = 'aten::mm' AND len(dims[1]) = 2 AND len(dims[2]) = 2
        THEN 2.0 * dims[1][1] * dims[1][2] * dims[2][2]
    WHEN name = 'aten::addmm' AND len(dims[2]) = 2 AND len(dims[3]) = 2
        THEN 2.0 * dims[2][1] * dims[2][2] * dims[3][2]
    WHEN name = 'aten::bmm' AND len(dims[1]) = 3 AND len(dims[2]) = 3
        THEN 2.0 * dims[1][1] * dims[1][2] * dims[1][3] * dims[2][3]
    WHEN name = 'aten::baddbmm' AND len(dims[2]) = 3 AND len(dims[3]) = 3
        THEN 2.0 * dims[2][1] * dims[2][2] * dims[2][3] * dims[3][3]
    WHEN name IN ('aten::convolution', 'aten::_convolution') AND len(dims[1]) >= 3 AND len(dims[2]) = len(dims[1])
         AND (c7_true OR (len(c4) = len(dims[1]) - 2 AND len(c5) = len(c4) AND len(c6) = len(c4)))
        THEN 2.0 * dims[1][1] * dims[2][1] * dims[2][2] * op_prod(dims[2][3:])
             * op_prod(CASE WHEN c7_true THEN dims[1][3:] ELSE op_conv_out(dims[1], dims[2], c4, c5, c6) END)
    WHEN name = 'aten::convolution_backward' AND len(dims[1]) >= 3 AND len(dims[3]) = len(dims[1]) AND len(c11) >= 2
        -- grad_out = dims[1], input = dims[2], weight = dims[3]; non-transposed shapes
        THEN (CASE WHEN c11[1] THEN 2.0 * dims[1][1] * dims[3][1] * dims[3][2] * op_prod(dims[3][3:]) * op_prod(dims[1][3:]) ELSE 0 END)
           + (CASE WHEN c11[2] THEN 2.0 * dims[2][2] * dims[1][1] * dims[1][2] * op_prod(dims[3][3:]) * op_prod(dims[1][3:]) ELSE 0 END)
    WHEN name IN ('aten::_scaled_dot_product_efficient_attention', 'aten::_scaled_dot_product_flash_attention',
                  'aten::_scaled_dot_product_cudnn_attention') AND len(dims[1]) = 4 AND len(dims[2]) = 4 AND len(dims[3]) = 4
        THEN 2.0 * dims[1][1] * dims[1][2] * dims[1][3] * dims[2][3] * (dims[1][4] + dims[3][4])
    WHEN name LIKE 'aten::_scaled_dot_product_%_attention_backward' AND len(dims[2]) = 4 AND len(dims[3]) = 4 AND len(dims[4]) = 4
        -- q = dims[2], k = dims[3], v = dims[4]: five bmm's (scores, grad scores, grad v, grad q, grad k)
        THEN 2.0 * dims[2][1] * dims[2][2] * dims[2][3] * dims[3][3] * (3 * dims[2][4] + 2 * dims[4][4])
END AS flop
FROM d;

-- The CPU operators the roofline's FLOP estimate counts (trace_report/analyses/roofline/estimate.py:
-- ESTIMATED_OPS, the same names, checked by tests/analyses/roofline/test_roofline_estimate_view.py) with the
-- args it reads (_COUNTED_ARGS) as JSON text, NULL when absent: one row per call with a duration.
-- The estimate itself (shapes to FLOP and bytes) runs in Python on these rows.
CREATE OR REPLACE TEMP VIEW estimate_op_args AS  -- kept per trace
SELECT trace_id, event_id, name, pid, tid, ts_us, dur_us, external_id,
       try(json_extract(args, '$."Input Dims"')) AS a0, try(json_extract(args, '$."Input dims"')) AS a1,
       try(json_extract(args, '$."Input type"')) AS a2, try(json_extract(args, '$."Concrete Inputs"')) AS a3
FROM events
WHERE cat = 'cpu_op' AND dur_us IS NOT NULL
  AND name IN ('aten::_convolution', 'aten::addmm', 'aten::baddbmm', 'aten::bmm', 'aten::conv1d', 'aten::conv2d',
               'aten::conv3d', 'aten::convolution', 'aten::convolution_backward', 'aten::cudnn_convolution',
               'aten::cudnn_convolution_backward', 'aten::linear', 'aten::matmul', 'aten::miopen_convolution',
               'aten::mkldnn_convolution', 'aten::mm');
