-- name: rank_summary
-- description: One row per rank of a distributed job (runs with a rank from
--   Kineto's distributedInfo): the steady iteration's time, GPU utilization
--   and launch statistics, and which ranks straggle (steady iteration more than
--   `straggler_pct` above the median rank's).
-- parameters:
--   run VARCHAR = NULL: trace run to report on (every rank's run when absent)
--   straggler_pct DOUBLE = 5: how much slower than the median rank a straggler is, %
-- columns:
--   rank INTEGER: rank (distributedInfo.rank)
--   run VARCHAR: trace run of that rank
--   iteration INTEGER: its steady iteration
--   total_ns BIGINT: steady iteration duration, ns
--   gpu_util_pct DOUBLE: GPU utilization, %
--   kernels BIGINT: kernels in the iteration
--   launch_delay_p50_ns DOUBLE: median kernel start - launch call end, ns
--   launch_delay_p95_ns DOUBLE: 95th percentile of it, ns
--   vs_median_pct DOUBLE: total_ns relative to the median rank's, % (+ = slower)
--   straggler BOOLEAN: vs_median_pct > straggler_pct
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
WITH r AS (
    SELECT r.run, r.rank, u.iteration, u.total_ns, u.gpu_util_pct, u.kernels
    FROM runs r JOIN iteration_utilization u ON u.run = r.run
    WHERE r.kind = 'trace' AND r.rank IS NOT NULL AND u.steady AND ($run IS NULL OR r.run = $run)
), d AS (
    SELECT k.run, percentile_cont(0.5) WITHIN GROUP (ORDER BY k.ts_ns - k.launch_end_ns) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY k.ts_ns - k.launch_end_ns) AS p95
    FROM kernels k JOIN r ON r.run = k.run AND r.iteration = k.iteration
    WHERE k.kind = 'kernel' AND k.launch_end_ns IS NOT NULL
    GROUP BY k.run
), m AS (
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ns) AS med FROM r
)
SELECT r.rank, r.run, r.iteration, r.total_ns, round(r.gpu_util_pct, 2) AS gpu_util_pct, r.kernels,
       d.p50 AS launch_delay_p50_ns, d.p95 AS launch_delay_p95_ns,
       round(100.0 * (r.total_ns - m.med) / m.med, 2) AS vs_median_pct,
       100.0 * (r.total_ns - m.med) / m.med > $straggler_pct AS straggler
FROM r CROSS JOIN m LEFT JOIN d ON d.run = r.run
ORDER BY r.rank, r.run;
