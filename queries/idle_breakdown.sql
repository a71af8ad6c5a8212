-- name: idle_breakdown
-- topic: single GPU
-- description: Idle gaps between consecutive kernels of each stream in an
--   iteration, by cause: waiting_on_host (the next kernel's launch call started
--   after the previous kernel ended: the GPU waited for the CPU), short_gap
--   (launched in time, gap at most short_gap_ns: kernel-to-kernel overhead),
--   or other (launched in time, longer gap: dependencies, synchronization).
--   Totals and shares per cause, or every gap with by=gap.
--   With iteration=all by cause a trace run's rows are read from idle_totals where an
--   ingest with --op-totals stored them (this SQL over the run, once, with the default
--   short_gap_ns); other runs, and other short_gap_ns, are swept.
-- steady: run
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: the gaps between every kernel of each stream, steps or not, also in a run without iterations); the steady one when absent
--   short_gap_ns BIGINT = 10000: largest gap counted as a short kernel-to-kernel gap, ns
--   by VARCHAR = 'cause': one of cause | gap: totals per cause, or one row per gap
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   stream BIGINT: stream
--   cause VARCHAR: waiting_on_host | short_gap | other
--   kernel_id BIGINT: by=gap: the kernel after the gap
--   gaps BIGINT: gaps in the row
--   idle_ns BIGINT: summed gap time, ns
--   share_pct DOUBLE: share of the stream's idle time in the iteration, %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH stored AS (   -- iteration=all by cause of a run stored by an ingest with --op-totals (idle_totals:
                    -- this SQL over the run, at ingest) with this short_gap_ns: read, not swept
    SELECT DISTINCT run FROM idle_totals WHERE $iteration = 'all' AND $by = 'cause' AND short_gap_ns = $short_gap_ns
), walked AS (      -- the runs swept (the ingest's run too, before its runs row): joined first, so that
                    -- DuckDB skips the kernels' scans when there is none
    SELECT run FROM (SELECT run FROM runs WHERE kind = 'trace' AND ($run IS NULL OR run = $run)
                     UNION SELECT CAST($run AS VARCHAR) WHERE $run IS NOT NULL)
    WHERE run NOT IN (SELECT run FROM stored)
), it AS (
    SELECT run, iteration FROM iteration_gpu_time
    WHERE ($run IS NULL OR run = $run) AND run IN (SELECT run FROM walked)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), ka AS (
    SELECT k.run, k.iteration, k.stream, k.kernel_id, k.ts_ns, k.dur_ns, k.launch_ts_ns
    FROM it JOIN kernels k USING (run, iteration) WHERE k.kind = 'kernel' AND k.ts_ns IS NOT NULL
    UNION ALL       -- iteration=all: the whole trace (iteration NULL), inside an iteration or not
    SELECT run, CAST(NULL AS INTEGER), stream, kernel_id, ts_ns, dur_ns, launch_ts_ns
    FROM walked JOIN kernels USING (run)  -- every trace run, iterations or none (a start: not an ncu run)
    WHERE kind = 'kernel' AND ts_ns IS NOT NULL AND $iteration = 'all'
), k AS (
    SELECT run, iteration, stream, kernel_id, ts_ns, ts_ns + dur_ns AS end_ns, launch_ts_ns,
           max(ts_ns + dur_ns) OVER (PARTITION BY run, iteration, stream ORDER BY ts_ns, kernel_id
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM ka
), g AS (
    SELECT run, iteration, stream, kernel_id, ts_ns - prev_end AS gap,
           CASE WHEN launch_ts_ns > prev_end THEN 'waiting_on_host'
                WHEN ts_ns - prev_end <= $short_gap_ns THEN 'short_gap' ELSE 'other' END AS cause
    FROM k WHERE ts_ns > prev_end
)
SELECT run, iteration, stream, cause, kernel_id, 1 AS gaps, gap AS idle_ns,
       round(100.0 * gap / sum(gap) OVER (PARTITION BY run, iteration, stream), 3) AS share_pct
FROM g WHERE $by = 'gap'
UNION ALL
SELECT run, iteration, stream, cause, NULL, count(*), CAST(sum(gap) AS BIGINT),
       round(100.0 * sum(gap) / sum(sum(gap)) OVER (PARTITION BY run, iteration, stream), 2)
FROM g WHERE $by = 'cause' GROUP BY run, iteration, stream, cause
UNION ALL
SELECT run, iteration, stream, cause, NULL, gaps, idle_ns, share_pct
FROM idle_totals
WHERE run IN (SELECT run FROM stored) AND ($run IS NULL OR run = $run) AND cause IS NOT NULL
  AND short_gap_ns = $short_gap_ns
ORDER BY run, iteration NULLS LAST, stream, cause, kernel_id;
