-- name: energy_breakdown
-- topic: energy
-- description: Where the energy of an iteration goes (method.md section 7):
--   static energy (idle power x duration), the energy of data movement per
--   memory level = accesses x eps (lower bound of the calibration for the
--   GPU) from the matched kernels' counters (32-byte sectors: L1 hits, L2
--   hits, DRAM reads and writes; shared memory: wavefronts, turned into the
--   calibration's 32-byte loads by the wavefronts per load its counter check
--   counted, counter_per_access), and the rest of the dynamic energy. The
--   fit's intercept (METHOD.md's dE_level) is shown as fit_offset_j but not
--   added: it is the energy of a microbenchmark run that does not scale with
--   its accesses, whose size follows the run's length, not the application's
--   (docs/reports.md shows why). One row per component with joules and its share of
--   the total and of the dynamic energy. Needs a trace, its power log, its
--   matched ncu report and a calibration for the GPU (calibration_gpu names
--   another one, e.g. the shipped 'NVIDIA A100 (published)').
-- steady: run
-- parameters:
--   run RUN = NULL: trace run
--   iteration INTEGER = NULL: iteration (the steady one when absent)
--   calibration_gpu VARCHAR = NULL: calibration to use (the trace's GPU when absent)
--   power_run RUN = NULL: power log to use when the trace has several
--   gpu INTEGER = NULL: GPU index in the power log (default: the trace run's own GPU, view run_gpu, when the log has it, else the lowest)
--   idle_power_w DOUBLE >= 0 = NULL: idle power to use instead of the log's
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   component VARCHAR: static | shared | l1 | l2 | dram | dynamic_rest | total
--   counted DOUBLE: what the level's ncu counter counted (shared: wavefronts; else 32-byte sectors)
--   counter_per_access DOUBLE: shared: wavefronts per calibration access, from the calibration's counter check (1 when it has none); 1 for the other levels
--   accesses DOUBLE: counted / counter_per_access: 32-byte sectors (memory levels)
--   eps_pj DOUBLE: energy per sector used, pJ
--   fit_offset_j DOUBLE: intercept of the calibration fit used, J (not added: see the description)
--   energy_j DOUBLE: energy, J
--   share_total_pct DOUBLE: share of the total energy, %
--   share_dynamic_pct DOUBLE: share of the dynamic energy, % (NULL for static and total)
--   note VARCHAR: calibration used, missing counters, power-log warnings
-- requires:
--   matches: ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)
--   trace_power_pairs: a power log aligned with the run (tracedb ingest LOG --pair-with RUN)
WITH it AS (
    SELECT run, iteration, 'iteration' AS label, start_ns AS s, end_ns AS e
    FROM iteration_utilization JOIN iterations USING (run, iteration)
    WHERE ($run IS NULL OR run = $run) AND (iteration = $iteration OR ($iteration IS NULL AND steady))
      AND run IN (SELECT run FROM trace_ncu_pairs)
), en AS (
    SELECT run, iteration, energy_integrated_j AS total_j,
           coalesce($idle_power_w, idle_power_w) * (e - s) / 1e9 AS static_j,
           e - s < counter_period_ns AS short_window
    FROM energy_of_windows('it', $power_run, $gpu)
), acc AS (
    SELECT run, iteration,
           sum(coalesce(shared_wavefronts_ld, 0) + coalesce(shared_wavefronts_st, 0)) AS shared,
           sum(coalesce(l1_hit_sectors_ld, 0) + coalesce(l1_hit_sectors_st, 0)) AS l1,
           sum(coalesce(l2_hit_sectors_read, 0) + coalesce(l2_hit_sectors_write, 0)) AS l2,
           sum(coalesce(dram_sectors_read, 0) + coalesce(dram_sectors_write, 0)) AS dram,
           concat_ws(', ',
             CASE WHEN count(shared_wavefronts_st) = 0 THEN 'shared stores' END,
             CASE WHEN count(l1_hit_sectors_st) = 0 THEN 'L1 store hits' END,
             CASE WHEN count(l2_hit_sectors_write) = 0 THEN 'L2 write hits' END,
             CASE WHEN count(dram_sectors_write) = 0 THEN 'DRAM writes' END) AS missing
    FROM kernel_levels JOIN it USING (run, iteration) GROUP BY run, iteration
), cal AS (
    SELECT r.run, f.level, f.eps_pj, f.offset_j, f.gpu, f.reference,
           -- only shared memory counts in another unit (wavefronts); the other levels'
           -- counters count 32-byte sectors on both sides (calibration_fit shows their checks)
           CASE WHEN f.level = 'shared' THEN coalesce(f.counted_per_access, 1.0) ELSE 1.0 END AS counter_per_access,
           f.counted_per_access IS NULL AS no_check
    FROM (SELECT run, coalesce($calibration_gpu, device_name) AS cgpu FROM runs) r
    JOIN calibration_fits f ON f.gpu = r.cgpu AND f.lower_bound
), lv AS (
    SELECT a.run, a.iteration, l.component, l.ord,
           CASE l.component WHEN 'shared' THEN a.shared WHEN 'l1' THEN a.l1 WHEN 'l2' THEN a.l2 ELSE a.dram END AS counted
    FROM acc a CROSS JOIN (VALUES ('shared', 1), ('l1', 2), ('l2', 3), ('dram', 4)) l(component, ord)
), mem AS (
    SELECT lv.*, coalesce(c.eps_pj, error('no calibration for GPU '
                    || coalesce($calibration_gpu, (SELECT device_name FROM runs WHERE run = lv.run), '?')
                    || ' at level ' || lv.component || ': ingest cuda_bench output for it, or pass '
                    || '--param calibration_gpu=NAME (calibrations: '
                    || (SELECT string_agg(DISTINCT gpu, ', ') FROM calibration_fits) || ')')) AS eps_pj,
           lv.counted / c.counter_per_access AS accesses, c.counter_per_access,
           lv.counted / c.counter_per_access * c.eps_pj * 1e-12 AS energy_j, c.offset_j AS fit_offset_j,
           c.gpu AS cal_gpu, c.reference, c.no_check AND lv.component = 'shared' AS shared_unchecked
    FROM lv LEFT JOIN cal c ON c.run = lv.run AND c.level = lv.component
), parts AS (
    SELECT run, iteration, component, ord, counted, counter_per_access, accesses, eps_pj, fit_offset_j, energy_j
    FROM mem
    UNION ALL
    SELECT run, iteration, 'static', 0, NULL, NULL, NULL, NULL, NULL, static_j FROM en
    UNION ALL
    SELECT en.run, en.iteration, 'dynamic_rest', 5, NULL, NULL, NULL, NULL, NULL,
           en.total_j - en.static_j - (SELECT sum(energy_j) FROM mem m WHERE m.run = en.run AND m.iteration = en.iteration)
    FROM en
    UNION ALL
    SELECT run, iteration, 'total', 6, NULL, NULL, NULL, NULL, NULL, total_j FROM en
), notes AS (
    SELECT m.run, m.iteration,
           concat_ws('; ', 'calibration: ' || any_value(m.cal_gpu) || CASE WHEN bool_or(m.reference) THEN ' (published reference values)' ELSE ' (measured)' END,
             CASE WHEN bool_or(m.shared_unchecked) THEN 'shared-memory wavefronts taken as 32-byte accesses (the calibration has no counter check)' END,
             CASE WHEN any_value(a.missing) <> '' THEN 'counters not in the ncu report (counted as 0): ' || any_value(a.missing) END,
             CASE WHEN bool_or(en.short_window) THEN 'the iteration is shorter than the energy counter''s update period: see energy_summary' END) AS note
    FROM mem m JOIN acc a USING (run, iteration) JOIN en USING (run, iteration)
    GROUP BY m.run, m.iteration
)
SELECT p.run, p.iteration, p.component, p.counted, p.counter_per_access, p.accesses, round(p.eps_pj, 2) AS eps_pj,
       p.fit_offset_j, p.energy_j,
       round(100.0 * p.energy_j / en.total_j, 2) AS share_total_pct,
       CASE WHEN p.component NOT IN ('static', 'total')
            THEN round(100.0 * p.energy_j / (en.total_j - en.static_j), 2) END AS share_dynamic_pct,
       n.note
FROM parts p JOIN en USING (run, iteration) JOIN notes n USING (run, iteration)
ORDER BY p.run, p.iteration, p.ord;
