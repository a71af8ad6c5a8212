-- name: occupancy
-- topic: ncu levels
-- description: Occupancy per layer type of an iteration (METHOD.md section 9),
--   weighted by kernel time: from the trace's own kernel args (CUPTI's blocks
--   per SM, warps per SM and estimated achieved occupancy, which Kineto writes
--   for every kernel) and, for the kernels matched with an ncu report, ncu's
--   achieved occupancy (sm__warps_active.avg.pct_of_peak_sustained_active) and
--   the theoretical occupancy of the launch (the fewest blocks any resource
--   allows per SM, view ncu_kernel_occupancy). Low occupancy with few blocks per
--   SM means too small a grid (batch); with many blocks, a per-block resource
--   (registers, shared memory) is the limit.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and the whole trace); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace)
--   layer_type VARCHAR: layer type (layer_rules)
--   kernels BIGINT: kernels of this type
--   time_ns BIGINT: their summed duration, ns
--   blocks_per_sm DOUBLE: kernel-time-weighted mean of the trace's blocks per SM
--   warps_per_sm DOUBLE: kernel-time-weighted mean of the trace's warps per SM
--   est_occupancy_pct DOUBLE: kernel-time-weighted mean of the trace's estimated achieved occupancy, %
--   matched_kernels BIGINT: kernels matched with an ncu report
--   ncu_achieved_occupancy_pct DOUBLE: kernel-time-weighted ncu achieved occupancy of the matched kernels, %
--   ncu_theoretical_occupancy_pct DOUBLE: kernel-time-weighted theoretical occupancy of their launches, %
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
WITH w AS (
    SELECT * FROM iteration_windows($run, $iteration)
), k AS (
    SELECT w.run, w.iteration, k.kernel_id, k.dur_ns, l.layer_type,
           a.blocks_per_sm, a.warps_per_sm, a.est_occupancy_pct
    FROM w
    JOIN kernels k ON k.run = w.run AND k.kind = 'kernel' AND k.ts_ns IS NOT NULL
                  AND (k.iteration = w.iteration OR (w.iteration IS NULL AND k.iteration IS NOT NULL))
    JOIN kernel_layers l ON l.run = k.run AND l.kernel_id = k.kernel_id
    LEFT JOIN activity_args a ON a.run = k.run AND a.kernel_id = k.kernel_id
), n AS (
    SELECT mk.run, mk.kernel_id, mk.achieved_occupancy_pct, o.theoretical_occupancy_pct
    FROM matched_kernels mk
    JOIN trace_ncu_pairs p ON p.run = mk.run AND p.ncu_run = mk.ncu_run
    LEFT JOIN ncu_kernel_occupancy o ON o.run = mk.ncu_run AND o.kernel_id = mk.ncu_id
)
SELECT k.run, k.iteration, k.layer_type, count(*) AS kernels, CAST(sum(k.dur_ns) AS BIGINT) AS time_ns,
       sum(k.blocks_per_sm * k.dur_ns) / sum(k.dur_ns) FILTER (k.blocks_per_sm IS NOT NULL) AS blocks_per_sm,
       sum(k.warps_per_sm * k.dur_ns) / sum(k.dur_ns) FILTER (k.warps_per_sm IS NOT NULL) AS warps_per_sm,
       sum(k.est_occupancy_pct * k.dur_ns) / sum(k.dur_ns) FILTER (k.est_occupancy_pct IS NOT NULL) AS est_occupancy_pct,
       count(n.kernel_id) AS matched_kernels,
       sum(n.achieved_occupancy_pct * k.dur_ns) / sum(k.dur_ns) FILTER (n.achieved_occupancy_pct IS NOT NULL)
         AS ncu_achieved_occupancy_pct,
       sum(n.theoretical_occupancy_pct * k.dur_ns) / sum(k.dur_ns) FILTER (n.theoretical_occupancy_pct IS NOT NULL)
         AS ncu_theoretical_occupancy_pct
FROM k LEFT JOIN n ON n.run = k.run AND n.kernel_id = k.kernel_id
GROUP BY k.run, k.iteration, k.layer_type
ORDER BY k.run, k.iteration NULLS LAST, time_ns DESC;
