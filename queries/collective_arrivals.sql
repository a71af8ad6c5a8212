-- name: collective_arrivals
-- topic: distributed
-- description: One row per collective call per rank: when the rank arrived,
--   relative to the first rank of its process group (0 for the first, the
--   call's skew for the last; the rank x collective matrix behind
--   collective_skew and the skew heat map), its message (dtype, nccl-tests' S)
--   and its own kernel's time and bandwidth (which include its wait).
-- steady: job
-- iteration_all: sql
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   process_group VARCHAR = NULL: process group name (all when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration (chosen once from all ranks), every call, or iteration N
-- columns:
--   job VARCHAR: job
--   process_group VARCHAR: process group name
--   seq BIGINT: sequence number of the call in its process group
--   collective VARCHAR: collective name
--   iteration INTEGER: iteration of the call (NULL: outside every iteration)
--   rank INTEGER: rank
--   arrival_ns BIGINT: this rank's kernel start - the first rank's, ns
--   dur_ns BIGINT: this rank's kernel time (its wait included), ns
--   dtype VARCHAR: element type (record_param_comms dtype)
--   msg_bytes BIGINT: message size S (nccl-tests), bytes
--   algbw_gbps DOUBLE: msg_bytes / dur_ns, GB/s
--   busbw_gbps DOUBLE: algbw x the busbw factor of the collective and group size, GB/s
-- requires:
--   collectives: communication kernels (NCCL/RCCL) in a trace
-- engines: duckdb, spark
SELECT c.job, c.process_group, c.seq, c.collective, c.iteration, j.rank,
       k.ts_ns - c.first_start_ns AS arrival_ns, k.dur_ns, k.dtype, k.msg_bytes,
       CAST(k.msg_bytes AS DOUBLE) / nullif(k.dur_ns, 0) AS algbw_gbps,
       k.busbw_factor * k.msg_bytes / nullif(k.dur_ns, 0) AS busbw_gbps
FROM collective_calls c
JOIN job_runs j ON j.job = c.job
JOIN collectives k ON k.run = j.run AND k.process_group = c.process_group AND k.seq = c.seq
LEFT JOIN job_iterations i ON i.job = c.job AND i.iteration = c.iteration
WHERE ($job IS NULL OR c.job = $job) AND ($process_group IS NULL OR c.process_group = $process_group)
  AND ($iteration = 'all' OR ($iteration = 'steady' AND coalesce(i.steady, false)) OR CAST(c.iteration AS VARCHAR) = $iteration)
ORDER BY c.job, c.process_group, c.seq, j.rank;
