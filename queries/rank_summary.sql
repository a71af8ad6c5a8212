-- name: rank_summary
-- topic: distributed
-- description: One row per rank of a distributed job (runs with a rank from
--   Kineto's distributedInfo or --rank), all on the same iteration: the job's
--   steady iteration is chosen once from all ranks (view job_iterations), so
--   ranks are compared like with like. The iteration's time, GPU utilization
--   and launch statistics, and the job's straggler: the rank whose lateness at
--   the collectives costs the job step time (view job_stragglers, as in
--   straggler_ranks), not the rank with the longest iteration (the one that
--   waits for it).
-- steady: job
-- iteration_all: sql
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   run RUN = NULL: trace run to report on (every rank's run when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration, every iteration, or iteration N
-- columns:
--   job VARCHAR: job
--   rank INTEGER: rank (distributedInfo.rank or --rank)
--   run VARCHAR: trace run of that rank
--   iteration INTEGER: the iteration (the same for every rank of a job)
--   total_ns BIGINT: iteration duration on this rank, ns
--   gpu_util_pct DOUBLE: GPU utilization, %
--   kernels BIGINT: kernels in the iteration
--   launch_delay_p50_ns DOUBLE: median kernel start - launch call end, ns
--   launch_delay_p95_ns DOUBLE: 95th percentile of it, ns
--   vs_median_pct DOUBLE: total_ns relative to the median rank's in the same iteration, % (+ = slower)
--   straggler BOOLEAN: the rank is the job's straggler (job_stragglers.straggler)
--   straggler_cost_ns BIGINT: on the straggler's row, the step time the job loses to it (job_stragglers.cost_ns), ns
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
WITH r AS (
    SELECT s.job, s.run, s.rank, u.iteration, u.total_ns, u.gpu_util_pct, u.kernels
    FROM job_run_iterations s JOIN iteration_gpu_time u ON u.run = s.run AND u.iteration = s.iteration
    WHERE s.rank IS NOT NULL AND ($job IS NULL OR s.job = $job) AND ($run IS NULL OR s.run = $run)
      AND ($iteration = 'all' OR ($iteration = 'steady' AND s.steady) OR CAST(s.iteration AS VARCHAR) = $iteration)
      -- on u too: a constant iteration reaches the kernels' scan through iteration_gpu_time
      AND (TRY_CAST($iteration AS INTEGER) IS NULL OR u.iteration = TRY_CAST($iteration AS INTEGER))
), d AS (
    SELECT k.run, k.iteration, percentile_cont(0.5) WITHIN GROUP (ORDER BY k.ts_ns - k.launch_end_ns) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY k.ts_ns - k.launch_end_ns) AS p95
    FROM kernels k JOIN r ON r.run = k.run AND r.iteration = k.iteration
    WHERE k.kind = 'kernel' AND k.launch_end_ns IS NOT NULL
      AND (TRY_CAST($iteration AS INTEGER) IS NULL OR k.iteration = TRY_CAST($iteration AS INTEGER))
    GROUP BY k.run, k.iteration
), m AS (
    SELECT job, iteration, percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ns) AS med FROM r GROUP BY job, iteration
)
SELECT r.job, r.rank, r.run, r.iteration, r.total_ns, round(r.gpu_util_pct, 2) AS gpu_util_pct, r.kernels,
       d.p50 AS launch_delay_p50_ns, d.p95 AS launch_delay_p95_ns,
       round(100.0 * (r.total_ns - m.med) / m.med, 2) AS vs_median_pct,
       coalesce(g.straggler, false) AS straggler, CASE WHEN g.straggler THEN g.cost_ns END AS straggler_cost_ns
FROM r JOIN m ON m.job = r.job AND m.iteration = r.iteration
LEFT JOIN job_stragglers g ON g.job = r.job AND g.rank = r.rank
LEFT JOIN d ON d.run = r.run AND d.iteration = r.iteration
ORDER BY r.job, r.iteration, r.rank, r.run;
