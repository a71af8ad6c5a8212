-- name: ops
-- topic: single GPU
-- description: Per framework op, the table of torch.profiler's key_averages in
--   SQL: calls, CPU total and self time, and the GPU time of the kernels, memcpys
--   and memsets it launched, per iteration or for the whole trace. Levels: op
--   (aten and other framework ops), user (record_function / NVTX ranges,
--   ProfilerStep#N included), runtime (CUDA runtime and driver calls) and python
--   (with_stack frames). On each thread the events nest by time (a tie goes to
--   the earlier event); self CPU time is the duration less that of the direct
--   children; GPU self time counts the activity launched by runtime calls that
--   are direct children, GPU total that launched anywhere inside (method.md
--   section 10). With iteration=all a trace run's rows are read from
--   op_iteration_totals where an ingest with --op-totals stored them (the same
--   walk, done once); other runs are walked.
-- steady: run
-- iteration_all: sql, whole run
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: an iteration number, or all (every iteration and a whole-trace row with iteration NULL, also of a run without iterations); the steady one when absent
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration whose step marker holds the call's start (NULL: the whole trace)
--   level VARCHAR: op | user | runtime | python
--   name VARCHAR: op or range name
--   calls BIGINT: number of calls
--   cpu_total_ns BIGINT: summed call duration, ns (a call nested in one of the same name counts twice, as in key_averages)
--   cpu_self_ns BIGINT: summed duration less the direct children's, ns
--   cpu_mean_ns DOUBLE: cpu_total_ns / calls, ns
--   gpu_total_ns BIGINT: summed duration of the GPU activity launched inside the calls, ns
--   gpu_self_ns BIGINT: summed duration of the GPU activity launched by its own runtime calls, ns
--   kernels BIGINT: GPU activities (kernels, memcpy, memset) launched inside the calls
-- requires:
--   cpu_events: CPU-side profiler events (framework ops, user ranges, runtime calls: the cpu_op, user_annotation and cuda_runtime events of PyTorch/Kineto traces)
-- engines: duckdb
WITH asked AS (
    SELECT r.run,
           CASE WHEN $iteration IS NULL THEN (SELECT min(s.iteration) FROM iteration_steadiness s
                                              WHERE s.run = r.run AND s.steady)
                WHEN $iteration = 'all' THEN NULL
                ELSE coalesce(TRY_CAST($iteration AS INTEGER),
                              error('iteration must be a number or all, got ' || $iteration)) END AS iteration
    FROM runs r
    WHERE r.kind = 'trace' AND ($run IS NULL OR r.run = $run)
), checked AS (     -- an iteration asked for that the run lacks is an error, not an empty result
    SELECT a.run,
           CASE WHEN a.iteration IS NOT NULL AND NOT EXISTS (
                     SELECT 1 FROM iterations i WHERE i.run = a.run AND i.iteration = a.iteration)
                THEN error('run ' || a.run || ' has no iteration ' || a.iteration || ' (its iterations: '
                           || coalesce((SELECT string_agg(i.iteration::VARCHAR, ', ' ORDER BY i.iteration)
                                        FROM iterations i WHERE i.run = a.run), 'none') || ')')
                ELSE a.iteration END AS iteration
    FROM asked a
), stored AS (      -- iteration=all of a run whose rows the ingest stored (op_iteration_totals):
                    -- read from them; other runs (older databases, nsys runs) are walked here
    SELECT c.run FROM checked c
    WHERE c.iteration IS NULL AND c.run IN (SELECT run FROM op_iteration_totals)
), walked AS (
    SELECT c.* FROM checked c WHERE c.run NOT IN (SELECT run FROM stored)
), bounds AS (       -- the events to read: those starting in the asked iteration and every
                    -- event that starts inside one of them (their children); all: every event.
                    -- (A plain range, no OR: DuckDB then skips the rest of the events table.)
    SELECT c.run,
           coalesce(i.start_ns, -9223372036854775807) AS lo_ns,
           CASE WHEN c.iteration IS NULL THEN 9223372036854775807
                ELSE (SELECT max(e.end_ns) FROM cpu_events e
                      WHERE e.run = c.run AND e.ts_ns >= i.start_ns AND e.ts_ns < i.marker_end_ns) END AS hi_ns
    FROM walked c LEFT JOIN iterations i ON i.run = c.run AND i.iteration = c.iteration
), ev AS (
    SELECT e.run, e.event_id, e.name, e.pid, coalesce(e.tid, '') AS tid, e.ts_ns, e.end_ns, e.dur_ns, e.level
    FROM cpu_events e JOIN bounds b ON b.run = e.run AND e.ts_ns BETWEEN b.lo_ns AND b.hi_ns
    WHERE e.ts_ns BETWEEN (SELECT min(lo_ns) FROM bounds) AND (SELECT max(hi_ns) FROM bounds)
      AND e.run IN (SELECT run FROM walked)     -- none walked: DuckDB then skips the scan
), depth AS (        -- open events on the thread at each start (at equal times ends first,
                    -- zero-length events' last; starts outer before inner, then file order)
    SELECT * FROM (
        SELECT run, pid, tid, t, ord, tie, event_id, delta,
               CAST(sum(delta) OVER (PARTITION BY run, pid, tid ORDER BY t, ord, tie, event_id
                                     ROWS UNBOUNDED PRECEDING) AS BIGINT) - delta AS depth
        FROM (SELECT run, pid, tid, ts_ns AS t, 1 AS ord, -end_ns AS tie, event_id, 1 AS delta FROM ev
              UNION ALL
              SELECT run, pid, tid, end_ns, CASE WHEN dur_ns > 0 THEN 0 ELSE 2 END, 0, event_id, -1 FROM ev))
    WHERE delta = 1
), gpu AS (          -- GPU activity and the runtime call that launched it
    SELECT k.run, k.launch_event_id, sum(k.dur_ns) AS dur_ns, count(*) AS n
    FROM kernels k JOIN bounds b ON b.run = k.run
    WHERE k.launch_event_id IS NOT NULL AND k.dur_ns IS NOT NULL
      AND k.launch_ts_ns BETWEEN (SELECT min(lo_ns) FROM bounds) AND (SELECT max(hi_ns) FROM bounds)
      AND k.run IN (SELECT run FROM walked)
    GROUP BY k.run, k.launch_event_id
), up AS (           -- (event, an event it nests in): the last start before it on a level
                    -- above (a window per thread and level: linear, where a join could go
                    -- quadratic). Every event gets its parent (one level up); a runtime call
                    -- that launched GPU activity, every event it nests in.
    SELECT run, event_id, depth, lvl, ancestor_id FROM (
        SELECT run, event_id, depth, lvl, probe,
               last_value(anchor_id IGNORE NULLS) OVER (PARTITION BY run, pid, tid, lvl
                   ORDER BY t, ord, tie, event_id, probe ROWS UNBOUNDED PRECEDING) AS ancestor_id
        FROM (SELECT run, pid, tid, t, ord, tie, event_id, depth, depth AS lvl, event_id AS anchor_id, false AS probe
              FROM depth
              UNION ALL
              SELECT d.run, d.pid, d.tid, d.t, d.ord, d.tie, d.event_id, d.depth,
                     unnest(CASE WHEN g.launch_event_id IS NULL THEN [d.depth - 1] ELSE range(d.depth) END), NULL, true
              FROM depth d LEFT JOIN gpu g ON g.run = d.run AND g.launch_event_id = d.event_id
              WHERE d.depth > 0))
    WHERE probe AND ancestor_id IS NOT NULL
), parent AS (       -- the innermost enclosing event
    SELECT run, event_id, ancestor_id AS parent_id FROM up WHERE lvl = depth - 1
), child_time AS (
    SELECT p.run, p.parent_id AS event_id, sum(e.dur_ns) AS child_ns
    FROM parent p JOIN ev e USING (run, event_id)
    GROUP BY p.run, p.parent_id
), gpu_self AS (     -- to the runtime call itself, and to the event it is a direct child of
    SELECT run, launch_event_id AS event_id, dur_ns AS ns FROM gpu
    UNION ALL
    SELECT g.run, p.parent_id, g.dur_ns
    FROM gpu g JOIN parent p ON p.run = g.run AND p.event_id = g.launch_event_id
), anc AS (          -- (launch, each event it nests in)
    SELECT u.run, u.event_id, u.ancestor_id FROM up u JOIN gpu g ON g.run = u.run AND g.launch_event_id = u.event_id
), gpu_total AS (    -- to the runtime call and every event it nests in
    SELECT run, launch_event_id AS event_id, dur_ns AS ns, n FROM gpu
    UNION ALL
    SELECT g.run, a.ancestor_id, g.dur_ns, g.n
    FROM gpu g JOIN anc a ON a.run = g.run AND a.event_id = g.launch_event_id
), per_call AS (
    SELECT e.run, e.event_id, e.level, e.name, e.dur_ns,
           e.dur_ns - coalesce(ct.child_ns, 0) AS self_ns,
           coalesce(gt.ns, 0) AS gpu_total_ns, coalesce(gs.ns, 0) AS gpu_self_ns, coalesce(gt.n, 0) AS kernels,
           CASE WHEN e.ts_ns < i.marker_end_ns THEN i.iteration END AS iteration
    FROM ev e
    ASOF LEFT JOIN iterations i ON i.run = e.run AND e.ts_ns >= i.start_ns
    LEFT JOIN child_time ct ON ct.run = e.run AND ct.event_id = e.event_id
    LEFT JOIN (SELECT run, event_id, sum(ns) AS ns FROM gpu_self GROUP BY ALL) gs
      ON gs.run = e.run AND gs.event_id = e.event_id
    LEFT JOIN (SELECT run, event_id, sum(ns) AS ns, sum(n) AS n FROM gpu_total GROUP BY ALL) gt
      ON gt.run = e.run AND gt.event_id = e.event_id
), scoped AS (       -- the asked iteration; with all: every iteration, and the whole trace as iteration NULL
    SELECT p.*, p.iteration AS scope FROM per_call p JOIN walked c ON c.run = p.run
    WHERE p.iteration = c.iteration OR (c.iteration IS NULL AND p.iteration IS NOT NULL)
    UNION ALL
    SELECT p.*, NULL AS scope FROM per_call p JOIN walked c ON c.run = p.run
    WHERE c.iteration IS NULL
)
SELECT run, scope AS iteration, level, name, count(*) AS calls,
       CAST(sum(dur_ns) AS BIGINT) AS cpu_total_ns, CAST(sum(self_ns) AS BIGINT) AS cpu_self_ns,
       round(avg(dur_ns), 1) AS cpu_mean_ns,
       CAST(sum(gpu_total_ns) AS BIGINT) AS gpu_total_ns, CAST(sum(gpu_self_ns) AS BIGINT) AS gpu_self_ns,
       CAST(sum(kernels) AS BIGINT) AS kernels
FROM scoped
GROUP BY run, scope, level, name
UNION ALL
SELECT t.run, t.iteration, t.level, t.name, t.calls, t.cpu_total_ns, t.cpu_self_ns,
       round(t.cpu_total_ns / t.calls, 1), t.gpu_total_ns, t.gpu_self_ns, t.kernels
FROM op_iteration_totals t JOIN stored s ON s.run = t.run
WHERE t.iteration IS NOT NULL
UNION ALL
SELECT t.run, NULL, t.level, t.name, CAST(sum(t.calls) AS BIGINT), CAST(sum(t.cpu_total_ns) AS BIGINT),
       CAST(sum(t.cpu_self_ns) AS BIGINT), round(sum(t.cpu_total_ns) / sum(t.calls), 1),
       CAST(sum(t.gpu_total_ns) AS BIGINT), CAST(sum(t.gpu_self_ns) AS BIGINT), CAST(sum(t.kernels) AS BIGINT)
FROM op_iteration_totals t JOIN stored s ON s.run = t.run
GROUP BY t.run, t.level, t.name
ORDER BY run, iteration NULLS LAST, cpu_total_ns DESC, level, name;
