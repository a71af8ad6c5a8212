-- name: time_breakdown
-- description: Share of each iteration in CPU kernels only, GPU kernels only,
--   both at once (overlap), and neither: framework overhead (method.md
--   section 5). CPU kernels are TensorFlow kernel calls
--   (KernelAndDeviceFunc::Run) and Eigen thread-pool regions; GPU kernels are
--   the trace's kernels. Works for any trace run (PyTorch runs have no CPU
--   kernels in this sense).
-- parameters:
--   run VARCHAR = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   total_ns BIGINT: iteration duration, ns
--   cpu_kernel_ns BIGINT: CPU kernels running, no GPU kernel, ns
--   gpu_kernel_ns BIGINT: GPU kernels running, no CPU kernel, ns
--   overlap_ns BIGINT: both running, ns
--   overhead_ns BIGINT: neither running (framework overhead), ns
--   cpu_kernel_pct DOUBLE: share, %
--   gpu_kernel_pct DOUBLE: share, %
--   overlap_pct DOUBLE: share, %
--   overhead_pct DOUBLE: share, %
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
WITH s AS (
    SELECT run, iteration,
           sum(dur_ns) FILTER (cpu_kernel AND NOT gpu_kernel) AS c, sum(dur_ns) FILTER (gpu_kernel AND NOT cpu_kernel) AS g,
           sum(dur_ns) FILTER (cpu_kernel AND gpu_kernel) AS o, sum(dur_ns) FILTER (NOT cpu_kernel AND NOT gpu_kernel) AS n
    FROM activity_segments
    WHERE ($run IS NULL OR run = $run) AND ($iteration IS NULL OR iteration = $iteration)
    GROUP BY run, iteration
)
SELECT s.run, s.iteration, i.dur_ns AS total_ns,
       CAST(coalesce(c, 0) AS BIGINT) AS cpu_kernel_ns, CAST(coalesce(g, 0) AS BIGINT) AS gpu_kernel_ns,
       CAST(coalesce(o, 0) AS BIGINT) AS overlap_ns, CAST(coalesce(n, 0) AS BIGINT) AS overhead_ns,
       round(100.0 * coalesce(c, 0) / i.dur_ns, 2) AS cpu_kernel_pct, round(100.0 * coalesce(g, 0) / i.dur_ns, 2) AS gpu_kernel_pct,
       round(100.0 * coalesce(o, 0) / i.dur_ns, 2) AS overlap_pct, round(100.0 * coalesce(n, 0) / i.dur_ns, 2) AS overhead_pct
FROM s JOIN iterations i USING (run, iteration)
ORDER BY s.run, s.iteration;
