-- name: kernel_type_breakdown
-- topic: distributed
-- description: Per rank and iteration, the GPU's busy time split by which
--   classes of kernel run at once (HTA's kernel-type breakdown): compute only,
--   communication only, memory only, and each overlap of them. Classes come
--   from kernel_class_rules (NCCL/RCCL kernels of every naming era and kernels
--   carrying collective metadata are communication; memcpy/memset memory; the
--   rest compute). The states are exclusive, so the rows of a rank and
--   iteration add up to its busy time (union of all GPU activity).
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
--   job VARCHAR: job (directory of rank traces, or --job)
--   rank INTEGER: rank (distributedInfo.rank or --rank; NULL for a trace of no job)
--   run VARCHAR: trace run of that rank
--   iteration INTEGER: iteration (NULL: the whole trace)
--   kernel_type VARCHAR: compute | communication | memory | compute+communication | compute+memory | communication+memory | compute+communication+memory
--   dur_ns BIGINT: time in exactly that state, ns
--   busy_pct DOUBLE: share of the rank's busy time (union of GPU activity), %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH t AS (
    SELECT s.job, s.rank, s.run, s.iteration, g.busy_ns, g.compute_only_ns, g.communication_only_ns, g.memory_only_ns,
           g.compute_communication_ns, g.compute_memory_ns, g.communication_memory_ns, g.all_three_ns
    FROM job_run_iterations s
    JOIN gpu_class_time g ON g.run = s.run AND g.iteration IS NOT DISTINCT FROM s.iteration
    WHERE ($job IS NULL OR s.job = $job) AND ($run IS NULL OR s.run = $run)
      AND ($iteration = 'all' OR ($iteration = 'steady' AND s.steady) OR CAST(s.iteration AS VARCHAR) = $iteration)
      -- on g too: a constant iteration reaches the kernels' scan through gpu_class_time
      AND (TRY_CAST($iteration AS INTEGER) IS NULL OR g.iteration = TRY_CAST($iteration AS INTEGER))
), types AS (
    SELECT * FROM (VALUES (1, 'compute'), (2, 'communication'), (3, 'memory'), (4, 'compute+communication'),
                          (5, 'compute+memory'), (6, 'communication+memory'), (7, 'compute+communication+memory'))
        AS v(ord, kernel_type)
), long AS (
    SELECT t.job, t.rank, t.run, t.iteration, v.ord, v.kernel_type, t.busy_ns,
           CASE v.ord WHEN 1 THEN t.compute_only_ns WHEN 2 THEN t.communication_only_ns
                      WHEN 3 THEN t.memory_only_ns WHEN 4 THEN t.compute_communication_ns
                      WHEN 5 THEN t.compute_memory_ns WHEN 6 THEN t.communication_memory_ns
                      ELSE t.all_three_ns END AS dur_ns
    FROM t CROSS JOIN types v
)
SELECT job, rank, run, iteration, kernel_type, dur_ns,
       round(100.0 * dur_ns / busy_ns, 2) AS busy_pct
FROM long
WHERE dur_ns > 0
ORDER BY job, rank, run, iteration NULLS LAST, ord;
