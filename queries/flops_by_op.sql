-- name: flops_by_op
-- description: FLOPs per framework op, pass and source, with a cross-check
--   between the sources. Sources: analytic (from the shapes of a record_shapes
--   trace, formulas of the table flop_formulas), cupti (the trace's own CUPTI
--   range-profiler counters) and ncu (the ncu report matched to the trace
--   last); the hardware counts of an op are those of the kernels launched
--   inside it. pass: backward inside autograd's evaluate_function nodes,
--   optimizer inside Optimizer.step/zero_grad (and GradScaler's _amp_ ops),
--   else forward. check compares a source with the other side (analytic
--   against the hardware count, a hardware count against analytic).
-- parameters:
--   run VARCHAR = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL); the steady one when absent
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
-- engines: duckdb
WITH f AS (
    SELECT run, iteration, op_name, pass, source, count(DISTINCT op_event_id) AS calls,
           CAST(sum(flops) AS BIGINT) AS flops
    FROM op_flops_for($iteration)
    WHERE $run IS NULL OR run = $run
    GROUP BY ALL
), ref AS (
    SELECT a.*,
           (SELECT arg_min(b.flops, b.source) FROM f b
            WHERE b.run = a.run AND b.iteration IS NOT DISTINCT FROM a.iteration AND b.op_name = a.op_name
              AND b.pass = a.pass AND b.source <> a.source
              AND (a.source = 'analytic' OR b.source = 'analytic')) AS other
    FROM f a
)
SELECT run, iteration, op_name, pass, source, calls, flops,
       round(flops / nullif(calls, 0), 1) AS flops_per_call,
       CASE WHEN other IS NULL THEN 'ok'
            WHEN coalesce(flops, 0) = 0 AND other > 0 THEN 'missing'
            WHEN coalesce(flops, 0) = 0 THEN 'ok'
            WHEN other > 0 AND flops / other >= 1.9
                 AND abs(flops / other - round(flops / other)) <= 0.05 * round(flops / other) THEN 'multiple_counted'
            WHEN abs(flops - other) > 0.1 * greatest(flops, other) THEN 'mismatch'
            ELSE 'ok' END AS "check"
FROM ref
ORDER BY run, iteration NULLS LAST, flops DESC NULLS LAST, op_name, pass, source;
