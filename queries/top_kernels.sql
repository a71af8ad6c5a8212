-- name: top_kernels
-- topic: single GPU
-- description: Kernels by total time in an iteration: launches, total, mean,
--   share of kernel time, the op and layer type that launch them most, and
--   (where matched with ncu) their summed utilization levels.
--   With iteration=all a trace run's rows are read from top_kernel_totals where
--   an ingest with --op-totals stored them (this SQL over the run, once), while
--   layer_rules is unchanged and no kernel of the run is matched to counters;
--   other runs are swept.
-- steady: run
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: every kernel of the run, also of a run without iterations); the steady one when absent
--   limit INTEGER > 0 = 20: rows per run and iteration
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   name VARCHAR: kernel name
--   launches BIGINT: launches in the iteration
--   total_ns BIGINT: summed duration, ns
--   mean_ns DOUBLE: mean duration, ns
--   time_share_pct DOUBLE: share of the iteration's kernel time, %
--   op_name VARCHAR: the op that launches it most often
--   layer_type VARCHAR: layer type of that op
--   smsp_active_pct DOUBLE: summed SMSP active / elapsed cycles of its matched launches, %
--   issue_slot_pct DOUBLE: summed issue / elapsed cycles, %
--   tc_issue_pct DOUBLE: summed tensor instructions / elapsed cycles, %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH stored AS (   -- iteration=all of a run stored by an ingest with --op-totals (top_kernel_totals:
                    -- this SQL over the run, every name, at ingest): read, not swept
    -- while layer_rules is as it was and no kernel of the run is matched to counters since
    SELECT DISTINCT run FROM top_kernel_totals
    WHERE $iteration = 'all' AND rules IN (SELECT digest FROM layer_rules_version)
      AND run NOT IN (SELECT run FROM kernel_levels)
), walked AS (   -- the runs swept (the ingest's run too, before its runs row): joined first, so that
                    -- DuckDB skips the kernels' scans when there is none
    SELECT run FROM (SELECT run FROM runs WHERE ($run IS NULL OR run = $run)
                     UNION SELECT CAST($run AS VARCHAR) WHERE $run IS NOT NULL)
    WHERE run NOT IN (SELECT run FROM stored)
), it AS (
    SELECT run, iteration FROM iteration_utilization
    WHERE ($run IS NULL OR run = $run) AND run IN (SELECT run FROM walked)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), k AS (
    SELECT k.run, k.iteration, k.kernel_id, k.name, k.dur_ns, k.op_name, l.layer_type
    FROM it JOIN kernels k USING (run, iteration) JOIN kernel_layers l USING (run, kernel_id)
    WHERE k.kind = 'kernel'
    UNION ALL       -- iteration=all: the whole trace (iteration NULL), inside an iteration or not
    SELECT k.run, CAST(NULL AS INTEGER), k.kernel_id, k.name, k.dur_ns, k.op_name, l.layer_type
    FROM walked w JOIN kernels k USING (run) JOIN kernel_layers l USING (run, kernel_id)
    WHERE k.kind = 'kernel' AND $iteration = 'all'       -- every trace run, with iterations or none
                    -- (kernel_layers: kernels with a start, a trace run's)
), g AS (
    SELECT k.run, k.iteration, k.name, count(*) AS launches, sum(k.dur_ns) AS total_ns,
           avg(k.dur_ns) AS mean_ns, mode(k.op_name) AS op_name, mode(k.layer_type) AS layer_type,
           sum(m.smsp_cycles_elapsed) AS e, sum(m.smsp_cycles_active) AS a,
           sum(m.smsp_issue_active) AS i, sum(m.tc_inst) AS n
    FROM k LEFT JOIN kernel_levels m ON m.run = k.run AND m.kernel_id = k.kernel_id
    GROUP BY k.run, k.iteration, k.name
)
SELECT run, iteration, name, launches, CAST(total_ns AS BIGINT) AS total_ns, round(mean_ns, 1) AS mean_ns,
       round(100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run, iteration), 2) AS time_share_pct,
       op_name, layer_type,
       round(100.0 * a / e, 2) AS smsp_active_pct, round(100.0 * i / e, 2) AS issue_slot_pct,
       round(100.0 * n / e, 3) AS tc_issue_pct
FROM g
QUALIFY row_number() OVER (PARTITION BY run, iteration ORDER BY total_ns DESC, name) <= $limit
UNION ALL
SELECT run, iteration, name, launches, total_ns, mean_ns, time_share_pct, op_name, layer_type,
       NULL, NULL, NULL
FROM top_kernel_totals
WHERE run IN (SELECT run FROM stored) AND ($run IS NULL OR run = $run) AND name IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY run, iteration ORDER BY total_ns DESC, name) <= $limit
ORDER BY run, iteration NULLS LAST, total_ns DESC, name;
