-- name: calibration_fit
-- topic: energy
-- description: Fits of the data-movement energy model (method.md section 7):
--   for each GPU, memory level and launch shape of the calibration points,
--   energy = eps x accesses + offset by least squares (regr_slope,
--   regr_intercept, regr_r2 over the valid points), and lower_bound on the row
--   whose eps the model uses (smallest eps among fits with >= 3 points and
--   r2 >= 0.95). The published A100 values ship as reference rows. Beside
--   each fit: its spread over repeats (eps fitted on each pass of the sweep
--   alone: mean, std, min, max) and its counter check (what the level's ncu
--   counter counted per access: shared-memory wavefronts per load, sectors
--   per sector elsewhere). Every point: calibration_points.
-- parameters:
--   gpu VARCHAR = NULL: GPU name (all when absent)
-- columns:
--   gpu VARCHAR: GPU the points were measured on (or the reference)
--   level VARCHAR: shared | l1 | l2 | dram
--   threads_per_block INTEGER: launch shape of the fit
--   blocks INTEGER: launch shape of the fit
--   eps_pj DOUBLE: energy per 32-byte sector, pJ
--   offset_j DOUBLE: intercept, J
--   r2 DOUBLE: coefficient of determination of the fit
--   n_points BIGINT: valid points in the fit
--   lower_bound BOOLEAN: the row energy_breakdown uses for this GPU and level
--   reference BOOLEAN: published values, not measured here
--   counted_per_access DOUBLE: the level's ncu counter per access in the counter check (shared: wavefronts per load)
--   n_passes BIGINT: passes of the sweep with at least 2 access counts at this shape
--   eps_pass_mean_pj DOUBLE: mean of the per-pass eps, pJ
--   eps_pass_std_pj DOUBLE: sample standard deviation of the per-pass eps, pJ
--   eps_pass_min_pj DOUBLE: smallest per-pass eps, pJ
--   eps_pass_max_pj DOUBLE: largest per-pass eps, pJ
-- requires:
--   runs: ingested runs (tracedb ingest FILE --db DB)
-- engines: duckdb, spark
SELECT gpu, level, threads_per_block, blocks, round(eps_pj, 2) AS eps_pj, offset_j, round(r2, 5) AS r2,
       n_points, lower_bound, reference, round(counted_per_access, 5) AS counted_per_access, n_passes,
       round(eps_pass_mean_pj, 2) AS eps_pass_mean_pj, round(eps_pass_std_pj, 2) AS eps_pass_std_pj,
       round(eps_pass_min_pj, 2) AS eps_pass_min_pj, round(eps_pass_max_pj, 2) AS eps_pass_max_pj
FROM calibration_fits
WHERE $gpu IS NULL OR gpu = $gpu
ORDER BY gpu, CASE level WHEN 'shared' THEN 1 WHEN 'l1' THEN 2 WHEN 'l2' THEN 3 ELSE 4 END,
         threads_per_block, blocks;
