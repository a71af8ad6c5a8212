-- name: calibration_points
-- topic: energy
-- description: Every point of a calibration (METHOD.md section 7) with its
--   spread over repeats and its counter check: per GPU, level, launch shape
--   and access count, the energies of the repeats (mean, std, min, max) and
--   the energy per access they give, what the level's ncu counter counted
--   (counted, from the check at check_shape scaled to the point) against the
--   accesses of the formula, the hit rate of the level and whether the point
--   is valid (and why not).
-- parameters:
--   gpu VARCHAR = NULL: GPU name (all when absent)
--   level VARCHAR = NULL: shared | l1 | l2 | dram (all when absent)
-- columns:
--   gpu VARCHAR: GPU the points were measured on
--   level VARCHAR: shared | l1 | l2 | dram
--   threads_per_block INTEGER: launch shape
--   blocks INTEGER: launch shape
--   accesses DOUBLE: accesses of the measurement loop (array_size x blocks x threads / (stride x granularity) per pass), 32-byte loads
--   repeats BIGINT: points measured at this access count
--   energy_mean_j DOUBLE: mean energy of the repeats, J
--   energy_std_j DOUBLE: sample standard deviation of the repeats' energy, J
--   energy_min_j DOUBLE: smallest energy of the repeats, J
--   energy_max_j DOUBLE: largest energy of the repeats, J
--   pj_per_access_mean DOUBLE: energy_mean_j / accesses, pJ (the offset included)
--   counted DOUBLE: what the level's counter counted at this access count (shared: wavefronts; else sectors)
--   counted_per_access DOUBLE: counted / accesses (shared: wavefronts per load)
--   hit_rate_pct DOUBLE: share of the accesses served by the target level in the counter check, %
--   check_shape VARCHAR: launch shape of the counter check the point rests on
--   valid BOOLEAN: every repeat passed the check and had a positive energy difference
--   note VARCHAR: why points are not valid
-- requires:
--   calibration: calibration points (tracedb ingest points.csv from python -m tracedb.cuda_bench)
-- engines: duckdb
SELECT gpu, level, threads_per_block, blocks, accesses, count(*) AS repeats,
       avg(energy_j) AS energy_mean_j, stddev_samp(energy_j) AS energy_std_j,
       min(energy_j) AS energy_min_j, max(energy_j) AS energy_max_j,
       avg(energy_j) / accesses * 1e12 AS pj_per_access_mean,
       avg(counted) AS counted, avg(counted) / accesses AS counted_per_access,
       avg(hit_rate_pct) AS hit_rate_pct, min(check_shape) AS check_shape,
       bool_and(valid) AS valid,
       nullif(string_agg(DISTINCT nullif(note, ''), '; '), '') AS note
FROM calibration
WHERE NOT reference AND ($gpu IS NULL OR gpu = $gpu) AND ($level IS NULL OR level = $level)
GROUP BY gpu, level, threads_per_block, blocks, accesses
ORDER BY gpu, CASE level WHEN 'shared' THEN 1 WHEN 'l1' THEN 2 WHEN 'l2' THEN 3 ELSE 4 END,
         threads_per_block, blocks, accesses;
