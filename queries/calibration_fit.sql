-- name: calibration_fit
-- description: Fits of the data-movement energy model (method.md section 7):
--   for each GPU, memory level and launch shape of the calibration points,
--   energy = eps x accesses + offset by least squares (regr_slope,
--   regr_intercept, regr_r2 over the valid points), and lower_bound on the row
--   whose eps the model uses (smallest eps among fits with >= 3 points and
--   r2 >= 0.95). The published A100 values ship as reference rows.
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
-- requires:
--   runs: ingested runs (tracedb ingest FILE --db DB)
-- engines: duckdb, spark
SELECT gpu, level, threads_per_block, blocks, round(eps_pj, 2) AS eps_pj, offset_j, round(r2, 5) AS r2,
       n_points, lower_bound, reference
FROM calibration_fits
WHERE $gpu IS NULL OR gpu = $gpu
ORDER BY gpu, CASE level WHEN 'shared' THEN 1 WHEN 'l1' THEN 2 WHEN 'l2' THEN 3 ELSE 4 END,
         threads_per_block, blocks;
