-- name: bwd_fwd_ratio
-- topic: FLOPs
-- description: Forward and backward FLOPs per layer type (the op rules of
--   layer_rules) and source, and their ratio: about 2 is expected for
--   convolution and matmul/linear (gradients of the input and of the
--   weight), 1 to 2 for elementwise and normalization ops. note says why a
--   ratio is off: a first layer has no input gradient, attention's backward
--   recomputes the scores (2.5), ops without a counted backward. The analytic
--   rows of a run an ingest with --op-totals summed per iteration
--   (op_flop_totals) are read from there while flop_formulas is unchanged;
--   other runs' ops are swept.
-- steady: run
-- op_windows: iteration
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL, also of a run without iterations, whose default it is); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   layer_type VARCHAR: layer type of the ops (layer_rules, field op)
--   source VARCHAR: analytic | cupti | ncu
--   flops_fwd BIGINT: forward FLOPs
--   flops_bwd BIGINT: backward FLOPs
--   bwd_fwd_ratio DOUBLE: flops_bwd / flops_fwd
--   note VARCHAR: what the ratio says
-- requires:
--   events: trace events (tracedb ingest TRACE.json)
-- engines: duckdb, spark
WITH o AS (         -- the windows asked for (op_flop_sums_windows: op_flops_windows, stored
                    -- sums where an ingest with --op-totals made them); iteration NULL = the whole trace
    SELECT run, iteration, op_event_id, op_name, pass, category, dtype, source, calls, ops, counted, flops
    FROM op_flop_sums_windows
    WHERE ($run IS NULL OR run = $run)
      AND (($iteration IS NULL AND (steady OR no_iterations)) OR $iteration = 'all'
           OR iteration = CAST(CASE WHEN $iteration <> 'all' THEN $iteration END AS INTEGER))
), layers AS (    -- the layer type of each op name asked for: op_layers' rule (whose names, those
                  -- of every window, would sweep each run's ops again)
    SELECT n.run, n.op_name, coalesce(arg_min(r.layer_type, r.priority), 'other') AS layer_type
    FROM (SELECT DISTINCT run, op_name FROM o) n
    LEFT JOIN layer_rules r ON r.field = 'op' AND regexp_matches(n.op_name, r.pattern)
    GROUP BY n.run, n.op_name
), f AS (
    SELECT o.run, o.iteration, coalesce(l.layer_type, 'other') AS layer_type, o.source,
           sum(CASE WHEN o.pass = 'forward' THEN o.flops END) AS fwd,
           sum(CASE WHEN o.pass = 'backward' THEN o.flops END) AS bwd
    FROM o LEFT JOIN layers l ON l.run = o.run AND l.op_name = o.op_name
    WHERE o.pass IN ('forward', 'backward')
    GROUP BY o.run, o.iteration, coalesce(l.layer_type, 'other'), o.source
)
SELECT run, iteration, layer_type, source, CAST(fwd AS BIGINT) AS flops_fwd, CAST(bwd AS BIGINT) AS flops_bwd,
       round(bwd / nullif(fwd, 0), 3) AS bwd_fwd_ratio,
       CASE WHEN coalesce(fwd, 0) = 0 AND coalesce(bwd, 0) = 0 THEN 'no FLOPs counted'
            WHEN coalesce(fwd, 0) = 0 THEN 'backward only (its forward ops are of another layer type)'
            WHEN coalesce(bwd, 0) = 0 THEN 'no backward FLOPs (no gradient, or a backward op without a formula)'
            WHEN layer_type IN ('convolution', 'matmul/linear') AND bwd / fwd BETWEEN 1.98 AND 2.02 THEN 'as expected (~2)'
            WHEN layer_type IN ('convolution', 'matmul/linear') AND bwd / fwd < 1.98
                THEN 'below 2: layers without an input gradient (the first layer) or frozen weights'
            WHEN layer_type = 'attention' AND abs(bwd / fwd - 2.5) < 0.05
                THEN 'as expected (2.5: the backward recomputes the attention scores)'
            WHEN layer_type IN ('convolution', 'matmul/linear', 'attention') THEN 'off the expected ratio: see flops_by_op'
            ELSE 'per-element count: 1 to 2 expected' END AS note
FROM f
ORDER BY run, iteration NULLS LAST, coalesce(fwd, 0) + coalesce(bwd, 0) DESC, layer_type, source;
