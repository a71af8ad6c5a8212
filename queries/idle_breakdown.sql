-- name: idle_breakdown
-- description: Idle gaps between consecutive kernels of each stream in an
--   iteration, by cause: waiting_on_host (the next kernel's launch call started
--   after the previous kernel ended: the GPU waited for the CPU), short_gap
--   (launched in time, gap at most short_gap_ns: kernel-to-kernel overhead),
--   or other (launched in time, longer gap: dependencies, synchronization).
--   Totals and shares per cause, or every gap with by=gap.
-- steady: run
-- parameters:
--   run VARCHAR = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (the steady one when absent)
--   short_gap_ns BIGINT = 10000: largest gap counted as a short kernel-to-kernel gap, ns
--   by VARCHAR = 'cause': one of cause | gap: totals per cause, or one row per gap
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   stream BIGINT: stream
--   cause VARCHAR: waiting_on_host | short_gap | other
--   kernel_id BIGINT: by=gap: the kernel after the gap
--   gaps BIGINT: gaps in the row
--   idle_ns BIGINT: summed gap time, ns
--   share_pct DOUBLE: share of the stream's idle time in the iteration, %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH it AS (
    SELECT run, iteration FROM iteration_utilization
    WHERE ($run IS NULL OR run = $run) AND (iteration = $iteration OR ($iteration IS NULL AND steady))
), k AS (
    SELECT k.run, k.iteration, k.stream, k.kernel_id, k.ts_ns, k.ts_ns + k.dur_ns AS end_ns, k.launch_ts_ns,
           max(k.ts_ns + k.dur_ns) OVER (PARTITION BY k.run, k.iteration, k.stream ORDER BY k.ts_ns, k.kernel_id
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM kernels k JOIN it USING (run, iteration) WHERE k.kind = 'kernel' AND k.ts_ns IS NOT NULL
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
ORDER BY run, iteration, stream, cause, kernel_id;
