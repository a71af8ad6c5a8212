-- name: straggler_ranks
-- topic: distributed
-- description: Per iteration of a job, the rank that arrived last at the
--   collective that gated the step (the iteration's largest arrival skew,
--   counted once, not summed over the calls) and the step time that lateness
--   cost: its skew beyond the job's typical skew (the median over all its
--   calls), judged against the job's noise (their median absolute deviation).
--   With iteration=all, also one row for the whole job (iteration NULL): its
--   straggler, if any, and the median cost with its uncertainty. The model and
--   its limits: views straggler_iterations and job_stragglers (docs/schema.md).
-- steady: job
-- iteration_all: sql
-- parameters:
--   job VARCHAR = NULL: job to report on (all when absent)
--   iteration VARCHAR = steady: one of steady | all | N: the job's steady iteration (chosen once from all ranks), every iteration plus the job's row (iteration NULL), or iteration N
-- columns:
--   job VARCHAR: job
--   iteration INTEGER: iteration (NULL: the whole job)
--   rank INTEGER: the rank that arrived last at the gating call (the whole job: the rank late in the most iterations)
--   straggler BOOLEAN: that rank is the job's straggler (late in more than half the iterations, for at least 2% of the step) and, on an iteration's row, late in it
--   calls BIGINT: collective calls joined across ranks (the whole job: iterations)
--   calls_last BIGINT: calls that rank arrived last at (the whole job: iterations it was late in)
--   gating_process_group VARCHAR: process group of the gating call (NULL on the job's row)
--   gating_collective VARCHAR: collective of the gating call (NULL on the job's row)
--   lateness_ns BIGINT: skew of the gating call: how much later than the first rank it arrived, ns (the job: median over iterations)
--   typical_skew_ns DOUBLE: the job's median call skew, ns
--   noise_ns DOUBLE: the job's skew deviation (1.4826 x median absolute deviation), ns
--   cost_ns BIGINT: step time lost to the late rank: lateness_ns - typical_skew_ns, ns (the job: median over iterations)
--   cost_err_ns BIGINT: uncertainty of cost_ns: the job's skew deviation (the job: or half the range of the per-iteration costs, the larger), ns
--   cost_pct DOUBLE: cost_ns / step_ns, %
--   step_ns BIGINT: the iteration's duration on the slowest rank (the job: median over iterations), ns
-- requires:
--   collectives: communication kernels (NCCL/RCCL) in a trace
-- engines: duckdb, spark
SELECT s.job, s.iteration, s.rank, s.late AND g.straggler AND g.rank = s.rank AS straggler, s.calls, s.calls_last,
       s.process_group AS gating_process_group, s.collective AS gating_collective, s.lateness_ns,
       s.typical_skew_ns, s.noise_ns, s.cost_ns, CAST(round(s.noise_ns) AS BIGINT) AS cost_err_ns,
       round(100.0 * s.cost_ns / nullif(s.step_ns, 0), 2) AS cost_pct, s.step_ns
FROM straggler_iterations s
JOIN job_iterations i ON i.job = s.job AND i.iteration = s.iteration
JOIN job_stragglers g ON g.job = s.job
WHERE ($job IS NULL OR s.job = $job)
  AND ($iteration = 'all' OR ($iteration = 'steady' AND i.steady) OR CAST(s.iteration AS VARCHAR) = $iteration)
UNION ALL
SELECT job, CAST(NULL AS INTEGER), rank, straggler, CAST(iterations AS BIGINT), CAST(late_iterations AS BIGINT),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), lateness_ns, typical_skew_ns, noise_ns, cost_ns, cost_err_ns,
       cost_pct, step_ns
FROM job_stragglers
WHERE $iteration = 'all' AND ($job IS NULL OR job = $job)
ORDER BY job, iteration NULLS LAST;
