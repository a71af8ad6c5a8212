-- name: launch_queue
-- topic: single GPU
-- description: The CUDA launch queue of each stream: kernels launched (launch
--   call ended) but not yet started, over an iteration (or the whole trace). Time-weighted mean,
--   95th percentile and max of its length, the share of time it is empty, and
--   the share of time it is empty while the GPU (all streams) is idle: the host
--   is not keeping the GPU fed. series=true gives the step series instead.
-- steady: run
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: the window from the first iteration's start to the last one's end, or in a run without iterations from its first kernel queued to its last kernel's end, with every kernel of the run, in a step or not, and the GPU idle of their union); the steady one when absent
--   series BOOLEAN = false: the step series (one row per change) instead of the summary
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   stream BIGINT: CUDA stream
--   ts_ns BIGINT: series: time of the change, ns
--   queued BIGINT: series: kernels waiting from ts_ns on
--   mean_queued DOUBLE: time-weighted mean length
--   p95_queued BIGINT: time-weighted 95th percentile of the length
--   max_queued BIGINT: largest length
--   empty_pct DOUBLE: share of the iteration (the whole trace's window) with the queue empty, %
--   empty_gpu_idle_pct DOUBLE: share of the iteration (the whole trace's window) with the queue empty and no kernel running on any stream, %
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH it AS (     -- the windows: the iterations asked for; with iteration=all also the whole trace
    SELECT run, iteration, start_ns, end_ns FROM iteration_gpu_time JOIN iterations USING (run, iteration)
    WHERE ($run IS NULL OR run = $run)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
               ELSE iteration = CAST($iteration AS INTEGER) END
    UNION ALL
    SELECT run, NULL, min(start_ns), max(end_ns) FROM iterations
    WHERE $iteration = 'all' AND ($run IS NULL OR run = $run)
    GROUP BY run
    UNION ALL    -- a trace run without iterations: its kernels' span, first queued to last ended
                 -- (an ncu run's kernels have no ts_ns)
    SELECT run, NULL, min(least(launch_end_ns, ts_ns)), max(ts_ns + dur_ns) FROM kernels k
    WHERE $iteration = 'all' AND ($run IS NULL OR run = $run) AND kind = 'kernel' AND ts_ns IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM iterations i WHERE i.run = k.run)
    GROUP BY run
), gk AS (       -- each window's kernels: its iteration's, or for the whole trace every kernel of the run
    SELECT k.run, k.iteration, k.stream, k.ts_ns, k.dur_ns, k.launch_end_ns
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.kind = 'kernel' AND k.ts_ns IS NOT NULL
    UNION ALL
    SELECT run, NULL, stream, ts_ns, dur_ns, launch_end_ns
    FROM kernels
    WHERE $iteration = 'all' AND kind = 'kernel' AND ts_ns IS NOT NULL AND run IN (SELECT run FROM it)
), k AS (        -- those with their launch call: queued from its end (or their start, when earlier)
    SELECT run, iteration, stream, least(launch_end_ns, ts_ns) AS q_in, ts_ns AS q_out
    FROM gk WHERE launch_end_ns IS NOT NULL
), streams AS (
    SELECT DISTINCT run, iteration, stream FROM k
), ch AS (       -- each stream's queue changes (d), the kernels starting and ending on any stream
                 -- (b) and the window's ends, netted per time; q marks the queue's own changes
    SELECT run, iteration, stream, t, sum(d) AS d, sum(b) AS b, bool_or(q) AS q FROM (
        SELECT run, iteration, stream, q_in AS t, 1 AS d, 0 AS b, true AS q FROM k UNION ALL
        SELECT run, iteration, stream, q_out, -1, 0, true FROM k UNION ALL
        SELECT it.run, it.iteration, s.stream, it.start_ns, 0, 0, true
        FROM it JOIN streams s ON s.run = it.run AND s.iteration IS NOT DISTINCT FROM it.iteration UNION ALL
        SELECT it.run, it.iteration, s.stream, it.end_ns, 0, 0, true
        FROM it JOIN streams s ON s.run = it.run AND s.iteration IS NOT DISTINCT FROM it.iteration UNION ALL
        SELECT s.run, s.iteration, s.stream, x.ts_ns, 0, 1, false              -- kernels running, any stream
        FROM gk x JOIN streams s ON s.run = x.run AND s.iteration IS NOT DISTINCT FROM x.iteration UNION ALL
        SELECT s.run, s.iteration, s.stream, x.ts_ns + x.dur_ns, 0, -1, false
        FROM gk x JOIN streams s ON s.run = x.run AND s.iteration IS NOT DISTINCT FROM x.iteration)
    GROUP BY ALL
), st AS (       -- one sweep (a range join of empty stretches with busy intervals would pair every
                 -- stretch of the whole trace with every interval)
    SELECT run, iteration, stream, t AS ts_ns, q,
           CAST(sum(d) OVER w AS BIGINT) AS queued, sum(b) OVER w AS running,    -- kernels running
           lead(t) OVER (PARTITION BY run, iteration, stream ORDER BY t) AS next_t
    FROM ch
    WINDOW w AS (PARTITION BY run, iteration, stream ORDER BY t ROWS UNBOUNDED PRECEDING)
), seg AS (      -- each stretch where neither the queue nor the kernels running change, in its window
    SELECT st.*, it.start_ns, it.end_ns FROM st JOIN it ON it.run = st.run AND it.iteration IS NOT DISTINCT FROM st.iteration
    WHERE next_t IS NOT NULL AND ts_ns >= it.start_ns AND next_t <= it.end_ns
), summary AS (
    SELECT s.run, s.iteration, s.stream,
           sum(s.queued * (s.next_t - s.ts_ns)) / (any_value(s.end_ns) - any_value(s.start_ns)) AS mean_queued,
           max(s.queued) AS max_queued,
           100.0 * sum(s.next_t - s.ts_ns) FILTER (s.queued = 0) / (any_value(s.end_ns) - any_value(s.start_ns)) AS empty_pct,
           100.0 * coalesce(sum(s.next_t - s.ts_ns) FILTER (s.queued = 0 AND s.running = 0), 0)
                 / (any_value(s.end_ns) - any_value(s.start_ns)) AS empty_gpu_idle_pct
    FROM seg s GROUP BY ALL
), p95 AS (      -- time-weighted: the smallest length at or above which 5% of the time is spent
    SELECT run, iteration, stream, min(queued) AS p95_queued FROM (
        SELECT run, iteration, stream, queued,
               sum(len) OVER (PARTITION BY run, iteration, stream ORDER BY queued ROWS UNBOUNDED PRECEDING)
                 / sum(len) OVER (PARTITION BY run, iteration, stream) AS cum
        FROM (SELECT run, iteration, stream, queued, sum(next_t - ts_ns) AS len FROM seg GROUP BY ALL))
    WHERE cum >= 0.95 GROUP BY ALL
)
SELECT q.run, q.iteration, q.stream, q.ts_ns, q.queued, NULL AS mean_queued, NULL AS p95_queued,
       NULL AS max_queued, NULL AS empty_pct, NULL AS empty_gpu_idle_pct
FROM st q JOIN (SELECT run, iteration, stream, max(ts_ns) AS last_ns FROM st WHERE q GROUP BY ALL) l
  ON l.run = q.run AND l.iteration IS NOT DISTINCT FROM q.iteration AND l.stream IS NOT DISTINCT FROM q.stream
WHERE $series AND q.q AND q.ts_ns < l.last_ns        -- the queue's own changes but its last
UNION ALL
SELECT s.run, s.iteration, s.stream, NULL, NULL, round(s.mean_queued, 3), p.p95_queued, s.max_queued,
       round(s.empty_pct, 2), round(s.empty_gpu_idle_pct, 2)
FROM summary s
JOIN p95 p ON p.run = s.run AND p.iteration IS NOT DISTINCT FROM s.iteration
  AND p.stream IS NOT DISTINCT FROM s.stream
WHERE NOT $series
ORDER BY run, iteration NULLS LAST, stream, ts_ns;
