-- name: straggler_ranks
-- topic: distributed
-- description: Per iteration of a job, the rank the others wait for: over the
--   collective calls of the iteration (joined across ranks as in
--   collective_skew), the rank the others waited for longest: the summed
--   arrival skew of the calls it arrived last in, and how many those were.
--   With iteration=all, also one row over every call (iteration NULL).
-- steady: job
-- iteration_all: sql
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   process_group VARCHAR = NULL: only the calls of this process group (all when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration (chosen once from all ranks), every iteration plus every call (iteration NULL), or iteration N
-- columns:
--   job VARCHAR: job
--   iteration INTEGER: iteration (NULL: every call of the trace)
--   rank INTEGER: the straggler: the rank the others waited for longest (summed skew of the calls it arrived last in)
--   calls BIGINT: collective calls joined across ranks
--   calls_last BIGINT: calls in which that rank arrived last
--   wait_caused_ns BIGINT: summed skew of the calls it arrived last in: how long the first rank waited for it, ns
--   total_skew_ns BIGINT: summed skew of all the calls, ns
--   wait_share_pct DOUBLE: wait_caused_ns / total_skew_ns, %
--   step_ns BIGINT: the iteration's duration on the slowest rank, ns (NULL: whole trace)
-- requires:
--   collectives: communication kernels (NCCL/RCCL) in a trace
-- engines: duckdb, spark
WITH calls AS (
    SELECT c.job, c.iteration, c.last_rank, c.skew_ns, i.dur_ns AS step_ns
    FROM collective_calls c
    JOIN job_iterations i ON i.job = c.job AND i.iteration = c.iteration
    WHERE c.ranks > 1 AND ($job IS NULL OR c.job = $job) AND ($process_group IS NULL OR c.process_group = $process_group)
      AND ($iteration = 'all' OR ($iteration = 'steady' AND i.steady) OR CAST(c.iteration AS VARCHAR) = $iteration)
    UNION ALL
    SELECT job, CAST(NULL AS INTEGER), last_rank, skew_ns, CAST(NULL AS BIGINT)
    FROM collective_calls
    WHERE $iteration = 'all' AND ranks > 1 AND ($job IS NULL OR job = $job)
      AND ($process_group IS NULL OR process_group = $process_group)
), per_rank AS (
    SELECT job, iteration, last_rank AS rank, count(*) AS calls_last, sum(skew_ns) AS wait_caused_ns
    FROM calls GROUP BY job, iteration, last_rank
), totals AS (
    SELECT job, iteration, count(*) AS calls, sum(skew_ns) AS total_skew_ns, max(step_ns) AS step_ns
    FROM calls GROUP BY job, iteration
), ranked AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.job, p.iteration
                                   ORDER BY p.wait_caused_ns DESC, p.calls_last DESC, p.rank) AS pos
    FROM per_rank p
)
SELECT r.job, r.iteration, r.rank, t.calls, r.calls_last, CAST(r.wait_caused_ns AS BIGINT) AS wait_caused_ns,
       CAST(t.total_skew_ns AS BIGINT) AS total_skew_ns,
       round(100.0 * r.wait_caused_ns / nullif(t.total_skew_ns, 0), 2) AS wait_share_pct, t.step_ns
FROM ranked r JOIN totals t ON t.job = r.job AND t.iteration IS NOT DISTINCT FROM r.iteration
WHERE r.pos = 1
ORDER BY r.job, r.iteration NULLS LAST;
