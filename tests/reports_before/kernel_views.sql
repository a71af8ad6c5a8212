-- The views that swept every kernel before kernel_aggregates.sql stored their sums
-- (a frozen copy, tests/test_kernel_aggregates.py creates them as TEMP views in front of
-- today's on a cursor of its own).

CREATE OR REPLACE VIEW gpu_activity_sweep AS
WITH k AS (
    SELECT run, iteration, kind, ts_ns AS start_ns, ts_ns + dur_ns AS end_ns, kernel_id
    FROM kernels WHERE ts_ns IS NOT NULL AND iteration IS NOT NULL
)
-- two sorts, one per activity (one sort of both, partitioned by activity, took 10-20% longer)
SELECT 'kernels' AS activity, run, iteration, start_ns, end_ns, max(end_ns) OVER w AS prev_end_ns, kernel_id
FROM k WHERE kind = 'kernel'
WINDOW w AS (PARTITION BY run, iteration ORDER BY start_ns, end_ns, kernel_id
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
UNION ALL
SELECT 'all', run, iteration, start_ns, end_ns, max(end_ns) OVER w, kernel_id
FROM k
WINDOW w AS (PARTITION BY run, iteration ORDER BY start_ns, end_ns, kernel_id
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

CREATE OR REPLACE VIEW gpu_busy_intervals AS
WITH islands AS (
    SELECT *, sum(CASE WHEN start_ns > prev_end_ns THEN 1 ELSE 0 END) OVER (
                  PARTITION BY activity, run, iteration ORDER BY start_ns, end_ns, kernel_id ROWS UNBOUNDED PRECEDING)
                  AS island
    FROM gpu_activity_sweep
)
SELECT activity, run, iteration, min(start_ns) AS start_ns, max(end_ns) AS end_ns, max(end_ns) - min(start_ns) AS dur_ns
FROM islands
GROUP BY activity, run, iteration, island;

CREATE OR REPLACE VIEW kernel_busy_intervals AS
SELECT run, iteration, start_ns, end_ns, dur_ns FROM gpu_busy_intervals WHERE activity = 'kernels';

CREATE OR REPLACE VIEW iteration_gpu_time AS
WITH k AS (
    SELECT run, iteration, kind, ts_ns AS start_ns, ts_ns + dur_ns AS end_ns, kernel_id
    FROM kernels WHERE ts_ns IS NOT NULL AND iteration IS NOT NULL AND in_gpu_time_iteration(run, iteration)
), busy AS (
    -- the union's length without forming its islands: each interval adds what reaches
    -- beyond the latest end before it (gpu_activity_sweep's prev_end_ns). Here in one
    -- sort for both activities: a kernel's latest earlier kernel end is the FILTERed
    -- max over the same order (gpu_activity_sweep's two sorts took 2.4-2.8 s on a 10 GB
    -- trace's 2.5 M kernels, this one 1.5-2.0 s; a list_reduce per iteration took 0.6 s,
    -- but 19 s where one iteration held them all: its steps are the longest list's length)
    SELECT run, iteration,
           sum(greatest(0, end_ns - greatest(start_ns, coalesce(prev_kernel_end_ns, start_ns))))
               FILTER (kind = 'kernel') AS busy_ns,
           sum(greatest(0, end_ns - greatest(start_ns, coalesce(prev_end_ns, start_ns)))) AS all_busy_ns
    FROM (SELECT *, max(end_ns) FILTER (kind = 'kernel') OVER w AS prev_kernel_end_ns, max(end_ns) OVER w AS prev_end_ns
          FROM k
          WINDOW w AS (PARTITION BY run, iteration ORDER BY start_ns, end_ns, kernel_id
                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW))
    GROUP BY run, iteration
), ksum AS (
    SELECT run, iteration, sum(dur_ns) FILTER (kind = 'kernel') AS sum_ns, count(*) FILTER (kind = 'kernel') AS n,
           sum(dur_ns) AS all_sum_ns
    FROM kernels WHERE iteration IS NOT NULL AND in_gpu_time_iteration(run, iteration) GROUP BY run, iteration
)
SELECT i.run, i.iteration, s.steady, i.dur_ns AS total_ns,
       CAST(coalesce(b.busy_ns, 0) AS BIGINT) AS kernel_busy_ns,
       CAST(coalesce(k.sum_ns, 0) AS BIGINT) AS kernel_sum_ns,
       CAST(coalesce(k.all_sum_ns, 0) AS BIGINT) AS gpu_event_sum_ns,
       CAST(coalesce(b.all_busy_ns, 0) AS BIGINT) AS gpu_event_busy_ns,
       coalesce(k.n, 0) AS kernels,
       CAST(i.dur_ns - coalesce(b.busy_ns, 0) AS BIGINT) AS idle_ns,
       100.0 * coalesce(b.busy_ns, 0) / i.dur_ns AS gpu_util_pct,
       100.0 * coalesce(k.all_sum_ns, 0) / i.dur_ns AS gpu_event_util_pct
FROM iterations i
JOIN iteration_steadiness s USING (run, iteration)
LEFT JOIN busy b USING (run, iteration)
LEFT JOIN ksum k USING (run, iteration);

CREATE OR REPLACE VIEW gpu_class_segments AS
WITH k AS (
    SELECT run, iteration, ts_ns AS s, ts_ns + dur_ns AS e, kernel_class AS c
    FROM kernel_classes WHERE dur_ns > 0
), scoped AS (
    SELECT run, iteration, s, e, c FROM k WHERE iteration IS NOT NULL
    UNION ALL
    SELECT run, CAST(NULL AS INTEGER), s, e, c FROM k
), points AS (
    SELECT run, iteration, s AS t, c, 1 AS d FROM scoped
    UNION ALL
    SELECT run, iteration, e AS t, c, -1 AS d FROM scoped
), deltas AS (
    SELECT run, iteration, t,
           sum(CASE WHEN c = 'compute' THEN d ELSE 0 END) AS d_comp,
           sum(CASE WHEN c = 'communication' THEN d ELSE 0 END) AS d_comm,
           sum(CASE WHEN c = 'memory' THEN d ELSE 0 END) AS d_mem
    FROM points GROUP BY run, iteration, t
), running AS (
    SELECT run, iteration, t AS start_ns,
           lead(t) OVER (PARTITION BY run, iteration ORDER BY t) AS end_ns,
           sum(d_comp) OVER (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING) AS n_comp,
           sum(d_comm) OVER (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING) AS n_comm,
           sum(d_mem) OVER (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING) AS n_mem
    FROM deltas
)
SELECT run, iteration, start_ns, end_ns, end_ns - start_ns AS dur_ns,
       n_comp > 0 AS compute, n_comm > 0 AS communication, n_mem > 0 AS memory
FROM running
WHERE end_ns > start_ns AND (n_comp > 0 OR n_comm > 0 OR n_mem > 0);

CREATE OR REPLACE VIEW gpu_class_time AS
WITH s AS (
    SELECT run, iteration,
           sum(dur_ns) AS busy_ns,
           sum(CASE WHEN compute AND NOT communication AND NOT memory THEN dur_ns ELSE 0 END) AS compute_only_ns,
           sum(CASE WHEN communication AND NOT compute AND NOT memory THEN dur_ns ELSE 0 END) AS communication_only_ns,
           sum(CASE WHEN memory AND NOT compute AND NOT communication THEN dur_ns ELSE 0 END) AS memory_only_ns,
           sum(CASE WHEN compute AND communication AND NOT memory THEN dur_ns ELSE 0 END) AS compute_communication_ns,
           sum(CASE WHEN compute AND memory AND NOT communication THEN dur_ns ELSE 0 END) AS compute_memory_ns,
           sum(CASE WHEN communication AND memory AND NOT compute THEN dur_ns ELSE 0 END) AS communication_memory_ns,
           sum(CASE WHEN compute AND communication AND memory THEN dur_ns ELSE 0 END) AS all_three_ns,
           sum(CASE WHEN compute THEN dur_ns ELSE 0 END) AS compute_ns,
           sum(CASE WHEN communication THEN dur_ns ELSE 0 END) AS communication_ns,
           min(start_ns) AS first_start_ns, max(end_ns) AS last_end_ns
    FROM gpu_class_segments GROUP BY run, iteration
)
SELECT s.run, s.iteration,
       CAST(CASE WHEN s.iteration IS NULL THEN s.last_end_ns - s.first_start_ns ELSE i.dur_ns END AS BIGINT) AS window_ns,
       CAST(s.busy_ns AS BIGINT) AS busy_ns,
       CAST(s.compute_only_ns AS BIGINT) AS compute_only_ns,
       CAST(s.communication_only_ns AS BIGINT) AS communication_only_ns,
       CAST(s.memory_only_ns AS BIGINT) AS memory_only_ns,
       CAST(s.compute_communication_ns AS BIGINT) AS compute_communication_ns,
       CAST(s.compute_memory_ns AS BIGINT) AS compute_memory_ns,
       CAST(s.communication_memory_ns AS BIGINT) AS communication_memory_ns,
       CAST(s.all_three_ns AS BIGINT) AS all_three_ns,
       CAST(s.compute_ns AS BIGINT) AS compute_ns,
       CAST(s.communication_ns AS BIGINT) AS communication_ns
FROM s LEFT JOIN iterations i ON i.run = s.run AND i.iteration = s.iteration;

CREATE OR REPLACE VIEW activity_segments AS
WITH it AS (SELECT run, iteration, start_ns, end_ns FROM iterations),
iv AS (
    SELECT * FROM (
        SELECT run, 'queue' AS k, enqueue_end_ns AS s, dequeue_start_ns AS e FROM eager_nodes
        WHERE mode = 'async' AND dequeue_start_ns > enqueue_end_ns
        UNION ALL SELECT run, 'deq', dequeue_start_ns, dequeue_end_ns FROM eager_nodes)
    WHERE s IS NULL OR e IS NULL OR in_segment_window(run, s, e)     -- (an open end runs on: kept)
    UNION ALL SELECT run, CASE WHEN kind = 'kernel' THEN 'gpu' ELSE 'copy' END, ts_ns, ts_ns + dur_ns
              FROM kernels WHERE ts_ns IS NOT NULL AND dur_ns > 0 AND in_segment_window(run, ts_ns, ts_ns + dur_ns)
    UNION ALL SELECT run, 'cpu', ts_ns, ts_ns + dur_ns FROM events
              WHERE ph = 'X' AND dur_ns > 0 AND name IN ('KernelAndDeviceFunc::Run', 'ThreadpoolListener::Region')
                AND in_segment_window(run, ts_ns, ts_ns + dur_ns)
), b AS (
    SELECT run, s AS t, k, 1 AS d FROM iv UNION ALL SELECT run, e, k, -1 FROM iv
    UNION ALL SELECT run, start_ns, 'edge', 0 FROM it UNION ALL SELECT run, end_ns, 'edge', 0 FROM it
), pts AS (
    SELECT run, t, sum(d) FILTER (k = 'queue') AS dq, sum(d) FILTER (k = 'deq') AS dd,
           sum(d) FILTER (k = 'gpu') AS dg, sum(d) FILTER (k = 'copy') AS dm, sum(d) FILTER (k = 'cpu') AS dc
    FROM b GROUP BY run, t
), st AS (
    SELECT run, t AS start_ns, lead(t) OVER w AS end_ns,
           sum(coalesce(dq, 0)) OVER w2 AS queued, sum(coalesce(dd, 0)) OVER w2 AS dequeuing,
           sum(coalesce(dg, 0)) OVER w2 AS gpu, sum(coalesce(dm, 0)) OVER w2 AS copy,
           sum(coalesce(dc, 0)) OVER w2 AS cpu
    FROM pts
    WINDOW w AS (PARTITION BY run ORDER BY t), w2 AS (PARTITION BY run ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT st.run, it.iteration, st.start_ns, st.end_ns, st.end_ns - st.start_ns AS dur_ns,
       st.queued, st.dequeuing > 0 AS dequeuing, st.gpu > 0 AS gpu_kernel, st.copy > 0 AS memory_transfer,
       st.cpu > 0 AS cpu_kernel,
       CASE WHEN st.gpu > 0 THEN 'gpu_kernel' WHEN st.cpu > 0 THEN 'cpu_kernel'
            WHEN st.dequeuing > 0 THEN 'dequeuing' WHEN st.copy > 0 THEN 'memory_transfer'
            ELSE 'waiting' END AS category
FROM st ASOF JOIN it ON it.run = st.run AND st.start_ns >= it.start_ns
WHERE st.end_ns IS NOT NULL AND st.end_ns <= it.end_ns AND st.end_ns > st.start_ns;
