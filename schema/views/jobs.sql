-- includes: distributed

-- Jobs: the ranks of a distributed job read together. These views join runs
-- (ranks) of one job, so the lake does not materialize them per run: Spark
-- defines them over the lake's datasets from this same SQL (engines.py,
-- JOB_VIEWS in lake.py). Documented in docs/schema.md ("jobs").

-- Every trace run with its job and rank. A trace loaded without a job is a
-- job of its own (named after its run).
--
-- @column job         the job (runs.job; else the run's own name)
-- @column run         trace run
-- @column rank        the run's rank (runs.rank)
-- @column world_size  number of ranks of the distributed run (runs.world_size)
CREATE OR REPLACE VIEW job_runs AS
SELECT coalesce(job, run) AS job, run, rank, world_size
FROM runs WHERE kind = 'trace';

-- The iterations of each job, chosen once from all its ranks: an iteration
-- counts when every rank of the job has it; its duration is the slowest
-- rank's. steady marks the job's steady iteration: the first whose duration
-- is within 5% of the median of the iterations after it (the last one when
-- none is), the rule of iteration_steadiness applied to the job.
--
-- @column job              the job (job_runs.job)
-- @column iteration        iteration number that every rank of the job has
-- @column ranks            number of ranks with the iteration (every rank of the job)
-- @column dur_ns           the slowest rank's duration of the iteration, ns
-- @column min_dur_ns       the fastest rank's duration of the iteration, ns
-- @column median_after_ns  median dur_ns of the job's later iterations (by number), ns (the
--                          last iteration: its own dur_ns)
-- @column steady           true for the job's steady iteration, false for the others
CREATE OR REPLACE VIEW job_iterations AS
WITH n AS (
    SELECT job, count(*) AS ranks FROM job_runs GROUP BY job
), it AS (
    SELECT j.job, i.iteration, count(*) AS ranks, max(i.dur_ns) AS dur_ns, min(i.dur_ns) AS min_dur_ns
    FROM iterations i JOIN job_runs j ON j.run = i.run
    GROUP BY j.job, i.iteration
), complete AS (
    SELECT it.* FROM it JOIN n ON n.job = it.job AND n.ranks = it.ranks
), later AS (
    SELECT a.job, a.iteration, a.ranks, a.dur_ns, a.min_dur_ns,
           coalesce(median(b.dur_ns), a.dur_ns) AS median_after_ns
    FROM complete a LEFT JOIN complete b ON b.job = a.job AND b.iteration > a.iteration
    GROUP BY a.job, a.iteration, a.ranks, a.dur_ns, a.min_dur_ns
), flagged AS (
    SELECT *, CASE WHEN abs(dur_ns - median_after_ns) <= 0.05 * median_after_ns THEN iteration END AS stable_iteration
    FROM later
)
SELECT job, iteration, ranks, dur_ns, min_dur_ns, median_after_ns,
       iteration = min(stable_iteration) OVER (PARTITION BY job) AS steady
FROM flagged;

-- One row per trace run and iteration of its job, plus one row per run with
-- iteration NULL (the whole trace): what the per-iteration reports choose
-- from. A report's `iteration` parameter (steady | all | N) keeps
--   steady: the job's steady iteration; N: iteration N; all: every row.
--
-- @column iteration  an iteration of the job (job_iterations); NULL: the whole trace
-- @column steady     true for the job's steady iteration; false for the others and on the
--                    whole-trace rows
-- @columns_from job_runs
CREATE OR REPLACE VIEW job_run_iterations AS
SELECT j.job, j.run, j.rank, j.world_size, i.iteration, coalesce(i.steady, false) AS steady
FROM job_runs j JOIN job_iterations i ON i.job = j.job
UNION ALL
SELECT job, run, rank, world_size, CAST(NULL AS INTEGER), false FROM job_runs;

-- Each collective call joined across the ranks of its process group: the
-- calls of one (job, process_group, seq). skew_ns: last rank's kernel start
-- minus the first's (arrival skew); last_rank: the rank that started last
-- (the one the others waited for; the lowest such rank on a tie);
-- end_skew_ns: the same for kernel ends. The transfer time is the fastest
-- rank's kernel (min_dur_ns; the others' kernels include their wait), so
-- algbw = msg_bytes / min_dur_ns and busbw = algbw x busbw_factor
-- (nccl-tests; bytes per ns = GB/s).
--
-- @column job              the job (job_runs.job)
-- @column process_group    process group name (collectives.process_group)
-- @column pg_desc          process group description (collectives.pg_desc; min over ranks)
-- @column pg_ranks         ranks of the process group as written (collectives.pg_ranks; min
--                          over ranks)
-- @column seq              sequence number of the call within the process group (collectives.seq)
-- @column collective       collective name (collectives.collective; min over ranks when
--                          they differ)
-- @column iteration        iteration of the launch (min over ranks)
-- @column ranks            number of ranks with the call
-- @column group_size       process group size (collectives.group_size; max over ranks)
-- @column same_collective  every rank names the same collective
-- @column msg_bytes        message size S of nccl-tests, bytes (max over ranks)
-- @column first_start_ns   the earliest kernel start over the ranks, ns
-- @column skew_ns          arrival skew: the latest kernel start over the ranks - the earliest, ns
-- @column last_rank        the rank whose kernel started last (the lowest on a tie)
-- @column end_skew_ns      the latest kernel end over the ranks - the earliest, ns
-- @column min_dur_ns       the fastest rank's kernel duration (the transfer time), ns
-- @column max_dur_ns       the slowest rank's kernel duration, ns
-- @column algbw_gbps       algorithm bandwidth: msg_bytes / min_dur_ns, GB/s
-- @column busbw_gbps       bus bandwidth: algbw_gbps x busbw_factor, GB/s
-- @column busbw_factor     busbw / algbw of the collective on group_size ranks (nccl-tests;
--                          max over ranks)
CREATE OR REPLACE VIEW collective_calls AS
WITH c AS (
    SELECT j.job, j.rank, c.process_group, c.seq, c.collective, c.pg_desc, c.pg_ranks, c.iteration, c.group_size,
           c.msg_bytes, c.busbw_factor, c.ts_ns, c.dur_ns
    FROM collectives c JOIN job_runs j ON j.run = c.run
    WHERE c.seq IS NOT NULL
), g AS (
    SELECT job, process_group, seq,
           min(collective) AS collective, min(pg_desc) AS pg_desc, min(pg_ranks) AS pg_ranks,
           min(iteration) AS iteration, count(*) AS ranks, max(group_size) AS group_size,
           max(msg_bytes) AS msg_bytes, max(busbw_factor) AS busbw_factor,
           min(ts_ns) AS first_start_ns, max(ts_ns) AS last_start_ns,
           min(ts_ns + dur_ns) AS first_end_ns, max(ts_ns + dur_ns) AS last_end_ns,
           min(dur_ns) AS min_dur_ns, max(dur_ns) AS max_dur_ns,
           count(DISTINCT collective) AS collectives
    FROM c GROUP BY job, process_group, seq
), last AS (
    SELECT c.job, c.process_group, c.seq, min(c.rank) AS last_rank
    FROM c JOIN g ON g.job = c.job AND g.process_group = c.process_group AND g.seq = c.seq AND c.ts_ns = g.last_start_ns
    GROUP BY c.job, c.process_group, c.seq
)
SELECT g.job, g.process_group, g.pg_desc, g.pg_ranks, g.seq, g.collective, g.iteration, g.ranks, g.group_size,
       g.collectives = 1 AS same_collective,
       g.msg_bytes, g.first_start_ns, g.last_start_ns - g.first_start_ns AS skew_ns, l.last_rank,
       g.last_end_ns - g.first_end_ns AS end_skew_ns, g.min_dur_ns, g.max_dur_ns,
       CAST(g.msg_bytes AS DOUBLE) / nullif(g.min_dur_ns, 0) AS algbw_gbps,
       g.busbw_factor * g.msg_bytes / nullif(g.min_dur_ns, 0) AS busbw_gbps,
       g.busbw_factor
FROM g JOIN last l ON l.job = g.job AND l.process_group = g.process_group AND l.seq = g.seq;
