-- Regions of a training step (docs/analysis.md): forward, loss, backward, optimizer_step,
-- data_loading; everything else is 'other'. TEMP views, created on every connection.
-- Times in microseconds on the trace's own clock. Used by trace_report/analyses/breakdown/__init__.py.

-- Which annotation names mark which region. First matching rule (lowest priority) wins.
-- scope: 'any' = user_annotation, gpu_user_annotation or cpu_op;
--        'label' = user_annotation, gpu_user_annotation, or a cpu_op whose name has no '::'
--                  (record_function labels and autograd node names, which 2020/2021 traces
--                  store as 'Operator' = cpu_op);
--        'cpu_op' = cpu_op only.
CREATE OR REPLACE TEMP VIEW region_rules AS
SELECT * FROM (VALUES
    ('evaluate_function', 10, 'backward', '^autograd::engine::evaluate_function: ', 'any',
     'autograd engine node: runs in the backward pass (autograd thread)',
     'torch-tb-profiler (pytorch/kineto tb_plugin) op tree: autograd::engine::evaluate_function -> backward'),
    ('optimizer_hook', 20, 'optimizer_step', '^Optimizer\.(step|zero_grad)#', 'any',
     'record_function labels torch.optim adds around step() and zero_grad()',
     'torch-tb-profiler: Optimizer.step# / Optimizer.zero_grad# -> optimizer'),
    ('dataloader_hook', 30, 'data_loading', '^enumerate\(DataLoader\)#', 'any',
     'record_function label torch.utils.data adds around __next__',
     'torch-tb-profiler ProfileRole.DataLoader: enumerate(DataLoader)#'),
    ('backward_label', 40, 'backward', '(?i)backward', 'label',
     'user labels (## backward ##) and autograd node names (CudnnConvolutionBackward)',
     'param/DLRM ## name ## convention; autograd node names in 2020/2021 Kineto traces'),
    ('optimizer_label', 50, 'optimizer_step', '(?i)(optimi[sz]er|zero_grad)', 'label',
     'user labels such as ## optimizer ## and ## zero_grad ##',
     'param/DLRM ## name ## convention'),
    ('data_label', 60, 'data_loading', '(?i)(dataloader|data_?load|load_batch|wait_for_batch|next_batch|copy_batch_to_gpu)', 'label',
     'user labels for fetching the next batch (torchrec/param train pipelines: ## load_batch ##, ## copy_batch_to_gpu ##)',
     'param/DLRM and torchrec TrainPipelineSparseDist labels'),
    ('loss_label', 70, 'loss', '(?i)loss', 'label',
     'user labels such as ## loss ## or compute_loss',
     'common record_function naming'),
    ('loss_op', 80, 'loss', '^aten::([a-z0-9_]*_loss(_nd|2d)?|binary_cross_entropy(_with_logits)?|kl_div)$', 'cpu_op',
     'torch.nn.functional loss operators (aten::cross_entropy_loss, aten::nll_loss, aten::mse_loss, ...)',
     'ATen native_functions.yaml loss operator names'),
    ('forward_label', 90, 'forward', '(?i)forward', 'label',
     'user labels (## forward ##, ## forward:bottom_mlp ##) and DistributedDataParallel.forward',
     'param/DLRM ## name ## convention; torch.nn.parallel.DistributedDataParallel record_function')
) AS t(rule_id, priority, region, pattern, scope, rationale, source);

-- Annotation events that mark a region (CPU side and GPU side), one row per event. Names are
-- classified once per distinct (name, is-a-label) pair: regular expressions stay few.
CREATE OR REPLACE TEMP VIEW region_markers AS  -- kept per trace; a table in report
WITH candidates AS (
    SELECT trace_id, event_id, cat, name, pid, tid, ts_us, ts_us + dur_us AS end_us,
           cat = 'cpu_op' AS is_op, cat <> 'cpu_op' OR name NOT LIKE '%::%' AS is_label
    FROM events
    WHERE cat IN ('user_annotation', 'gpu_user_annotation', 'cpu_op')
      AND name NOT LIKE 'ProfilerStep#%'
      AND (cat <> 'cpu_op' OR name NOT LIKE '%::%'
           OR name LIKE 'autograd::engine::evaluate_function:%'
           OR (name LIKE 'aten::%' AND (name LIKE '%loss%' OR name LIKE '%binary_cross_entropy%'
                                        OR name = 'aten::kl_div')))
),
names AS (SELECT DISTINCT name, is_op, is_label FROM candidates),
classified AS (
    SELECT n.name, n.is_op, n.is_label, r.region, r.rule_id
    FROM names n JOIN region_rules r
      ON (r.scope = 'any' OR (r.scope = 'cpu_op' AND n.is_op) OR (r.scope = 'label' AND n.is_label))
     AND regexp_matches(n.name, r.pattern)
    QUALIFY row_number() OVER (PARTITION BY n.name, n.is_op, n.is_label ORDER BY r.priority) = 1
)
SELECT c.trace_id, c.event_id, c.cat, c.name, c.pid, c.tid, c.ts_us, c.end_us, k.region, k.rule_id
FROM candidates c
JOIN classified k ON k.name = c.name AND k.is_op = c.is_op AND k.is_label = c.is_label;

-- The windows a breakdown is computed over (view iterations): each ProfilerStep (with the
-- process and thread that recorded it), else each iteration inferred from what repeats, else the
-- whole trace (step NULL, window_id -1).
CREATE OR REPLACE TEMP VIEW step_windows AS
SELECT trace_id, step, window_id, pid, tid, ts_us, end_us FROM iterations;

-- Traces where a step window that can hold an event (it ends after it starts) begins before an
-- earlier one has ended (nested or concurrent steps). There an event's window is the
-- latest-starting of all that contain it (a range join); elsewhere at most one window can contain
-- it, the last one starting at or before it (an ASOF join). kernel_steps and gpu_op_launch_times
-- look windows up this way.
-- (Read from steps: a trace without ProfilerSteps has one window, which overlaps nothing.)
CREATE OR REPLACE TEMP VIEW overlapping_step_traces AS
SELECT DISTINCT trace_id FROM (
    SELECT trace_id, ts_us, max(end_us) OVER (PARTITION BY trace_id ORDER BY ts_us, event_id
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM steps WHERE end_us > ts_us)
WHERE ts_us < prev_end;

-- Region intervals per window, clipped to it. kind 'marker': an annotation event; kind 'span':
-- a fallback phase (torch-tb-profiler style) used where a trace has no explicit range:
-- 'backward' spans each run of consecutive backward markers, and, when the window has no
-- forward marker, 'forward' spans from the window start (or the previous backward run) to the
-- run's start. Markers win over spans; among markers the innermost (latest start) wins.
CREATE OR REPLACE TEMP VIEW regions AS
WITH w0 AS MATERIALIZED (SELECT * FROM step_windows),  -- read once, used three times
m AS (
    SELECT w.trace_id, w.window_id, w.step, k.region, 'marker' AS kind, k.rule_id, k.event_id,
           k.name, k.pid, k.tid, greatest(k.ts_us, w.ts_us) AS ts_us, least(k.end_us, w.end_us) AS end_us,
           k.ts_us AS marker_ts_us
    FROM region_markers k
    JOIN w0 w
      ON k.trace_id = w.trace_id AND (w.pid IS NULL OR k.pid = w.pid)
     AND k.ts_us < w.end_us AND k.end_us > w.ts_us
    WHERE k.cat <> 'gpu_user_annotation'
),
-- Runs of backward markers: a run ends at a non-backward marker that starts after every earlier
-- backward marker has ended (a loss computed inside '## backward ##' does not split the pass).
ordered AS (
    SELECT *, region = 'backward' AS is_bwd,
           max(CASE WHEN region = 'backward' THEN end_us END) OVER (
               PARTITION BY trace_id, window_id ORDER BY ts_us, event_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS bwd_until
    FROM m
),
runs AS (
    SELECT *, sum(CASE WHEN NOT is_bwd AND (bwd_until IS NULL OR ts_us >= bwd_until) THEN 1 ELSE 0 END)
              OVER (PARTITION BY trace_id, window_id ORDER BY ts_us, event_id
                    ROWS UNBOUNDED PRECEDING) AS run_no
    FROM ordered
),
bwd_runs AS (
    SELECT trace_id, window_id, run_no, min(ts_us) AS b0, max(end_us) AS b1
    FROM runs WHERE is_bwd GROUP BY trace_id, window_id, run_no
),
bwd_spans AS (
    SELECT *, max(b1) OVER (PARTITION BY trace_id, window_id ORDER BY run_no
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM bwd_runs
),
has_fwd AS (SELECT DISTINCT trace_id, window_id FROM m WHERE region = 'forward'),
spans AS (
    SELECT w.trace_id, w.window_id, w.step, 'backward' AS region, 'span' AS kind,
           'span_backward' AS rule_id, b.b0 AS ts_us, b.b1 AS end_us, b.b0 AS marker_ts_us
    FROM bwd_spans b JOIN w0 w USING (trace_id, window_id)
    UNION ALL
    SELECT w.trace_id, w.window_id, w.step, 'forward', 'span', 'span_forward',
           greatest(w.ts_us, coalesce(b.prev_end, w.ts_us)), b.b0, greatest(w.ts_us, coalesce(b.prev_end, w.ts_us))
    FROM bwd_spans b JOIN w0 w USING (trace_id, window_id)
    WHERE NOT EXISTS (SELECT 1 FROM has_fwd f WHERE f.trace_id = b.trace_id AND f.window_id = b.window_id)
)
SELECT trace_id, window_id, step, region, kind, rule_id, event_id, name, pid, tid, ts_us, end_us, marker_ts_us
FROM m
UNION ALL BY NAME
SELECT * FROM spans WHERE ts_us < end_us;

-- Every GPU kernel with its launch (the runtime call with the same correlation) and the window
-- (step) it belongs to: the one its launch falls in, or, without a launch, the one its start falls
-- in. window_id is NULL for kernels outside every step (a ProfilerStep or, without them, an inferred
-- iteration: view step_windows). before_first_step: the kernel was launched before the first step
-- began, or has no launch in a trace where other kernels
-- have theirs (the GPU queue lagged the CPU when the trace began); such kernels belong to no
-- step (breakdown shows them as their own 'before_first_step' row), never to the first one. The region of each
-- kernel is computed by trace_report.analyses.breakdown.kernel_regions from these rows and the
-- regions view.
CREATE OR REPLACE TEMP VIEW kernel_steps AS
WITH w0 AS MATERIALIZED (SELECT * FROM step_windows),  -- read once, used twice
-- no kernel name: the ASOF join below sorts these rows, and names are long
k AS (
    SELECT trace_id, event_id, pid AS device_pid, ts_us, dur_us, launch_event_id, launch_pid, launch_tid,
           launch_ts_us
    FROM kernels
),
first_step AS (SELECT trace_id, min(ts_us) AS first_us FROM w0 WHERE window_id <> -1 GROUP BY trace_id),
launching AS (SELECT DISTINCT trace_id FROM k WHERE launch_event_id IS NOT NULL),
e AS (
    SELECT k.*, coalesce(f.first_us IS NOT NULL AND (k.launch_ts_us < f.first_us
               OR (k.launch_ts_us IS NULL AND k.trace_id IN (SELECT trace_id FROM launching))), false)
               AS before_first_step,
           coalesce(k.launch_ts_us, k.ts_us) AS at_us
    FROM k LEFT JOIN first_step f ON f.trace_id = k.trace_id
),
-- windows that can hold a kernel (a zero-length window or one without an end holds none), found
-- as view overlapping_step_traces says
w1 AS (SELECT * FROM w0 WHERE end_us > ts_us),
single AS (
    SELECT e.*, w.window_id, w.step,
           NOT e.before_first_step AND e.at_us < w.end_us
           AND (w.pid IS NULL OR e.launch_pid IS NULL OR w.pid = e.launch_pid) AS inside
    FROM e ASOF LEFT JOIN w1 w ON w.trace_id = e.trace_id AND e.at_us >= w.ts_us
    WHERE e.trace_id NOT IN (SELECT trace_id FROM overlapping_step_traces)
),
nested AS (
    SELECT e.*, w.window_id, w.step
    FROM e LEFT JOIN w0 w
      ON w.trace_id = e.trace_id AND NOT e.before_first_step
     AND e.at_us >= w.ts_us AND e.at_us < w.end_us
     AND (w.pid IS NULL OR e.launch_pid IS NULL OR w.pid = e.launch_pid)
    WHERE e.trace_id IN (SELECT trace_id FROM overlapping_step_traces)
    QUALIFY row_number() OVER (PARTITION BY e.trace_id, e.event_id
                               ORDER BY w.ts_us DESC NULLS LAST, w.window_id DESC) = 1
)
SELECT * EXCLUDE (at_us, inside, window_id, step),
       CASE WHEN coalesce(inside, false) THEN window_id END AS window_id,
       CASE WHEN coalesce(inside, false) THEN step END AS step
FROM single
UNION ALL
SELECT * EXCLUDE (at_us) FROM nested;
