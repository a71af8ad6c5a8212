-- name: kernel_energy
-- topic: energy
-- description: Energy attributed to the GPU activities of an iteration, and
--   to their layer types, by overlap with the power log: each activity gets
--   the integral of (interpolated) power over its interval; dynamic energy
--   subtracts idle power over the same interval. Samples are ~10-100 ms apart
--   and kernels last microseconds, so single-kernel values are interpolations:
--   read them summed (group_by=layer) over many kernels. Concurrent kernels
--   each get the full power of their overlap (no split).
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all with a power log when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration, then the whole trace as iteration NULL: every activity from the first iteration's start to the last one's end); the steady one when absent
--   group_by VARCHAR = 'kernel': one of kernel | layer: a row per activity, or per layer type
--   power_run RUN = NULL: power log to use when the trace has several
--   gpu INTEGER = NULL: GPU index in the log (default: the trace run's own GPU, view run_gpu, when the log has it, else the lowest)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   layer_type VARCHAR: layer type (layer_rules)
--   kernel_id BIGINT: activity (NULL when group_by=layer)
--   name VARCHAR: activity name (NULL when group_by=layer)
--   activities BIGINT: activities in the row
--   dur_ns BIGINT: summed duration, ns
--   energy_j DOUBLE: integrated energy over the activities' intervals, J
--   dynamic_j DOUBLE: energy_j - idle power x dur, J
--   mean_power_w DOUBLE: energy_j / dur, W
--   energy_share_pct DOUBLE: energy_j / integrated energy of the whole iteration, %
-- requires:
--   trace_power_pairs: a power log aligned with the run (tracedb ingest LOG --pair-with RUN)
WITH it AS (
    SELECT run, iteration, start_ns, end_ns FROM iteration_gpu_time JOIN iterations USING (run, iteration)
    WHERE ($run IS NULL OR run = $run)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), whole AS (       -- iteration=all: the whole trace (iteration NULL), first iteration start to last end
    SELECT run, CAST(NULL AS INTEGER) AS iteration, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM it WHERE $iteration = 'all' GROUP BY run
), win AS (
    SELECT k.run, k.iteration, CAST(k.kernel_id AS VARCHAR) AS label, k.ts_ns AS s, k.ts_ns + k.dur_ns AS e
    FROM kernels k JOIN it USING (run, iteration) WHERE k.dur_ns > 0
    UNION ALL
    SELECT k.run, NULL, CAST(k.kernel_id AS VARCHAR), k.ts_ns, k.ts_ns + k.dur_ns
    FROM kernels k JOIN whole w ON w.run = k.run
    WHERE k.dur_ns > 0 AND k.ts_ns >= w.start_ns AND k.ts_ns < w.end_ns
    UNION ALL
    SELECT run, iteration, 'iteration', start_ns, end_ns FROM it
    UNION ALL
    SELECT run, iteration, 'iteration', start_ns, end_ns FROM whole
), en AS (
    SELECT * FROM energy_of_windows('win', $power_run, $gpu)
), k AS (
    SELECT en.run, en.iteration, CAST(en.label AS BIGINT) AS kernel_id, k.name, l.layer_type,
           en.e - en.s AS dur, en.energy_integrated_j AS energy_j, en.idle_power_w
    FROM en JOIN kernels k ON k.run = en.run AND k.kernel_id = TRY_CAST(en.label AS BIGINT)
    JOIN kernel_layers l ON l.run = k.run AND l.kernel_id = k.kernel_id
    WHERE en.label <> 'iteration'
), total AS (
    SELECT run, iteration, energy_integrated_j AS it_j FROM en WHERE label = 'iteration'
), rows_ AS (
    SELECT run, iteration, layer_type, kernel_id, name, 1 AS activities, dur, energy_j, idle_power_w
    FROM k WHERE $group_by = 'kernel'
    UNION ALL
    SELECT run, iteration, layer_type, NULL, NULL, count(*), sum(dur), sum(energy_j), any_value(idle_power_w)
    FROM k WHERE $group_by = 'layer' GROUP BY run, iteration, layer_type
)
SELECT rows_.run, rows_.iteration, layer_type, kernel_id, name, activities, CAST(dur AS BIGINT) AS dur_ns, energy_j,
       energy_j - idle_power_w * dur / 1e9 AS dynamic_j, energy_j / (dur / 1e9) AS mean_power_w,
       100.0 * energy_j / it_j AS energy_share_pct
FROM rows_ JOIN total ON total.run = rows_.run AND total.iteration IS NOT DISTINCT FROM rows_.iteration
ORDER BY rows_.run, rows_.iteration NULLS LAST, energy_j DESC, layer_type, kernel_id;
