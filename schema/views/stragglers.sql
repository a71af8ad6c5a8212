-- includes: jobs

-- Stragglers: a rank whose lateness costs the job step time,
-- measured once per iteration against the job's own noise. Like jobs.sql,
-- these views join the ranks of a job: the lake holds no copy of them and Spark
-- defines them from this same SQL (lake.job_views). Documented in
-- docs/schema.md ("stragglers") and docs/method.md.
--
-- The model. Every collective call of a job has an arrival skew (its last
-- rank's kernel start - its first rank's: collective_calls). Skew summed over
-- the calls counts one wait many times: once a rank has waited at a call, its
-- later calls queue behind it on the same NCCL stream, and the skew there is
-- the late rank's work since, which the early rank had already done. And ranks
-- that run at the same period but out of phase (the host of one a few ms behind
-- the other's) meet with a skew at every call while neither makes the step any
-- longer. So, per iteration, the lateness of a rank is the skew of the call
-- that gates the step, the iteration's largest, counted once; the job's noise
-- is the spread of the skews of all its calls: their median (the skew the job
-- has at every call whoever is late: phase offset, launch jitter) and their
-- median absolute deviation (x 1.4826, the standard deviation were they normal).
-- The step time a late rank costs is its lateness beyond the median. A rank
-- is late in an iteration when that excess is above 3 noise deviations and at
-- least 2% of the step; it is the job's straggler when it is late in more than
-- half the job's iterations. Its cost is the median over the iterations of its
-- excess (0 where another rank gated the step), give or take the larger of the
-- noise deviation and half the spread of the per-iteration costs.
--
-- Pipeline send/recv is left out: a stage waits for the previous stage's
-- activations by design (the pipeline's bubble), which is no rank being late.
--
-- Limits: a job of one collective call per iteration has no within-step
-- baseline (the median skew is the late rank's own lateness): no straggler is
-- found there. A rank slowed by the same amount before every call (a throttled
-- GPU) moves the median with it: its cost shows in rank_summary's vs_median_pct
-- and in the per-call skew, not here.

-- Per job: the typical skew of its collective calls and their spread.
--
-- @column job              the job (job_runs.job)
-- @column calls            collective calls of the job joined across two or more ranks
-- @column typical_skew_ns  median skew of those calls, ns
-- @column noise_ns         1.4826 x the median absolute deviation of their skew from the
--                          median, ns
CREATE OR REPLACE VIEW job_skew_noise AS
WITH c AS (
    SELECT job, skew_ns FROM collective_calls
    WHERE ranks > 1 AND lower(collective) NOT LIKE '%send%' AND lower(collective) NOT LIKE '%recv%'
), m AS (
    SELECT job, count(*) AS calls, median(skew_ns) AS typical_skew_ns FROM c GROUP BY job
)
SELECT m.job, m.calls, m.typical_skew_ns, 1.4826 * median(abs(c.skew_ns - m.typical_skew_ns)) AS noise_ns
FROM m JOIN c ON c.job = m.job
GROUP BY m.job, m.calls, m.typical_skew_ns;

-- Per job and iteration: the call that gated the step (the largest skew), the
-- rank that arrived last at it, and what that lateness cost the step.
--
-- @column job                the job (job_runs.job)
-- @column iteration          iteration of the calls (collective_calls.iteration)
-- @column rank               the rank that arrived last at the gating call (the lowest on a tie)
-- @column calls              collective calls of the iteration joined across two or more ranks
-- @column calls_last         calls of the iteration that rank arrived last at
-- @column process_group      process group of the gating call
-- @column seq                sequence number of the gating call in its process group
-- @column collective         collective of the gating call
-- @column lateness_ns        the gating call's skew: how much later than the first rank the
--                            late rank arrived, ns
-- @column typical_skew_ns    the job's median call skew (job_skew_noise), ns
-- @column noise_ns           the job's skew deviation (job_skew_noise), ns
-- @column cost_ns            step time lost: lateness_ns - typical_skew_ns (0 when below), ns
-- @column step_ns            the iteration's duration on the slowest rank (job_iterations), ns
-- @column late               cost_ns > 3 x noise_ns and cost_ns >= 2% of step_ns
CREATE OR REPLACE VIEW straggler_iterations AS
WITH c AS (
    SELECT job, iteration, process_group, seq, collective, last_rank, skew_ns,
           count(*) OVER (PARTITION BY job, iteration) AS calls,
           row_number() OVER (PARTITION BY job, iteration ORDER BY skew_ns DESC, process_group, seq) AS pos
    FROM collective_calls
    WHERE ranks > 1 AND iteration IS NOT NULL AND lower(collective) NOT LIKE '%send%' AND lower(collective) NOT LIKE '%recv%'
), lastn AS (
    SELECT job, iteration, last_rank, count(*) AS calls_last FROM c GROUP BY job, iteration, last_rank
), g AS (
    SELECT c.job, c.iteration, c.last_rank AS rank, c.calls, l.calls_last, c.process_group, c.seq, c.collective,
           c.skew_ns AS lateness_ns, n.typical_skew_ns, n.noise_ns,
           CAST(round(greatest(c.skew_ns - n.typical_skew_ns, 0)) AS BIGINT) AS cost_ns, i.dur_ns AS step_ns
    FROM c JOIN job_skew_noise n ON n.job = c.job
    JOIN lastn l ON l.job = c.job AND l.iteration = c.iteration AND l.last_rank = c.last_rank
    JOIN job_iterations i ON i.job = c.job AND i.iteration = c.iteration
    WHERE c.pos = 1
)
SELECT *, cost_ns > 3 * noise_ns AND cost_ns >= 0.02 * step_ns AS late
FROM g;

-- Per job: its straggler, if any, and the step time it costs. The candidate
-- is the rank late in the most iterations (the lowest rank on a tie; without
-- one, the rank that gated the most); it is the straggler when late in more
-- than half the job's iterations and its cost is at least 2% of the median
-- step.
--
-- @column job              the job (job_runs.job)
-- @column rank             the candidate rank
-- @column straggler        the candidate is late in more than half the iterations, for at
--                          least 2% of the median step: the job's straggler
-- @column iterations       iterations of the job with joined collective calls
-- @column late_iterations  iterations in which the candidate was late (straggler_iterations.late)
-- @column lateness_ns      median over the iterations of its lateness at the gating call (0
--                          where another rank gated), ns
-- @column cost_ns          median over the iterations of its cost (0 where another rank
--                          gated): the step time the job loses to it, ns
-- @column cost_err_ns      uncertainty of cost_ns: the larger of the job's skew deviation and
--                          half the range of the per-iteration costs, ns
-- @column typical_skew_ns  the job's median call skew, ns
-- @column noise_ns         the job's skew deviation, ns
-- @column step_ns          median step (job_iterations.dur_ns) over the iterations, ns
-- @column cost_pct         cost_ns / step_ns, %
CREATE OR REPLACE VIEW job_stragglers AS
WITH n AS (
    SELECT job, count(*) AS iterations, median(step_ns) AS step_ns,
           min(typical_skew_ns) AS typical_skew_ns, min(noise_ns) AS noise_ns
    FROM straggler_iterations GROUP BY job
), cand AS (
    SELECT job, rank, sum(CASE WHEN late THEN 1 ELSE 0 END) AS late_iterations, count(*) AS gated,
           row_number() OVER (PARTITION BY job ORDER BY sum(CASE WHEN late THEN 1 ELSE 0 END) DESC,
                              count(*) DESC, rank) AS pos
    FROM straggler_iterations GROUP BY job, rank
), per AS (
    SELECT s.job, s.iteration,
           CASE WHEN s.rank = c.rank THEN s.cost_ns ELSE 0 END AS cost_ns,
           CASE WHEN s.rank = c.rank THEN s.lateness_ns ELSE 0 END AS lateness_ns
    FROM straggler_iterations s JOIN cand c ON c.job = s.job AND c.pos = 1
), agg AS (
    SELECT job, median(cost_ns) AS cost_ns, median(lateness_ns) AS lateness_ns,
           (max(cost_ns) - min(cost_ns)) / 2.0 AS half_range_ns
    FROM per GROUP BY job
)
SELECT n.job, c.rank,
       2 * c.late_iterations > n.iterations AND a.cost_ns >= 0.02 * n.step_ns AS straggler,
       n.iterations, c.late_iterations,
       CAST(round(a.lateness_ns) AS BIGINT) AS lateness_ns, CAST(round(a.cost_ns) AS BIGINT) AS cost_ns,
       CAST(round(greatest(n.noise_ns, a.half_range_ns)) AS BIGINT) AS cost_err_ns,
       n.typical_skew_ns, n.noise_ns, CAST(round(n.step_ns) AS BIGINT) AS step_ns,
       round(100.0 * a.cost_ns / nullif(n.step_ns, 0), 2) AS cost_pct
FROM n JOIN cand c ON c.job = n.job AND c.pos = 1 JOIN agg a ON a.job = n.job;

-- Per trace run and iteration of a job with a straggler, on every other rank:
-- how long it waited for the straggler at the call that gated the step (the
-- straggler's kernel start - its own). The waiting rank's exposed communication
-- and synchronizations are this wait (findings low_comm_overlap, sync_in_step
-- name it).
--
-- @column run          trace run of the waiting rank
-- @column job          the job
-- @column rank         the waiting rank
-- @column iteration    the iteration
-- @column waited_for   the straggler's rank
-- @column wait_ns      the straggler's kernel start - this rank's at the gating call, ns
CREATE OR REPLACE VIEW straggler_waits AS
SELECT j.run, j.job, j.rank, s.iteration, s.rank AS waited_for, theirs.ts_ns - mine.ts_ns AS wait_ns
FROM job_stragglers g
JOIN straggler_iterations s ON s.job = g.job AND s.rank = g.rank AND s.late
JOIN job_runs j ON j.job = g.job AND j.rank <> g.rank
JOIN collectives mine ON mine.run = j.run AND mine.process_group = s.process_group AND mine.seq = s.seq
JOIN job_runs jl ON jl.job = g.job AND jl.rank = g.rank
JOIN collectives theirs ON theirs.run = jl.run AND theirs.process_group = s.process_group AND theirs.seq = s.seq
WHERE g.straggler;
