-- name: collectives
-- topic: distributed
-- description: Collective calls per rank, iteration, process group and
--   collective: how many, their message size (nccl-tests' S), kernel time and
--   bandwidth (nccl-tests: algbw = S / time, busbw = algbw x 2(n-1)/n for
--   all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for
--   broadcast, reduce and send/recv; GB/s = bytes per ns). Times are this
--   rank's kernels, which include the wait for the other ranks: see
--   collective_skew for the bandwidth of the transfer itself.
-- steady: job
-- iteration_all: sql, whole run
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   run RUN = NULL: one rank's trace run (all when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration (chosen once from all ranks), every iteration plus the whole trace (iteration NULL: every call, inside an iteration or not, also of a run without iterations), or iteration N
-- columns:
--   job VARCHAR: job
--   rank INTEGER: rank
--   run VARCHAR: trace run of that rank
--   iteration INTEGER: iteration (NULL: the whole trace)
--   process_group VARCHAR: process group name (record_param_comms `Process Group Name`; 'unknown' when absent)
--   pg_desc VARCHAR: its description (default_pg ...)
--   collective VARCHAR: collective name (allreduce, _allgather_base ...)
--   calls BIGINT: collective calls (communication kernels)
--   msg_bytes BIGINT: summed message size S, bytes (NULL when a call's size is unknown)
--   dur_ns BIGINT: summed kernel time, ns
--   algbw_gbps DOUBLE: msg_bytes / dur_ns, GB/s
--   busbw_gbps DOUBLE: algbw x the busbw factor of the collective and group size, GB/s
-- requires:
--   collectives: communication kernels (NCCL/RCCL) in a trace
-- engines: duckdb, spark
WITH c AS (
    SELECT s.job, s.rank, s.run, s.iteration AS chosen, c.iteration, c.process_group, c.pg_desc, c.collective,
           c.msg_bytes, c.dur_ns, c.busbw_factor
    FROM collectives c JOIN job_run_iterations s ON s.run = c.run
    WHERE ($job IS NULL OR s.job = $job) AND ($run IS NULL OR s.run = $run)
      AND ((s.iteration IS NULL AND $iteration = 'all')
           OR (c.iteration = s.iteration
               AND ($iteration = 'all' OR ($iteration = 'steady' AND s.steady) OR CAST(s.iteration AS VARCHAR) = $iteration)))
)
SELECT job, rank, run, chosen AS iteration, process_group, min(pg_desc) AS pg_desc, collective,
       count(*) AS calls,
       CAST(CASE WHEN count(msg_bytes) = count(*) THEN sum(msg_bytes) END AS BIGINT) AS msg_bytes,
       CAST(sum(dur_ns) AS BIGINT) AS dur_ns,
       CASE WHEN count(msg_bytes) = count(*) THEN CAST(sum(msg_bytes) AS DOUBLE) / nullif(sum(dur_ns), 0) END AS algbw_gbps,
       CASE WHEN count(msg_bytes * busbw_factor) = count(*) THEN sum(msg_bytes * busbw_factor) / nullif(CAST(sum(dur_ns) AS DOUBLE), 0) END AS busbw_gbps
FROM c
GROUP BY job, rank, run, chosen, process_group, collective
ORDER BY job, rank, run, iteration NULLS LAST, process_group, collective;
