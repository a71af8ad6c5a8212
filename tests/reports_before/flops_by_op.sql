-- name: flops_by_op
-- topic: FLOPs
-- description: FLOPs per framework op, pass and source, with a cross-check
--   between the sources. Sources: analytic (from the shapes of a record_shapes
--   trace, formulas of the table flop_formulas), cupti (the trace's own CUPTI
--   range-profiler counters) and ncu (the ncu report matched to the trace
--   last); the hardware counts of an op are those of the kernels launched
--   inside it. pass: backward inside autograd's evaluate_function nodes,
--   optimizer inside Optimizer.step/zero_grad (and GradScaler's _amp_ ops),
--   else forward. check compares a source with the other side (analytic
--   against the hardware count, a hardware count against analytic).
-- steady: run
-- op_windows: iteration
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL, also of a run without iterations, whose default it is); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   op_name VARCHAR: framework op (`aten::convolution`)
--   pass VARCHAR: forward | backward | optimizer
--   source VARCHAR: analytic | cupti | ncu
--   calls BIGINT: op calls (hardware sources: calls with counted kernels)
--   flops BIGINT: FLOPs, FMA = 2
--   flops_per_call DOUBLE: flops / calls
--   check VARCHAR: ok | missing (0 FLOP where the other side counts work) | multiple_counted (an integer multiple, 2x or more, of the other side) | mismatch (more than 10% apart)
-- requires:
--   events: trace events (tracedb ingest TRACE.json)
-- engines: duckdb, spark
WITH o AS (         -- the windows asked for (op_flops_windows); iteration NULL = the whole trace
    SELECT run, iteration, op_event_id, op_name, pass, category, dtype, source, flops
    FROM op_flops_windows
    WHERE ($run IS NULL OR run = $run)
      AND (($iteration IS NULL AND (steady OR no_iterations)) OR $iteration = 'all'
           OR iteration = CAST(CASE WHEN $iteration <> 'all' THEN $iteration END AS INTEGER))
), f AS (
    SELECT run, iteration, op_name, pass, source, count(DISTINCT op_event_id) AS calls,
           CAST(sum(flops) AS BIGINT) AS flops
    FROM o GROUP BY run, iteration, op_name, pass, source
), ana AS (
    SELECT run, iteration, op_name, pass, flops FROM f WHERE source = 'analytic'
), hw AS (      -- the first hardware source (cupti before ncu)
    SELECT run, iteration, op_name, pass, flops FROM (
        SELECT *, row_number() OVER (PARTITION BY run, iteration, op_name, pass ORDER BY source) AS k
        FROM f WHERE source <> 'analytic') x
    WHERE k = 1
), ref AS (
    SELECT f.*, CASE WHEN f.source = 'analytic' THEN hw.flops ELSE ana.flops END AS other,
           CASE WHEN f.source = 'analytic' THEN hw.run ELSE ana.run END AS other_run
    FROM f
    LEFT JOIN ana ON ana.run = f.run AND ana.iteration IS NOT DISTINCT FROM f.iteration
                 AND ana.op_name = f.op_name AND ana.pass = f.pass
    LEFT JOIN hw ON hw.run = f.run AND hw.iteration IS NOT DISTINCT FROM f.iteration
                AND hw.op_name = f.op_name AND hw.pass = f.pass
)
SELECT run, iteration, op_name, pass, source, calls, flops,
       round(flops / nullif(calls, 0), 1) AS flops_per_call,
       CASE WHEN other_run IS NULL THEN 'ok'
            WHEN coalesce(flops, 0) = 0 AND coalesce(other, 0) > 0 THEN 'missing'
            WHEN coalesce(flops, 0) = 0 OR coalesce(other, 0) = 0 THEN 'ok'
            WHEN flops / other >= 1.9
                 AND abs(flops / other - round(flops / other)) <= 0.05 * round(flops / other) THEN 'multiple_counted'
            WHEN abs(flops - other) > 0.1 * greatest(flops, other) THEN 'mismatch'
            ELSE 'ok' END AS "check"
FROM ref
ORDER BY run, iteration NULLS LAST, flops DESC NULLS LAST, op_name, pass, source;
