-- name: time_breakdown
-- topic: single GPU
-- description: Share of an iteration in CPU kernels only, GPU kernels only,
--   both at once (overlap), and neither: framework overhead (method.md
--   section 5). CPU kernels are TensorFlow kernel calls
--   (KernelAndDeviceFunc::Run) and Eigen thread-pool regions; GPU kernels are
--   the trace's kernels. Works for any trace run (PyTorch runs have no CPU
--   kernels in this sense).
-- steady: run
-- segment_windows: iteration
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: every iteration together, the sums of their rows; an iteration's GPU tail may run past the next one's start, so total_ns may exceed the trace's span)
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
    WHERE ($run IS NULL OR run = $run)
      AND (TRY_CAST($iteration AS INTEGER) IS NULL OR iteration = TRY_CAST($iteration AS INTEGER))
    GROUP BY run, iteration
), per AS (         -- the iterations asked for
    SELECT s.run, s.iteration, i.dur_ns AS total_ns, coalesce(c, 0) AS c, coalesce(g, 0) AS g,
           coalesce(o, 0) AS o, coalesce(n, 0) AS n
    FROM s JOIN iterations i USING (run, iteration)
    LEFT JOIN iteration_steadiness st USING (run, iteration)
    WHERE ($iteration IS NULL AND st.steady) OR $iteration = 'all'
       OR s.iteration = CAST(CASE WHEN $iteration <> 'all' THEN $iteration END AS INTEGER)
), r AS (
    SELECT * FROM per
    UNION ALL
    SELECT run, NULL, sum(total_ns), sum(c), sum(g), sum(o), sum(n) FROM per WHERE $iteration = 'all' GROUP BY run
)
SELECT run, iteration, CAST(total_ns AS BIGINT) AS total_ns,
       CAST(c AS BIGINT) AS cpu_kernel_ns, CAST(g AS BIGINT) AS gpu_kernel_ns,
       CAST(o AS BIGINT) AS overlap_ns, CAST(n AS BIGINT) AS overhead_ns,
       round(100.0 * c / total_ns, 2) AS cpu_kernel_pct, round(100.0 * g / total_ns, 2) AS gpu_kernel_pct,
       round(100.0 * o / total_ns, 2) AS overlap_pct, round(100.0 * n / total_ns, 2) AS overhead_pct
FROM r
ORDER BY run, iteration NULLS LAST;
