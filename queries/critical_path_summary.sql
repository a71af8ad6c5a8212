-- name: critical_path_summary
-- topic: critical path
-- description: The critical path's time by category (CPU op, launch
--   overhead, kernel by layer type, memcpy, communication, waiting for another
--   rank, sync, idle, unknown dependency), with its share of the step and the
--   GPU energy spent on it where a power log is paired: the energy integrated
--   over the path's segments of each category (kernels: the joules of the
--   path's kernels; waiting, sync and idle: the joules spent waiting). One row
--   per iteration and category (and layer type for kernels), largest first.
--   With iteration=all it reads the sums an ingest with --path-totals stored
--   where they still hold (no job, no power log, rules and ranks unchanged)
--   instead of walking every iteration's path.
-- iteration_all: sql
-- engines: duckdb, spark
-- parameters:
--   run RUN = NULL: trace run (all when absent and no job is given)
--   job VARCHAR = NULL: a job: its path across ranks (run is then not read)
--   iteration VARCHAR = NULL: iteration number, steady, or all; the steady one when absent
--   power_run RUN = NULL: power run to use (the one paired with the trace when absent)
--   gpu INTEGER = NULL: GPU index in the power log (the trace's own GPU when absent)
-- columns:
--   run VARCHAR: trace run (the job's runs: NULL)
--   job VARCHAR: the job asked for (NULL: one run's path)
--   iteration INTEGER: iteration
--   category VARCHAR: category of the path's segments (critical_path.category)
--   layer_type VARCHAR: kernels: layer type; else NULL
--   segments BIGINT: segments of the path in the row
--   dur_ns BIGINT: time on the path, ns
--   share_pct DOUBLE: dur_ns / step_ns, %
--   energy_j DOUBLE: GPU energy integrated over the row's segments, J (NULL without a paired power log; a job: NULL)
--   step_ns BIGINT: the iteration's duration, ns
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- prepared_by: critical_path_sums
WITH p AS (
    SELECT CASE WHEN job IS NULL THEN run END AS run, job, iteration, category, layer_type, dur_ns, step_ns,
           run AS seg_run, start_ns, 1 AS segments
    FROM _critical_path
    WHERE $run IS NULL OR job IS NOT NULL OR run = $run
    UNION ALL      -- or, with iteration=all, the sums an ingest with --path-totals stored (path_iteration_totals)
    SELECT run, NULL, iteration, category, layer_type, dur_ns, step_ns, run, NULL, segments
    FROM _critical_path_sums
    WHERE $run IS NULL OR run = $run
), win AS (
    SELECT seg_run AS run, iteration, category || '|' || coalesce(layer_type, '') AS label,
           start_ns AS s, start_ns + dur_ns AS e
    FROM p WHERE job IS NULL AND dur_ns > 0 AND start_ns IS NOT NULL
), en AS (
    SELECT run, iteration, label, sum(energy_integrated_j) AS energy_j
    FROM energy_of_windows('win', $power_run, $gpu) GROUP BY ALL
)
SELECT p.run, p.job, p.iteration, p.category, p.layer_type, CAST(sum(p.segments) AS BIGINT) AS segments, CAST(sum(p.dur_ns) AS BIGINT) AS dur_ns,
       round(100.0 * sum(p.dur_ns) / any_value(p.step_ns), 2) AS share_pct, any_value(en.energy_j) AS energy_j,
       any_value(p.step_ns) AS step_ns
FROM p LEFT JOIN en ON p.job IS NULL AND en.run = p.run AND en.iteration = p.iteration
                    AND en.label = p.category || '|' || coalesce(p.layer_type, '')
GROUP BY p.run, p.job, p.iteration, p.category, p.layer_type
ORDER BY p.job NULLS FIRST, p.run, p.iteration, dur_ns DESC, p.category, p.layer_type;
