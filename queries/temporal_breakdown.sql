-- name: temporal_breakdown
-- topic: distributed
-- description: Per rank and iteration, HTA's temporal breakdown: idle time (no
--   GPU activity on any stream), compute time (union of compute kernels) and
--   non-compute time (GPU activity with no compute kernel running:
--   communication, memcpy, memset). The window is the iteration (as in
--   gpu_utilization) or, for the whole trace, the first GPU activity's start to
--   the last one's end (HTA's window).
--   A trace run's times are read from gpu_class_totals where an ingest with
--   --op-totals stored them, while kernel_class_rules is unchanged; other runs
--   are swept.
-- steady: job
-- iteration_all: sql, whole run
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   run RUN = NULL: one rank's trace run (all when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration (chosen once from all ranks), every iteration plus the whole trace (iteration NULL, also of a run without iterations), or iteration N
-- columns:
--   job VARCHAR: job
--   rank INTEGER: rank
--   run VARCHAR: trace run of that rank
--   iteration INTEGER: iteration (NULL: the whole trace)
--   window_ns BIGINT: the time split, ns
--   idle_ns BIGINT: no GPU activity, ns
--   compute_ns BIGINT: a compute kernel running, ns
--   non_compute_ns BIGINT: GPU activity but no compute kernel, ns
--   idle_pct DOUBLE: share of window_ns, %
--   compute_pct DOUBLE: share of window_ns, %
--   non_compute_pct DOUBLE: share of window_ns, %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
SELECT s.job, s.rank, s.run, s.iteration, g.window_ns,
       g.window_ns - g.busy_ns AS idle_ns, g.compute_ns, g.busy_ns - g.compute_ns AS non_compute_ns,
       round(100.0 * (g.window_ns - g.busy_ns) / g.window_ns, 2) AS idle_pct,
       round(100.0 * g.compute_ns / g.window_ns, 2) AS compute_pct,
       round(100.0 * (g.busy_ns - g.compute_ns) / g.window_ns, 2) AS non_compute_pct
FROM job_run_iterations s
JOIN gpu_class_time g ON g.run = s.run AND g.iteration IS NOT DISTINCT FROM s.iteration
WHERE ($job IS NULL OR s.job = $job) AND ($run IS NULL OR s.run = $run)
  AND ($iteration = 'all' OR ($iteration = 'steady' AND s.steady) OR CAST(s.iteration AS VARCHAR) = $iteration)
  -- on g too: a constant iteration reaches the kernels' scan through gpu_class_time
  AND (TRY_CAST($iteration AS INTEGER) IS NULL OR g.iteration = TRY_CAST($iteration AS INTEGER))
ORDER BY s.job, s.rank, s.run, s.iteration NULLS LAST;
