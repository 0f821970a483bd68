-- The windows every "per step" figure is measured over: a trace's ProfilerSteps, else the
-- iterations of its training (or inference) loop inferred from what repeats, else the whole
-- trace. TEMP views, created on every connection after views.sql (steps). Times in microseconds
-- on the trace's own clock.

-- The events an iteration can be inferred from, per trace (rule: the order the rules are tried):
--   1 'optimizer'   Optimizer.step#<class>.step: the record_function label torch.optim puts
--                   around every optimizer.step() (torch/optim/optimizer.py, Optimizer.profile_hook_step:
--                   f"Optimizer.step#{self.__class__.__name__}.step"): the end of a training iteration;
--   2 'dataloader'  enumerate(DataLoader)#<iterator class>.__next__: the label torch.utils.data puts
--                   around fetching each batch (torch/utils/data/dataloader.py, _BaseDataLoaderIter.__next__:
--                   f"enumerate(DataLoader)#{self.__class__.__name__}.__next__"): the start of one;
--   3 'forward'     a record_function label or NVTX range named for a forward pass or a training step
--                   (## forward ##, DistributedDataParallel.forward, train_step, iteration) or a
--                   module's call (nn.Module: <name>, the python_function events of with_modules
--                   traces), not inside another event of this rule on its thread: the start of one.
-- Only CPU-side events (user_annotation, cpu_op, python_function; the GPU copies of the labels,
-- gpu_user_annotation, mirror them). A call inside an earlier call of the same name on the same
-- thread is part of it (a wrapped step), not a call of its own.
CREATE OR REPLACE TEMP VIEW iteration_marks AS  -- kept per trace
WITH m AS (
    SELECT trace_id, event_id, name, pid, tid, ts_us, ts_us + dur_us AS end_us,
           CASE WHEN starts_with(name, 'Optimizer.step#') THEN 1
                WHEN starts_with(name, 'enumerate(DataLoader)#') THEN 2 ELSE 3 END AS rule
    FROM events
    WHERE (cat IN ('user_annotation', 'cpu_op')
           AND ((starts_with(name, 'Optimizer.step#') AND suffix(name, '.step'))
                OR (starts_with(name, 'enumerate(DataLoader)#') AND suffix(name, '.__next__'))))
       -- ILIKE first: a cheap filter before the expression, on every annotation
       OR (cat = 'user_annotation' AND (name ILIKE '%forward%' OR name ILIKE '%step%' OR name ILIKE '%iteration%')
           AND regexp_matches(name, '(?i)forward|train(ing)?[ _-]?step|iteration'))
       OR (cat = 'python_function' AND starts_with(name, 'nn.Module: '))
),
-- rule 3: only the outermost of its events on each thread
r3 AS (
    SELECT *, max(end_us) OVER (PARTITION BY trace_id, pid, tid ORDER BY ts_us, end_us DESC, event_id
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS outer_end
    FROM m WHERE rule = 3
),
same AS (
    SELECT *, max(end_us) OVER (PARTITION BY trace_id, name, pid, tid ORDER BY ts_us, end_us DESC, event_id
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM (SELECT * FROM m WHERE rule < 3
          UNION ALL BY NAME
          SELECT * EXCLUDE (outer_end) FROM r3 WHERE outer_end IS NULL OR ts_us >= outer_end)
)
SELECT trace_id, rule, event_id, name, pid, tid, ts_us, end_us FROM same
WHERE prev_end IS NULL OR ts_us >= prev_end;

-- One row per window (iteration; column step its number) of every trace, with its basis:
--   'ProfilerStep'         the trace's ProfilerSteps (view steps), as recorded: window_id is the
--                          step's event id;
--   'inferred: <name>'     without ProfilerStep, the first rule of iteration_marks with a name
--                          called 3 times or more on one thread (among several, the name and
--                          thread with the most time in their calls: the outermost). Iteration k
--                          (1 to calls - 1) runs from the end of optimizer step k to the end of
--                          step k + 1 (window_id: the later call), as a ProfilerStep that
--                          prof.step() closes after optimizer.step() does; for the rules that
--                          mark a start, from the start of call k to the start of call k + 1
--                          (window_id: call k). The time before the first window (start-up, the
--                          first iteration's forward) and after the last is in no iteration;
--   'trace'                neither: one window from the trace's first to its last event
--                          (window_id -1, step NULL).
-- Why 3 calls: two windows at least, so that a figure per iteration is a mean over repeats, and
-- a name called once at set-up and once in the loop is not taken for the loop.
-- pid, tid: the thread that recorded the steps or the marks (NULL for 'trace'); dur_us: end_us - ts_us
-- (a ProfilerStep's own dur).
CREATE OR REPLACE TEMP VIEW iterations AS
WITH steps_of AS MATERIALIZED (SELECT DISTINCT trace_id FROM steps),
marks AS MATERIALIZED (  -- read twice below: computed once
    SELECT * FROM iteration_marks WHERE trace_id NOT IN (SELECT trace_id FROM steps_of)
),
cand AS (
    SELECT trace_id, rule, name, pid, tid, count(*) AS calls, sum(end_us - ts_us) AS busy_us
    FROM marks GROUP BY ALL HAVING count(*) >= 3
),
chosen AS (
    SELECT * FROM cand
    QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY rule, busy_us DESC, name, pid, tid) = 1
),
calls AS (
    SELECT m.trace_id, c.rule, c.name, m.event_id, m.pid, m.tid, m.ts_us, m.end_us,
           row_number() OVER (PARTITION BY m.trace_id ORDER BY m.ts_us, m.event_id) AS k,
           lead(m.event_id) OVER (PARTITION BY m.trace_id ORDER BY m.ts_us, m.event_id) AS next_id,
           lead(m.ts_us) OVER (PARTITION BY m.trace_id ORDER BY m.ts_us, m.event_id) AS next_ts_us,
           lead(m.end_us) OVER (PARTITION BY m.trace_id ORDER BY m.ts_us, m.event_id) AS next_end_us
    FROM marks m
    JOIN chosen c ON c.trace_id = m.trace_id AND c.rule = m.rule AND c.name = m.name
                 AND c.pid IS NOT DISTINCT FROM m.pid AND c.tid IS NOT DISTINCT FROM m.tid
),
inferred AS (
    SELECT trace_id, 'inferred: ' || name AS basis, k AS step,
           CASE WHEN rule = 1 THEN next_id ELSE event_id END AS window_id, pid, tid,
           CASE WHEN rule = 1 THEN end_us ELSE ts_us END AS ts_us,
           CASE WHEN rule = 1 THEN next_end_us ELSE next_ts_us END AS end_us
    FROM calls WHERE next_id IS NOT NULL
),
-- traces with no window yet, found in the small traces table: when every trace has one the
-- events are not scanned (the semi join's build side is empty)
bare AS (
    SELECT trace_id FROM traces
    WHERE trace_id NOT IN (SELECT trace_id FROM steps_of) AND trace_id NOT IN (SELECT trace_id FROM chosen)
),
whole AS (
    SELECT e.trace_id, 'trace' AS basis, CAST(NULL AS BIGINT) AS step, CAST(-1 AS BIGINT) AS window_id,
           CAST(NULL AS VARCHAR) AS pid, CAST(NULL AS VARCHAR) AS tid,
           min(e.ts_us) AS ts_us, max(e.ts_us + e.dur_us) AS end_us
    FROM events e SEMI JOIN bare b ON e.trace_id = b.trace_id
    WHERE e.cat <> 'Trace'
    GROUP BY e.trace_id
)
SELECT trace_id, 'ProfilerStep' AS basis, step, event_id AS window_id, pid, tid, ts_us, end_us, dur_us FROM steps
UNION ALL BY NAME
SELECT *, end_us - ts_us AS dur_us FROM inferred
UNION ALL BY NAME
SELECT *, end_us - ts_us AS dur_us FROM whole;
