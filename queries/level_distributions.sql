-- name: level_distributions
-- topic: ncu levels
-- description: The utilization levels of METHOD.md section 3 as distributions
--   over the matched kernels of an iteration, per layer type and for all
--   kernels (layer_type 'all'): the plain mean of the per-kernel values, the
--   cycle-weighted mean (each kernel weighted by the level's denominator:
--   elapsed cycles E for the four levels, issued instructions for
--   tc_issue_bound, active cycles A for tc_active_bound; over 'all' it equals
--   utilization_levels' kernel-relative value), and the spread (std, min,
--   quartiles, max). The per-kernel values themselves are kernel_utilization.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: every matched kernel of the run); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   layer_type VARCHAR: layer type by layer_rules, or all
--   level VARCHAR: smsp_active | issue_slot | tc_active | tc_issue | tc_issue_bound | tc_active_bound
--   kernels BIGINT: matched kernels with a value for the level
--   mean_pct DOUBLE: mean of the per-kernel values, %
--   cycle_weighted_mean_pct DOUBLE: sum of the numerators / sum of the denominators, %
--   std_pct DOUBLE: sample standard deviation of the per-kernel values, %
--   min_pct DOUBLE: smallest per-kernel value, %
--   p25_pct DOUBLE: first quartile, %
--   median_pct DOUBLE: median, %
--   p75_pct DOUBLE: third quartile, %
--   max_pct DOUBLE: largest per-kernel value, %
-- requires:
--   matches: ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)
-- engines: duckdb
WITH it AS (
    SELECT run, iteration FROM iteration_utilization
    WHERE ($run IS NULL OR run = $run)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), k AS (
    SELECT kl.* FROM kernel_levels kl JOIN it USING (run, iteration)
    UNION ALL       -- iteration=all: the whole trace (iteration NULL)
    SELECT * REPLACE (CAST(NULL AS INTEGER) AS iteration) FROM kernel_levels
    WHERE $iteration = 'all' AND run IN (SELECT run FROM it)
), v AS (
    SELECT run, iteration, layer_type, lv.level, lv.ord, lv.num, lv.den
    FROM k, LATERAL (VALUES
        ('smsp_active', 1, smsp_cycles_active, smsp_cycles_elapsed),
        ('issue_slot', 2, smsp_issue_active, smsp_cycles_elapsed),
        ('tc_active', 3, tc_cycles_active, smsp_cycles_elapsed),
        ('tc_issue', 4, tc_inst, smsp_cycles_elapsed),
        ('tc_issue_bound', 5, tc_inst, coalesce(smsp_inst_issued, smsp_issue_active)),
        ('tc_active_bound', 6, tc_cycles_active, smsp_cycles_active)) lv(level, ord, num, den)
    WHERE lv.num IS NOT NULL AND lv.den > 0
), g AS (
    SELECT run, iteration, layer_type, level, ord, num, den FROM v
    UNION ALL
    SELECT run, iteration, 'all', level, ord, num, den FROM v
)
SELECT run, iteration, layer_type, level, count(*) AS kernels,
       avg(100.0 * num / den) AS mean_pct,
       100.0 * sum(num) / sum(den) AS cycle_weighted_mean_pct,
       stddev_samp(100.0 * num / den) AS std_pct,
       min(100.0 * num / den) AS min_pct,
       quantile_cont(100.0 * num / den, 0.25) AS p25_pct,
       quantile_cont(100.0 * num / den, 0.5) AS median_pct,
       quantile_cont(100.0 * num / den, 0.75) AS p75_pct,
       max(100.0 * num / den) AS max_pct
FROM g
GROUP BY run, iteration, layer_type, level, ord
ORDER BY run, iteration NULLS LAST, layer_type = 'all' DESC, layer_type, ord;
