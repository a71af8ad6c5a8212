-- name: collective_skew
-- topic: distributed
-- description: Each collective call joined across the ranks of its process
--   group (same job, process group and sequence number): arrival skew (the
--   last rank's kernel start minus the first's), which rank arrived last, the
--   same for kernel ends, and the bandwidth of the transfer (nccl-tests'
--   formulas over the fastest rank's kernel time, which holds no waiting).
--   With iteration=all, one extra row per job, process group and collective
--   (seq and iteration NULL) sums every call: total skew, the rank most often
--   last, bandwidth over the summed times.
-- steady: job
-- iteration_all: sql, whole run
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   process_group VARCHAR = NULL: process group name (all when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration (chosen once from all ranks), every call plus a whole-trace row per collective (also of a run without iterations), or iteration N
-- columns:
--   job VARCHAR: job
--   process_group VARCHAR: process group name
--   pg_desc VARCHAR: its description
--   collective VARCHAR: collective name
--   seq BIGINT: sequence number of the call in its process group (NULL: whole-trace row)
--   iteration INTEGER: iteration of the call (NULL: whole-trace row)
--   calls BIGINT: calls summed in the row (1 for a call)
--   ranks BIGINT: ranks that hold the call (= group_size when every rank was traced)
--   group_size INTEGER: ranks in the process group
--   msg_bytes BIGINT: message size S, bytes
--   skew_ns BIGINT: last rank's kernel start - first rank's, ns
--   last_rank INTEGER: the rank that started last (whole-trace row: most often last)
--   end_skew_ns BIGINT: last rank's kernel end - first rank's, ns
--   min_dur_ns BIGINT: fastest rank's kernel time, ns
--   max_dur_ns BIGINT: slowest rank's kernel time, ns
--   algbw_gbps DOUBLE: msg_bytes / min_dur_ns, GB/s
--   busbw_gbps DOUBLE: algbw x the busbw factor, GB/s
-- requires:
--   collectives: communication kernels (NCCL/RCCL) in a trace
-- engines: duckdb, spark
WITH chosen AS (
    SELECT c.* FROM collective_calls c
    LEFT JOIN job_iterations i ON i.job = c.job AND i.iteration = c.iteration
    WHERE ($job IS NULL OR c.job = $job) AND ($process_group IS NULL OR c.process_group = $process_group)
      AND ($iteration = 'all' OR ($iteration = 'steady' AND coalesce(i.steady, false))
           OR CAST(c.iteration AS VARCHAR) = $iteration)
), every AS (
    SELECT * FROM collective_calls
    WHERE $iteration = 'all' AND ($job IS NULL OR job = $job) AND ($process_group IS NULL OR process_group = $process_group)
), last_counts AS (
    SELECT job, process_group, collective, last_rank, count(*) AS n FROM every
    GROUP BY job, process_group, collective, last_rank
), most_last AS (
    SELECT job, process_group, collective, min(last_rank) AS last_rank
    FROM (SELECT *, max(n) OVER (PARTITION BY job, process_group, collective) AS top FROM last_counts) x
    WHERE n = top GROUP BY job, process_group, collective
), whole AS (
    SELECT e.job, e.process_group, min(e.pg_desc) AS pg_desc, e.collective, CAST(NULL AS BIGINT) AS seq,
           CAST(NULL AS INTEGER) AS iteration, count(*) AS calls, max(e.ranks) AS ranks, max(e.group_size) AS group_size,
           CAST(CASE WHEN count(e.msg_bytes) = count(*) THEN sum(e.msg_bytes) END AS BIGINT) AS msg_bytes,
           CAST(sum(e.skew_ns) AS BIGINT) AS skew_ns, min(m.last_rank) AS last_rank, CAST(sum(e.end_skew_ns) AS BIGINT) AS end_skew_ns,
           CAST(sum(e.min_dur_ns) AS BIGINT) AS min_dur_ns, CAST(sum(e.max_dur_ns) AS BIGINT) AS max_dur_ns,
           CASE WHEN count(e.msg_bytes) = count(*) THEN CAST(sum(e.msg_bytes) AS DOUBLE) / nullif(sum(e.min_dur_ns), 0) END AS algbw_gbps,
           CASE WHEN count(e.msg_bytes * e.busbw_factor) = count(*)
                THEN sum(e.msg_bytes * e.busbw_factor) / nullif(CAST(sum(e.min_dur_ns) AS DOUBLE), 0) END AS busbw_gbps
    FROM every e JOIN most_last m ON m.job = e.job AND m.process_group = e.process_group AND m.collective = e.collective
    GROUP BY e.job, e.process_group, e.collective
)
SELECT job, process_group, pg_desc, collective, seq, iteration, calls, ranks, group_size, msg_bytes,
       skew_ns, last_rank, end_skew_ns, min_dur_ns, max_dur_ns, algbw_gbps, busbw_gbps
FROM (
    SELECT job, process_group, pg_desc, collective, seq, iteration, CAST(1 AS BIGINT) AS calls, ranks, group_size,
           msg_bytes, skew_ns, last_rank, end_skew_ns, min_dur_ns, max_dur_ns, algbw_gbps, busbw_gbps
    FROM chosen
    UNION ALL
    SELECT * FROM whole
) r
ORDER BY job, process_group, seq NULLS LAST, collective;
