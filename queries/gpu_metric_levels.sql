-- name: gpu_metric_levels
-- topic: ncu levels
-- description: The utilization levels from Nsight Systems' sampled GPU metrics
--   (nsys --gpu-metrics-devices; table gpu_metric_samples), per iteration and
--   GPU (method.md section 3, "A fourth source"): the time-weighted means over
--   the iteration of SM active, SM issue, tensor active and DRAM read and write
--   bandwidth (each a % of its peak), a sample's value holding over the interval
--   from its own timestamp to the next sample of its GPU and metric, weighted
--   by the part of that interval inside the iteration. That is the convention
--   of NVIDIA's own recipe (nsys_recipe gpu_metric_util_map of Nsight Systems
--   2023.3.1, as quoted in a public adaptation): a sample's timestamp begins
--   the sampling period its value describes, which ends at the next sample. An
--   interval is at most 2 sampling periods of its GPU (the largest of its
--   metrics' median intervals): a sample before a gap holds its first 2
--   periods and the rest of the gap counts as not covered, which covered_pct
--   shows; the last sample of a GPU and metric holds one period. The GPU of a
--   sample is its typeId's low byte, as in the same recipe (`typeId & 0xFF`),
--   taken to be the kernels' CUDA device: not verified on a real export
--   (docs/nsys.md). Where several names of a GPU's
--   metrics match one level, one is used, by a fixed preference, then by
--   name: `SMs Active` before `SM Active`; `Tensor Active` before `Tensor
--   Active / FP16 Active` (any other `Tensor Active ...`) before `Tensor Pipe
--   Active`; the note names those left out. Beside the levels, the
--   trace's GPU utilization and ncu's levels scaled to the iteration
--   (utilization_levels' *_iter columns) where an ncu run is matched. Each
--   sampled level averages the whole GPU (every SM, every kernel and process
--   on it), over a sampling period (100 us at nsys's default 10 kHz); ncu's are
--   counted per kernel and summed: they agree only as far as the iteration's
--   kernels are the GPU's only work and the samples cover the iteration.
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   device INTEGER: GPU (kernels.device)
--   total_ns BIGINT: iteration duration, ns
--   covered_pct DOUBLE: share of the iteration covered by sample intervals (of SM active, else of any metric), %
--   samples BIGINT: samples of the levels' metrics whose interval overlaps the iteration
--   sm_active_pct DOUBLE: time-weighted mean of `SMs Active` (`SM Active`), % of SM cycles with a warp resident, over the GPU's SMs
--   sm_issue_pct DOUBLE: time-weighted mean of `SM Issue`, % of SM sub-partition cycles that issued an instruction
--   tensor_active_pct DOUBLE: time-weighted mean of `Tensor Active`, % of cycles the tensor pipes were active
--   dram_read_pct DOUBLE: time-weighted mean of `DRAM Read Bandwidth`, % of peak DRAM bandwidth
--   dram_write_pct DOUBLE: time-weighted mean of `DRAM Write Bandwidth`, % of peak DRAM bandwidth
--   dram_pct DOUBLE: dram_read_pct + dram_write_pct: DRAM bandwidth used, % of peak
--   gpu_util_pct DOUBLE: the trace's GPU utilization of the iteration (busy time of the kernels launched in it / its duration, all the run's GPUs: the samples see every kernel running in its time, also those launched before it), %
--   ncu_run VARCHAR: ncu run matched to the trace run (NULL: none)
--   ncu_smsp_active_pct_iter DOUBLE: ncu's SMSP active level scaled to the iteration (utilization_levels.smsp_active_pct_iter), %
--   ncu_issue_slot_pct_iter DOUBLE: ncu's issue slot level scaled to the iteration, %
--   ncu_tc_active_pct_iter DOUBLE: ncu's tensor core active level scaled to the iteration, %
--   note VARCHAR: what is missing (a level's metric not sampled, samples not covering the iteration), metrics of a level left out
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, or --iterations-from NAME)
--   gpu_metric_samples: sampled GPU metrics (an Nsight Systems export of nsys profile --gpu-metrics-devices=all)
-- engines: duckdb
WITH named AS (
    SELECT run, device, ts_ns, value, metric,
           CASE WHEN regexp_matches(metric, '^\s*SMs? Active\b', 'i') THEN 'sm_active'
                WHEN regexp_matches(metric, '^\s*SM Issue\b', 'i') THEN 'sm_issue'
                WHEN regexp_matches(metric, '^\s*Tensor (Pipe )?Active\b', 'i') THEN 'tensor_active'
                WHEN regexp_matches(metric, '^\s*DRAM Read Bandwidth\b', 'i') THEN 'dram_read'
                WHEN regexp_matches(metric, '^\s*DRAM Write Bandwidth\b', 'i') THEN 'dram_write' END AS level,
           -- the preference among names of one level (1 first; then by name)
           CASE WHEN regexp_matches(metric, '^\s*SMs Active\b', 'i') THEN 1
                WHEN regexp_matches(metric, '^\s*SM Active\b', 'i') THEN 2
                WHEN regexp_matches(metric, '^\s*Tensor Active\s*(\[|$)', 'i') THEN 1
                WHEN regexp_matches(metric, '^\s*Tensor Active\b', 'i') THEN 2
                WHEN regexp_matches(metric, '^\s*Tensor Pipe Active\b', 'i') THEN 3
                ELSE 1 END AS preference
    FROM gpu_metric_samples
    WHERE ($run IS NULL OR run = $run) AND unit = '%'
), metrics AS (  -- each GPU's metrics of a level, the first by preference chosen
    SELECT run, device, level, metric,
           row_number() OVER (PARTITION BY run, device, level ORDER BY min(preference), metric) = 1 AS chosen
    FROM named WHERE level IS NOT NULL GROUP BY run, device, level, metric
), left_out AS (
    SELECT m.run, m.device,
           string_agg(m.level || '_pct from `' || c.metric || '`, not `' || m.metric || '`', '; '
                      ORDER BY m.level, m.metric) AS what
    FROM metrics m JOIN metrics c ON c.run = m.run AND c.device = m.device AND c.level = m.level AND c.chosen
    WHERE NOT m.chosen GROUP BY m.run, m.device
), s0 AS (       -- each sample's interval: from its own timestamp to the next sample of its GPU and metric
    SELECT n.run, n.device, n.level, n.metric, n.value, n.ts_ns,
           lead(n.ts_ns) OVER (PARTITION BY n.run, n.device, n.metric ORDER BY n.ts_ns) AS next_ns
    FROM named n JOIN metrics m ON m.run = n.run AND m.device = n.device AND m.metric = n.metric AND m.chosen
), gaps AS (
    SELECT run, device, metric, ts_ns - lag(ts_ns) OVER (PARTITION BY run, device, metric ORDER BY ts_ns) AS gap_ns
    FROM named
), period AS (   -- the GPU's sampling period: the largest of its metrics' median intervals
                 -- (nsys samples a GPU's metrics together; a metric sampled more often
                 -- than the rest says less about the period than about its own extra samples)
    SELECT run, device, max(m) AS period_ns
    FROM (SELECT run, device, metric, median(gap_ns) AS m FROM gaps WHERE gap_ns IS NOT NULL
          GROUP BY run, device, metric)
    GROUP BY run, device
), s AS (        -- an interval into a gap in the samples: its first 2 periods only;
                 -- the last sample of a GPU and metric (no next): one period
    SELECT s0.run, s0.device, s0.level, s0.value, s0.ts_ns,
           least(coalesce(s0.next_ns, s0.ts_ns + CAST(p.period_ns AS BIGINT)),
                 s0.ts_ns + CAST(2 * p.period_ns AS BIGINT)) AS to_ns
    FROM s0 JOIN period p USING (run, device)
), it AS (
    SELECT run, iteration, start_ns, end_ns, dur_ns FROM iterations
    WHERE ($run IS NULL OR run = $run) AND ($iteration IS NULL OR iteration = $iteration)
      AND run IN (SELECT DISTINCT run FROM gpu_metric_samples)
), w AS (
    SELECT it.run, it.iteration, s.device, s.level, count(*) AS samples,
           sum(least(s.to_ns, it.end_ns) - greatest(s.ts_ns, it.start_ns)) AS covered_ns,
           sum(s.value * (least(s.to_ns, it.end_ns) - greatest(s.ts_ns, it.start_ns))) AS weighted
    FROM it JOIN s ON s.run = it.run AND s.to_ns > it.start_ns AND s.ts_ns < it.end_ns
    WHERE s.to_ns IS NOT NULL AND s.value IS NOT NULL
    GROUP BY ALL
), p AS (
    SELECT run, iteration, device, sum(samples) AS samples,
           coalesce(max(covered_ns) FILTER (WHERE level = 'sm_active'), max(covered_ns)) AS covered_ns,
           max(weighted / nullif(covered_ns, 0)) FILTER (WHERE level = 'sm_active') AS sm_active_pct,
           max(weighted / nullif(covered_ns, 0)) FILTER (WHERE level = 'sm_issue') AS sm_issue_pct,
           max(weighted / nullif(covered_ns, 0)) FILTER (WHERE level = 'tensor_active') AS tensor_active_pct,
           max(weighted / nullif(covered_ns, 0)) FILTER (WHERE level = 'dram_read') AS dram_read_pct,
           max(weighted / nullif(covered_ns, 0)) FILTER (WHERE level = 'dram_write') AS dram_write_pct
    FROM w GROUP BY run, iteration, device
)
SELECT p.run, p.iteration, p.device, it.dur_ns AS total_ns,
       round(100.0 * p.covered_ns / nullif(it.dur_ns, 0), 2) AS covered_pct, CAST(p.samples AS BIGINT) AS samples,
       round(p.sm_active_pct, 4) AS sm_active_pct, round(p.sm_issue_pct, 4) AS sm_issue_pct,
       round(p.tensor_active_pct, 4) AS tensor_active_pct, round(p.dram_read_pct, 4) AS dram_read_pct,
       round(p.dram_write_pct, 4) AS dram_write_pct, round(p.dram_read_pct + p.dram_write_pct, 4) AS dram_pct,
       round(u.gpu_util_pct, 2) AS gpu_util_pct, u.ncu_run,
       round(u.smsp_active_pct_iter, 2) AS ncu_smsp_active_pct_iter,
       round(u.issue_slot_pct_iter, 2) AS ncu_issue_slot_pct_iter,
       round(u.tc_active_pct_iter, 3) AS ncu_tc_active_pct_iter,
       nullif(concat_ws('; ',
           CASE WHEN p.sm_active_pct IS NULL THEN 'no SM Active samples' END,
           CASE WHEN p.sm_issue_pct IS NULL THEN 'no SM Issue samples' END,
           CASE WHEN p.tensor_active_pct IS NULL THEN 'no Tensor Active samples' END,
           CASE WHEN p.dram_read_pct IS NULL OR p.dram_write_pct IS NULL THEN 'no DRAM read and write bandwidth samples' END,
           CASE WHEN lo.what IS NOT NULL THEN 'one metric per level: ' || lo.what END,
           CASE WHEN p.covered_ns < 0.99 * it.dur_ns
                THEN 'samples cover ' || round(100.0 * p.covered_ns / nullif(it.dur_ns, 0), 1)
                     || '% of the iteration: the means are of that part' END,
           CASE WHEN u.ncu_run IS NULL THEN 'no ncu run matched: ncu levels NULL'
                WHEN u.smsp_active_pct_iter IS NULL AND u.issue_slot_pct_iter IS NULL
                     AND u.tc_active_pct_iter IS NULL THEN 'ncu levels NULL: ' || coalesce(u.note, 'no counters')
                ELSE 'ncu levels: of the run''s kernels on all its GPUs (' || u.ncu_run || ')' END), '') AS note
FROM p JOIN it USING (run, iteration)
LEFT JOIN iteration_utilization u ON u.run = p.run AND u.iteration = p.iteration
LEFT JOIN left_out lo ON lo.run = p.run AND lo.device = p.device
ORDER BY p.run, p.iteration, p.device;
