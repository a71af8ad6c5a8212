-- name: top_kernels
-- topic: single GPU
-- description: Kernels by total time in an iteration: launches, total, mean,
--   share of kernel time, the op and layer type that launch them most, and
--   (where matched with ncu) their summed utilization levels.
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
WITH it AS (
    SELECT run, iteration FROM iteration_utilization
    WHERE ($run IS NULL OR run = $run)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), k AS (
    SELECT k.run, k.iteration, k.kernel_id, k.name, k.dur_ns, k.op_name, l.layer_type
    FROM kernels k JOIN it USING (run, iteration) JOIN kernel_layers l USING (run, kernel_id)
    WHERE k.kind = 'kernel'
    UNION ALL       -- iteration=all: the whole trace (iteration NULL), inside an iteration or not
    SELECT k.run, CAST(NULL AS INTEGER), k.kernel_id, k.name, k.dur_ns, k.op_name, l.layer_type
    FROM kernels k JOIN kernel_layers l USING (run, kernel_id)
    WHERE k.kind = 'kernel' AND $iteration = 'all'       -- every trace run, with iterations or none
      AND k.run IN (SELECT run FROM runs WHERE kind = 'trace' AND ($run IS NULL OR run = $run))
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
ORDER BY run, iteration NULLS LAST, total_ns DESC, name;
