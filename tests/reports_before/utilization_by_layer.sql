-- name: utilization_by_layer
-- topic: ncu levels
-- description: Time share and utilization levels per layer type (convolution,
--   matmul/linear, attention, normalization, elementwise/activation, pooling,
--   embedding, loss, optimizer, memory copy/set, other) for an iteration. The
--   layer type comes from the framework op that launched each kernel, by the
--   rules of the table layer_rules (users may add rules). Levels are summed
--   counters of the layer's matched kernels (NULL without ncu data).
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: every GPU activity of the run); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   layer_type VARCHAR: layer type
--   activities BIGINT: kernels, memcpy and memset of this type
--   time_ns BIGINT: their summed duration in the trace, ns
--   time_share_pct DOUBLE: share of the iteration's GPU activity time, %
--   matched_kernels BIGINT: kernels with ncu counters
--   smsp_active_pct DOUBLE: summed SMSP active / elapsed cycles, %
--   issue_slot_pct DOUBLE: summed issue / elapsed cycles, %
--   tc_active_pct DOUBLE: summed tensor pipe active / elapsed cycles, %
--   tc_issue_pct DOUBLE: summed tensor instructions / elapsed cycles, %
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
WITH it AS (
    SELECT run, iteration FROM iteration_utilization
    WHERE ($run IS NULL OR run = $run)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), ka AS (          -- the iterations asked for; with iteration=all, the whole trace too (iteration NULL)
    SELECT k.run, k.iteration, k.kernel_id, k.dur_ns FROM kernels k JOIN it USING (run, iteration)
    UNION ALL
    SELECT run, CAST(NULL AS INTEGER), kernel_id, dur_ns FROM kernels
    WHERE $iteration = 'all' AND run IN (SELECT run FROM it)
), act AS (
    SELECT k.run, k.iteration, l.layer_type, count(*) AS activities, sum(k.dur_ns) AS time_ns
    FROM ka k JOIN kernel_layers l USING (run, kernel_id)
    GROUP BY ALL
), lv AS (
    SELECT k.run, k.iteration, l.layer_type, count(*) AS matched_kernels,
           sum(l.smsp_cycles_elapsed) AS e, sum(l.smsp_cycles_active) AS a, sum(l.smsp_issue_active) AS i,
           sum(l.tc_cycles_active) AS c, sum(l.tc_inst) AS n
    FROM ka k JOIN kernel_levels l ON l.run = k.run AND l.kernel_id = k.kernel_id GROUP BY ALL
)
SELECT act.run, act.iteration, act.layer_type, activities, CAST(time_ns AS BIGINT) AS time_ns,
       round(100.0 * time_ns / sum(time_ns) OVER (PARTITION BY act.run, act.iteration), 2) AS time_share_pct,
       coalesce(matched_kernels, 0) AS matched_kernels,
       round(100.0 * a / e, 2) AS smsp_active_pct, round(100.0 * i / e, 2) AS issue_slot_pct,
       round(100.0 * c / e, 3) AS tc_active_pct, round(100.0 * n / e, 3) AS tc_issue_pct
FROM act LEFT JOIN lv ON lv.run = act.run AND lv.iteration IS NOT DISTINCT FROM act.iteration
                     AND lv.layer_type = act.layer_type
ORDER BY act.run, act.iteration NULLS LAST, time_ns DESC, act.layer_type;
