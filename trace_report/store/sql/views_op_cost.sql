-- The operator cost model: FLOP and minimum bytes of one CPU operator call from the shapes a trace
-- records with record_shapes=True ("Input Dims" (2021 traces: "Input dims"), "Input type",
-- "Concrete Inputs" in the args of cpu_op events). The one definition read by `ops` (ops.sql),
-- `modules` (modules_flop_ops.sql) and the roofline estimate (analyses/roofline/estimate.py).
--
-- FLOP: torch.utils.flop_counter's formulas (FlopCounterMode; one multiply-add = 2 FLOP, bias and
-- epilogues ignored), checked per operator against FlopCounterMode on meta tensors of the traces'
-- shapes (tests/store/test_op_cost.py):
--   mm [M,K]x[K,N], addmm (bias, [M,K], [K,N])     2*M*N*K
--   bmm, baddbmm [B,M,K]x[B,K,N]                     2*B*M*N*K
--   matmul                                           broadcast batch x 2*M*N*K (1-D operands as [1,K], [K,1])
--   linear (x [..., K], W [N, K])                    2 * prod(x[:-1]) * N * K
--   convolution (x [N,C,*S], W [Co,C/g,*k])          2 * N * Co * prod(S_out) * (C/g) * prod(k),
--       S_out = floor((S + 2p - d(k-1) - 1)/s) + 1 (stride, padding, dilation from "Concrete
--       Inputs" at the schema positions of op_conv_args); transposed: 2 * N * C * prod(S) * (Co/g) * prod(k)
--   convolution_backward                             the forward count once for grad input and
--       once for grad weight (output_mask). One deviation from torch: torch counts the grad weight
--       of a grouped convolution with all C input channels (g times its multiply-adds); here C/g.
--   scaled-dot-product attention q [B,H,Sq,D], k [B,Hkv,Sk,D], v [B,Hkv,Sk,Dv]
--       forward  2*B*H*Sq*Sk*(D + Dv)     (scores q.k^T, then scores.v; H = query heads, GQA included)
--       backward 2*B*H*Sq*Sk*(3D + 2Dv)   (five bmm's: scores again, grad scores, grad v, grad q, grad k)
--       aten::_flash_attention_forward/_backward take [B,S,H,D]; their variable-length form (cum_seq_q
--       recorded) has no per-sequence lengths in the trace: no count.
--   Causal attention: the full Sq x Sk matrix, torch.utils.flop_counter's convention ("NB: We
--   aren't accounting for causal attention here", sdpa_flop_count), chosen so that every count
--   equals FlopCounterMode's; TraceLens and the flash-attention benchmarks halve it for causal,
--   so their attention FLOP of a causal call is half of ours.
-- Bytes (a lower bound of DRAM traffic): every tensor the formula reads and the output it writes,
-- once each, at the element size of the first "Input type" with a known size (op_elem_bytes; 4
-- when none): GEMMs their operands, bias and output; convolutions x, W and the output (backward:
-- plus the grads of output_mask); attention q, k, v and the output (backward: grad out, q, k, v,
-- out, and the grads of q, k, v).
-- NULL where the args do not allow a count, with a note saying why. TEMP macros and view, created
-- on every connection.

-- The operators of the model and their family (NULL: not counted).
CREATE OR REPLACE TEMP MACRO op_cost_kind(name) AS CASE
    WHEN name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::matmul', 'aten::linear')
        THEN 'gemm'
    WHEN name IN ('aten::conv1d', 'aten::conv2d', 'aten::conv3d', 'aten::convolution', 'aten::_convolution',
                  'aten::cudnn_convolution', 'aten::miopen_convolution', 'aten::mkldnn_convolution',
                  'aten::convolution_backward', 'aten::cudnn_convolution_backward')
        THEN 'conv'
    WHEN name IN ('aten::scaled_dot_product_attention', 'aten::_scaled_dot_product_flash_attention',
                  'aten::_scaled_dot_product_efficient_attention', 'aten::_scaled_dot_product_cudnn_attention',
                  'aten::_flash_attention_forward', 'aten::_scaled_dot_product_flash_attention_backward',
                  'aten::_scaled_dot_product_efficient_attention_backward',
                  'aten::_scaled_dot_product_cudnn_attention_backward', 'aten::_flash_attention_backward')
        THEN 'attention'
END;

-- Bytes of one element of an "Input type" (NULL: not a tensor type the model knows).
CREATE OR REPLACE TEMP MACRO op_elem_bytes(t) AS CASE t
    WHEN 'float' THEN 4 WHEN 'double' THEN 8 WHEN 'c10::Half' THEN 2 WHEN 'c10::BFloat16' THEN 2
    WHEN 'long int' THEN 8 WHEN 'long' THEN 8 WHEN 'int' THEN 4 WHEN 'short' THEN 2
    WHEN 'signed char' THEN 1 WHEN 'unsigned char' THEN 1 WHEN 'bool' THEN 1
    WHEN 'c10::Float8_e4m3fn' THEN 1 WHEN 'c10::Float8_e5m2' THEN 1 WHEN 'c10::complex<float>' THEN 8
END;

-- The number of elements of a shape (1 for [], a scalar), as a DOUBLE.
CREATE OR REPLACE TEMP MACRO op_prod(l) AS
    CAST(coalesce(list_aggregate(l, 'product'), 1) AS DOUBLE);

-- Whether "Input Dims" (JSON) was recorded: a list of at least two shapes (lists).
CREATE OR REPLACE TEMP MACRO op_shapes_recorded(j) AS
    coalesce(json_type(j) = 'ARRAY' AND json_array_length(j) >= 2
             AND list_bool_and(list_transform(CAST(j AS JSON[]), lambda e: json_type(e) = 'ARRAY')), false);

CREATE OR REPLACE TEMP MACRO op_conc_int(v) AS
    CASE lower(v) WHEN 'true' THEN 1 WHEN 'false' THEN 0 ELSE CAST(v AS BIGINT) END;

-- One "Concrete Inputs" value as n integers: an int or a bool repeated n times, a list of ints or
-- bools (one value repeated n times, [] = dflt n times), NULL for anything else ('' = not recorded).
CREATE OR REPLACE TEMP MACRO op_conc_ints(txt, n, dflt) AS list_transform([trim(txt)], lambda s: CASE
    WHEN regexp_full_match(s, '-?\d+|(?i:true|false)') THEN list_transform(range(n), lambda i: op_conc_int(s))
    WHEN regexp_full_match(s, '\[\s*\]') THEN list_transform(range(n), lambda i: dflt)
    WHEN regexp_full_match(s, '\[\s*(-?\d+|(?i:true|false))(\s*,\s*(-?\d+|(?i:true|false)))*\s*\]')
        THEN list_transform([list_transform(string_split(trim(s, '[]'), ','), lambda v: op_conc_int(trim(v)))],
                            lambda l: CASE WHEN len(l) = 1 THEN list_transform(range(n), lambda i: l[1]) ELSE l END)[1]
END)[1];

-- Positions (0-based, the operator's schema in native_functions.yaml) of the convolution
-- arguments in "Concrete Inputs"; NULL: the operator has no such argument (its default applies).
CREATE OR REPLACE TEMP MACRO op_conv_args(name) AS CASE
    WHEN name IN ('aten::conv1d', 'aten::conv2d', 'aten::conv3d')
        THEN {'stride': 3, 'padding': 4, 'dilation': 5, 'transposed': NULL, 'output_padding': NULL,
              'groups': 6, 'output_mask': NULL}
    WHEN name IN ('aten::convolution', 'aten::_convolution')
        THEN {'stride': 3, 'padding': 4, 'dilation': 5, 'transposed': 6, 'output_padding': 7, 'groups': 8,
              'output_mask': NULL}
    WHEN name = 'aten::cudnn_convolution'
        THEN {'stride': 3, 'padding': 2, 'dilation': 4, 'transposed': NULL, 'output_padding': NULL,
              'groups': 5, 'output_mask': NULL}
    WHEN name IN ('aten::miopen_convolution', 'aten::mkldnn_convolution')
        THEN {'stride': 4, 'padding': 3, 'dilation': 5, 'transposed': NULL, 'output_padding': NULL,
              'groups': 6, 'output_mask': NULL}
    WHEN name = 'aten::convolution_backward'
        THEN {'stride': 4, 'padding': 5, 'dilation': 6, 'transposed': 7, 'output_padding': 8, 'groups': 9,
              'output_mask': 10}
    WHEN name = 'aten::cudnn_convolution_backward'
        THEN {'stride': 4, 'padding': 3, 'dilation': 5, 'transposed': NULL, 'output_padding': NULL,
              'groups': 6, 'output_mask': 10}
END;

-- The convolution argument at position pos as n integers (op_conc_ints); dflt n times when the
-- operator has no such argument, NULL when it was not recorded.
CREATE OR REPLACE TEMP MACRO op_conv_arg(conc, pos, n, dflt) AS CASE
    WHEN pos IS NULL THEN list_transform(range(n), lambda i: dflt)
    WHEN conc IS NULL OR pos >= len(conc) THEN NULL
    ELSE op_conc_ints(conc[pos + 1], n, dflt)
END;

-- Padding: also the strings 'valid' (none) and 'same' ((k-1)/2 for each kernel size k of w).
CREATE OR REPLACE TEMP MACRO op_conv_padding(conc, pos, n, w) AS CASE
    WHEN pos IS NULL OR conc IS NULL OR pos >= len(conc) THEN NULL
    WHEN trim(conc[pos + 1], ' ''"') = 'valid' THEN list_transform(range(n), lambda i: 0)
    WHEN trim(conc[pos + 1], ' ''"') = 'same' THEN list_transform(w[3:], lambda k: (k - 1) // 2)
    ELSE op_conc_ints(conc[pos + 1], n, 0)
END;

-- The output shape of a forward convolution of x by w.
CREATE OR REPLACE TEMP MACRO op_conv_out(x, w, transposed, groups, stride, pad, dil, outp) AS CASE
    WHEN transposed THEN [x[1], w[2] * groups] || list_transform(range(len(x) - 2), lambda i:
        (x[i + 3] - 1) * stride[i + 1] - 2 * pad[i + 1] + dil[i + 1] * (w[i + 3] - 1) + outp[i + 1] + 1)
    ELSE [x[1], w[1]] || list_transform(range(len(x) - 2), lambda i:
        (x[i + 3] + 2 * pad[i + 1] - dil[i + 1] * (w[i + 3] - 1) - 1) // stride[i + 1] + 1)
END;

-- The number of elements of the broadcast of two batch shapes (numpy rules: sizes of 1 padded on
-- the left).
CREATE OR REPLACE TEMP MACRO op_broadcast_prod(a, b) AS op_prod(list_transform(range(greatest(len(a), len(b))), lambda i:
    greatest(CASE WHEN i >= greatest(len(a), len(b)) - len(a) THEN a[i - greatest(len(a), len(b)) + len(a) + 1] ELSE 1 END,
             CASE WHEN i >= greatest(len(a), len(b)) - len(b) THEN b[i - greatest(len(a), len(b)) + len(b) + 1] ELSE 1 END)));

-- [B, S, H, D] (flash attention's own layout) as [B, H, S, D].
CREATE OR REPLACE TEMP MACRO op_bshd(t) AS CASE WHEN len(t) = 4 THEN [t[1], t[3], t[2], t[4]] END;

-- The model, applied to every call of an operator of op_cost_kind: its thread and interval (µs),
-- External id, "Input Dims" as JSON text (input_dims_json, NULL when absent), dtype (the first
-- "Input type" with a known size), flop and bytes (DOUBLE, NULL where the args do not allow a
-- count) and note (why not). Stages: the args; each family's tensors by role; the convolution
-- arguments and output shape, the GEMM output; the counts.
CREATE OR REPLACE TEMP VIEW op_costs AS  -- kept per trace; a table in report
WITH a AS (
    SELECT trace_id, event_id, name, pid, tid, ts_us, dur_us, external_id, op_cost_kind(name) AS kind,
           try(json_extract(args, ['$."Input Dims"', '$."Input dims"', '$."Input type"', '$."Concrete Inputs"'])) AS j
    FROM events
    WHERE cat = 'cpu_op' AND op_cost_kind(name) IS NOT NULL
),
args AS (  -- "Input Dims", else (empty or absent) "Input dims", as the Python profiler's 2021 traces wrote it
    SELECT * EXCLUDE (j, dj), CAST(j[1] AS VARCHAR) AS input_dims_json, TRY_CAST(dj AS BIGINT[][]) AS dims,
           op_shapes_recorded(dj) AS recorded, TRY_CAST(j[4] AS VARCHAR[]) AS conc,
           list_filter(TRY_CAST(j[3] AS VARCHAR[]), lambda t: op_elem_bytes(t) IS NOT NULL)[1] AS dtype
    FROM (SELECT *, CASE WHEN j[1] IS NOT NULL AND CAST(j[1] AS VARCHAR) <> '[]' THEN j[1] ELSE j[2] END AS dj FROM a)
),
roles AS (  -- conv: x (input), w (weight), gy (grad output; NULL forward); gemm: ma x mb + bias;
            -- attention: q, k, v, go (grad output; NULL forward) as [B, H, S, D]; NULL for the other families
    SELECT *, coalesce(op_elem_bytes(dtype), 4) AS elem,
           CASE WHEN kind = 'conv' THEN CASE name WHEN 'aten::cudnn_convolution_backward' THEN dims[1]
                                                  WHEN 'aten::convolution_backward' THEN dims[2] ELSE dims[1] END END AS x,
           CASE WHEN kind = 'conv' THEN CASE WHEN name LIKE '%backward' THEN dims[3] ELSE dims[2] END END AS w,
           CASE WHEN kind = 'conv' THEN CASE name WHEN 'aten::cudnn_convolution_backward' THEN dims[2]
                                                  WHEN 'aten::convolution_backward' THEN dims[1] END END AS gy,
           CASE WHEN kind = 'gemm' THEN CASE WHEN name IN ('aten::addmm', 'aten::baddbmm') THEN dims[2] ELSE dims[1] END
           END AS ma,
           CASE WHEN kind = 'gemm' THEN CASE WHEN name IN ('aten::addmm', 'aten::baddbmm') THEN dims[3] ELSE dims[2] END
           END AS mb,
           CASE WHEN name IN ('aten::addmm', 'aten::baddbmm') THEN dims[1] WHEN name = 'aten::linear' THEN dims[3] END AS bias,
           CASE WHEN kind <> 'attention' THEN NULL
                WHEN name = 'aten::_flash_attention_forward' AND len(dims[4]) = 0 THEN op_bshd(dims[1])
                WHEN name = 'aten::_flash_attention_backward' AND len(dims[7]) = 0 THEN op_bshd(dims[2])
                WHEN name LIKE 'aten::_scaled_dot_product_%_backward' THEN dims[2]
                WHEN name NOT LIKE 'aten::_flash_attention_%' THEN dims[1] END AS q,
           CASE WHEN kind <> 'attention' THEN NULL
                WHEN name = 'aten::_flash_attention_forward' AND len(dims[4]) = 0 THEN op_bshd(dims[2])
                WHEN name = 'aten::_flash_attention_backward' AND len(dims[7]) = 0 THEN op_bshd(dims[3])
                WHEN name LIKE 'aten::_scaled_dot_product_%_backward' THEN dims[3]
                WHEN name NOT LIKE 'aten::_flash_attention_%' THEN dims[2] END AS k,
           CASE WHEN kind <> 'attention' THEN NULL
                WHEN name = 'aten::_flash_attention_forward' AND len(dims[4]) = 0 THEN op_bshd(dims[3])
                WHEN name = 'aten::_flash_attention_backward' AND len(dims[7]) = 0 THEN op_bshd(dims[4])
                WHEN name LIKE 'aten::_scaled_dot_product_%_backward' THEN dims[4]
                WHEN name NOT LIKE 'aten::_flash_attention_%' THEN dims[3] END AS v,
           CASE WHEN kind <> 'attention' THEN NULL
                WHEN name = 'aten::_flash_attention_backward' AND len(dims[7]) = 0 THEN op_bshd(dims[1])
                WHEN name LIKE 'aten::_scaled_dot_product_%_backward' THEN dims[1] END AS go,
           op_conv_args(name) AS pos
    FROM args
),
-- MATERIALIZED: inlined into a query that aggregates the view, the stages made DuckDB's planner
-- take seconds
params AS MATERIALIZED (  -- conv: the arguments (stride, pad, dil NULL when not recorded); gemm: 1-D operands as [1, K], [K, 1]
    SELECT *,
           coalesce(op_conv_arg(conc, pos.groups, len(x) - 2, 1)[1], 1) AS groups,
           coalesce(op_conv_arg(conc, pos.transposed, len(x) - 2, 0)[1], 0) <> 0 AS transposed,
           op_conv_arg(conc, pos.stride, len(x) - 2, 1) AS stride,
           op_conv_padding(conc, pos.padding, len(x) - 2, w) AS pad,
           op_conv_arg(conc, pos.dilation, len(x) - 2, 1) AS dil,
           coalesce(op_conv_arg(conc, pos.output_padding, len(x) - 2, 0), list_transform(range(len(x) - 2), lambda i: 0))
               AS outp,
           coalesce(op_conv_arg(conc, pos.output_mask, len(x) - 2, 1), [1, 1, 0]) AS mask,
           CASE WHEN len(ma) >= 2 THEN ma ELSE [1] || ma END AS a2,
           CASE WHEN len(mb) >= 2 THEN mb ELSE mb || [1] END AS b2
    FROM roles
),
shapes AS MATERIALIZED (  -- conv: y, the output (forward) or grad output; gemm: out, the output's elements, and K
    SELECT *,
           CASE WHEN kind <> 'conv' OR len(x) < 3 OR len(w) <> len(x) THEN NULL
                WHEN gy IS NOT NULL THEN gy
                WHEN stride IS NULL OR pad IS NULL OR dil IS NULL THEN NULL
                ELSE op_conv_out(x, w, transposed, groups, stride, pad, dil, outp) END AS y,
           CASE WHEN name = 'aten::linear' THEN op_prod(ma[1:len(ma) - 1]) * mb[1]
                ELSE op_broadcast_prod(a2[1:len(a2) - 2], b2[1:len(b2) - 2]) * a2[len(a2) - 1] * b2[len(b2)] END AS out,
           CASE WHEN name = 'aten::linear' THEN ma[len(ma)] ELSE a2[len(a2)] END AS kk
    FROM params
),
counts AS (
    SELECT *,
           CASE kind
               WHEN 'gemm' THEN 2.0 * out * kk
               WHEN 'conv' THEN CASE WHEN y IS NOT NULL THEN 2.0 * (CASE WHEN gy IS NULL THEN 1 ELSE (mask[1] <> 0)::INT + (mask[2] <> 0)::INT END)
                   * CASE WHEN transposed THEN op_prod(x[1:2]) * op_prod(x[3:]) * (y[2] // groups) * op_prod(w[3:])
                          ELSE op_prod(y[1:2]) * op_prod(y[3:]) * (x[2] // groups) * op_prod(w[3:]) END END
               WHEN 'attention' THEN CASE WHEN len(q) = 4 AND len(k) = 4 AND len(v) = 4 AND (go IS NULL OR len(go) = 4)
                   THEN 2.0 * q[1] * q[2] * q[3] * k[3] * CASE WHEN go IS NULL THEN q[4] + v[4] ELSE 3 * q[4] + 2 * v[4] END END
           END AS flop_of,
           elem * CASE kind
               WHEN 'gemm' THEN op_prod(ma) + op_prod(mb) + CASE WHEN len(bias) > 0 THEN op_prod(bias) ELSE 0 END + out
               WHEN 'conv' THEN CASE WHEN y IS NOT NULL THEN op_prod(x) + op_prod(w) + op_prod(y) END
                   + CASE WHEN gy IS NOT NULL AND mask[1] <> 0 THEN op_prod(x) ELSE 0 END
                   + CASE WHEN gy IS NOT NULL AND mask[2] <> 0 THEN op_prod(w) ELSE 0 END
               WHEN 'attention' THEN CASE WHEN go IS NULL THEN op_prod(q) + op_prod(k) + op_prod(v) + op_prod([q[1], q[2], q[3], v[4]])
                                          ELSE 2 * (op_prod(go) + op_prod(q) + op_prod(k) + op_prod(v)) END
           END AS bytes_of
    FROM shapes
)
SELECT trace_id, event_id, name, pid, tid, ts_us, dur_us, external_id, input_dims_json, dtype,
       CASE WHEN recorded AND bytes_of IS NOT NULL THEN flop_of END AS flop,
       CASE WHEN recorded AND flop_of IS NOT NULL THEN bytes_of END AS bytes,
       CASE WHEN NOT recorded THEN 'no ''Input Dims'' (record_shapes=False?)'
            WHEN flop_of IS NOT NULL AND bytes_of IS NOT NULL THEN NULL
            WHEN kind = 'conv' AND gy IS NULL AND len(x) >= 3 AND len(w) = len(x) AND (stride IS NULL OR pad IS NULL OR dil IS NULL)
                THEN 'stride/padding not recorded (no ''Concrete Inputs'')'
            ELSE 'unexpected input shapes' END AS note
FROM counts;
