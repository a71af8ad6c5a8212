-- The ops report's rows of every iteration of one run, as a table an ingest could store
-- (op_iteration_totals: run, iteration (NULL: outside every step marker), level, name,
-- calls, cpu_total_ns, cpu_self_ns, gpu_total_ns, gpu_self_ns, kernels): the cheapest
-- exact form found of queries/ops.sql's per-call walk, run by bench_op_aggregate.py to
-- price it. Not part of the ingest: it costs a third of a trace's ingest CPU (docs/benchmarks.md).
-- The nesting of every CPU event (op, user, runtime, python) needs two sorts of all of them:
-- their start and end by time (depth), then by thread and depth (the enclosing events),
-- with what each call hands up summed straight into its ancestors' (iteration, level, name).
CREATE OR REPLACE TEMP TABLE _ot_ev AS
WITH g AS (
    SELECT launch_event_id AS event_id, sum(dur_ns) AS gpu_ns, count(*) AS n
    FROM kernels WHERE run = $run AND launch_event_id IS NOT NULL AND dur_ns IS NOT NULL
    GROUP BY launch_event_id
), th AS (
    SELECT pid, tid, CAST(row_number() OVER () AS INTEGER) AS th
    FROM (SELECT DISTINCT pid, coalesce(tid, '') AS tid FROM cpu_events WHERE run = $run)
)
SELECT t.th, e.event_id, e.ts_ns, e.end_ns, e.dur_ns, e.level, e.name, g.gpu_ns, g.n,
       CASE WHEN e.ts_ns < i.marker_end_ns THEN i.iteration END AS iteration
FROM cpu_events e
JOIN th t ON t.pid IS NOT DISTINCT FROM e.pid AND t.tid = coalesce(e.tid, '')
LEFT JOIN g ON g.event_id = e.event_id
ASOF LEFT JOIN iterations i ON i.run = e.run AND e.ts_ns >= i.start_ns
WHERE e.run = $run;

CREATE OR REPLACE TEMP TABLE _ot_depth AS
SELECT th, t, ord, tie, event_id, depth FROM (
    SELECT th, t, ord, tie, event_id, delta,
           CAST(sum(delta) OVER (PARTITION BY th ORDER BY t, ord, tie, event_id ROWS UNBOUNDED PRECEDING) AS INTEGER) - delta AS depth
    FROM (SELECT th, ts_ns AS t, CAST(1 AS TINYINT) AS ord, -end_ns AS tie, event_id, CAST(1 AS TINYINT) AS delta FROM _ot_ev
          UNION ALL
          SELECT th, end_ns, CAST(CASE WHEN dur_ns > 0 THEN 0 ELSE 2 END AS TINYINT), 0, event_id, CAST(-1 AS TINYINT) FROM _ot_ev))
WHERE delta = 1;

CREATE OR REPLACE TEMP TABLE _ot_up AS
WITH x AS (
    SELECT d.th, d.t, d.ord, d.tie, d.event_id, d.depth AS lvl,
           {'iteration': e.iteration, 'level': e.level, 'name': e.name} AS key,
           NULL::BIGINT AS child_ns, NULL::BIGINT AS gself_ns, NULL::BIGINT AS gtot_ns, NULL::BIGINT AS kn, false AS probe
    FROM _ot_depth d JOIN _ot_ev e USING (event_id)
    UNION ALL
    SELECT d.th, d.t, d.ord, d.tie, d.event_id, l.lvl, NULL,
           CASE WHEN l.lvl = d.depth - 1 THEN e.dur_ns END,
           CASE WHEN l.lvl = d.depth - 1 THEN e.gpu_ns END,
           e.gpu_ns, e.n, true
    FROM _ot_depth d JOIN _ot_ev e USING (event_id),
         unnest(CASE WHEN e.gpu_ns IS NULL THEN [d.depth - 1] ELSE range(d.depth) END) AS l(lvl)
    WHERE d.depth > 0
)
SELECT a.key, sum(child_ns) AS child_ns, sum(gself_ns) AS gself_ns, sum(gtot_ns) AS gtot_ns, sum(kn) AS kn
FROM (SELECT probe, child_ns, gself_ns, gtot_ns, kn,
             last_value(key IGNORE NULLS) OVER (PARTITION BY th, lvl ORDER BY t, ord, tie, event_id, probe
                                                ROWS UNBOUNDED PRECEDING) AS key
      FROM x) a
WHERE probe AND key IS NOT NULL
GROUP BY a.key;

CREATE OR REPLACE TEMP TABLE op_iteration_totals AS
SELECT $run AS run, o.iteration, o.level, o.name, o.calls, o.cpu_total_ns,
       o.cpu_total_ns - coalesce(u.child_ns, 0) AS cpu_self_ns,
       o.gpu_ns + coalesce(u.gtot_ns, 0) AS gpu_total_ns, o.gpu_ns + coalesce(u.gself_ns, 0) AS gpu_self_ns,
       o.n + coalesce(u.kn, 0) AS kernels
FROM (SELECT iteration, level, name, count(*) AS calls, sum(dur_ns) AS cpu_total_ns,
             coalesce(sum(gpu_ns), 0) AS gpu_ns, coalesce(sum(n), 0) AS n
      FROM _ot_ev GROUP BY iteration, level, name) o
LEFT JOIN _ot_up u ON u.key.iteration IS NOT DISTINCT FROM o.iteration AND u.key.level = o.level
                  AND u.key.name IS NOT DISTINCT FROM o.name;
