-- name: comm_overlap
-- topic: distributed
-- description: Per rank and iteration, communication time (union of the
--   communication kernels) and the share of it during which a compute kernel
--   runs on the same GPU: HTA's comm/comp overlap, |U(compute) ∩
--   U(communication)| / |U(communication)|. exposed_ns is the communication
--   nothing hides.
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
--   communication_ns BIGINT: time with a communication kernel running, ns
--   overlap_ns BIGINT: of it, time with a compute kernel running too, ns
--   exposed_ns BIGINT: communication_ns - overlap_ns, ns
--   overlap_pct DOUBLE: 100 * overlap_ns / communication_ns, % (NULL without communication)
-- requires:
--   kernels: GPU kernels
--   collectives: communication kernels (NCCL/RCCL) in a trace
-- engines: duckdb, spark
SELECT s.job, s.rank, s.run, s.iteration, g.communication_ns,
       g.compute_communication_ns + g.all_three_ns AS overlap_ns,
       g.communication_ns - g.compute_communication_ns - g.all_three_ns AS exposed_ns,
       round(100.0 * (g.compute_communication_ns + g.all_three_ns) / nullif(g.communication_ns, 0), 2) AS overlap_pct
FROM job_run_iterations s
JOIN gpu_class_time g ON g.run = s.run AND g.iteration IS NOT DISTINCT FROM s.iteration
WHERE ($job IS NULL OR s.job = $job) AND ($run IS NULL OR s.run = $run)
  AND ($iteration = 'all' OR ($iteration = 'steady' AND s.steady) OR CAST(s.iteration AS VARCHAR) = $iteration)
ORDER BY s.job, s.rank, s.run, s.iteration NULLS LAST;
