-- name: launch_queue
-- description: The CUDA launch queue of each stream: kernels launched (launch
--   call ended) but not yet started, over an iteration. Time-weighted mean,
--   95th percentile and max of its length, the share of time it is empty, and
--   the share of time it is empty while the GPU (all streams) is idle: the host
--   is not keeping the GPU fed. series=true gives the step series instead.
-- steady: run
-- parameters:
--   run VARCHAR = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (the steady one when absent)
--   series BOOLEAN = false: the step series (one row per change) instead of the summary
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   stream BIGINT: CUDA stream
--   ts_ns BIGINT: series: time of the change, ns
--   queued BIGINT: series: kernels waiting from ts_ns on
--   mean_queued DOUBLE: time-weighted mean length
--   p95_queued BIGINT: time-weighted 95th percentile of the length
--   max_queued BIGINT: largest length
--   empty_pct DOUBLE: share of the iteration with the queue empty, %
--   empty_gpu_idle_pct DOUBLE: share of the iteration with the queue empty and no kernel running on any stream, %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH it AS (
    SELECT run, iteration, start_ns, end_ns FROM iteration_utilization JOIN iterations USING (run, iteration)
    WHERE ($run IS NULL OR run = $run) AND (iteration = $iteration OR ($iteration IS NULL AND steady))
), k AS (
    SELECT k.run, k.iteration, k.stream, least(k.launch_end_ns, k.ts_ns) AS q_in, k.ts_ns AS q_out
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.kind = 'kernel' AND k.launch_end_ns IS NOT NULL
), ch AS (
    SELECT run, iteration, stream, t, sum(d) AS d FROM (
        SELECT run, iteration, stream, q_in AS t, 1 AS d FROM k UNION ALL
        SELECT run, iteration, stream, q_out, -1 FROM k UNION ALL
        SELECT it.run, it.iteration, s.stream, it.start_ns, 0 FROM it JOIN (SELECT DISTINCT run, iteration, stream FROM k) s USING (run, iteration) UNION ALL
        SELECT it.run, it.iteration, s.stream, it.end_ns, 0 FROM it JOIN (SELECT DISTINCT run, iteration, stream FROM k) s USING (run, iteration))
    GROUP BY ALL
), st AS (
    SELECT run, iteration, stream, t AS ts_ns,
           CAST(sum(d) OVER (PARTITION BY run, iteration, stream ORDER BY t ROWS UNBOUNDED PRECEDING) AS BIGINT) AS queued,
           lead(t) OVER (PARTITION BY run, iteration, stream ORDER BY t) AS next_t
    FROM ch
), seg AS (       -- each constant stretch, cut where GPU busy intervals start or end
    SELECT st.*, it.start_ns, it.end_ns FROM st JOIN it USING (run, iteration)
    WHERE next_t IS NOT NULL AND ts_ns >= it.start_ns AND next_t <= it.end_ns
), idle AS (     -- queue-empty stretches minus their overlap with GPU busy intervals
    SELECT run, iteration, stream, sum(len - busy) AS idle_ns FROM (
        SELECT s.run, s.iteration, s.stream, s.ts_ns, any_value(s.next_t - s.ts_ns) AS len,
               coalesce(sum(least(s.next_t, b.end_ns) - greatest(s.ts_ns, b.start_ns))
                        FILTER (b.start_ns IS NOT NULL), 0) AS busy   -- least/greatest skip NULLs
        FROM seg s LEFT JOIN kernel_busy_intervals b
          ON b.run = s.run AND b.iteration = s.iteration AND b.start_ns < s.next_t AND b.end_ns > s.ts_ns
         AND ($iteration IS NULL OR b.iteration = $iteration)   -- a constant reaches the kernels' scan
        WHERE s.queued = 0
        GROUP BY s.run, s.iteration, s.stream, s.ts_ns)
    GROUP BY ALL
), summary AS (
    SELECT s.run, s.iteration, s.stream,
           sum(s.queued * (s.next_t - s.ts_ns)) / (any_value(s.end_ns) - any_value(s.start_ns)) AS mean_queued,
           max(s.queued) AS max_queued,
           100.0 * sum(s.next_t - s.ts_ns) FILTER (s.queued = 0) / (any_value(s.end_ns) - any_value(s.start_ns)) AS empty_pct,
           any_value(s.end_ns) - any_value(s.start_ns) AS span
    FROM seg s GROUP BY ALL
), p95 AS (      -- time-weighted: the smallest length at or above which 5% of the time is spent
    SELECT run, iteration, stream, min(queued) AS p95_queued FROM (
        SELECT run, iteration, stream, queued,
               sum(next_t - ts_ns) OVER (PARTITION BY run, iteration, stream ORDER BY queued
                                         RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
                 / sum(next_t - ts_ns) OVER (PARTITION BY run, iteration, stream) AS cum
        FROM seg) WHERE cum >= 0.95 GROUP BY ALL
)
SELECT run, iteration, stream, ts_ns, queued, NULL AS mean_queued, NULL AS p95_queued, NULL AS max_queued,
       NULL AS empty_pct, NULL AS empty_gpu_idle_pct
FROM st WHERE $series AND next_t IS NOT NULL
UNION ALL
SELECT s.run, s.iteration, s.stream, NULL, NULL, round(s.mean_queued, 3), p.p95_queued, s.max_queued,
       round(s.empty_pct, 2), round(100.0 * coalesce(i.idle_ns, 0) / s.span, 2)
FROM summary s JOIN p95 p USING (run, iteration, stream) LEFT JOIN idle i USING (run, iteration, stream)
WHERE NOT $series
ORDER BY run, iteration, stream, ts_ns;
