-- Per-iteration aggregates of one trace run, stored at ingest so that the reports that
-- read them answer iteration=all without sweeping every event (docs/benchmarks.md,
-- "Reports with iteration=all"). Runs after derive_trace.sql, in the ingest's
-- transaction; $run is the run.
--
-- op_iteration_totals: the ops report's per-call walk (queries/ops.sql) over the whole
-- run, summed per iteration, level and name. The nesting is the report's: on each
-- thread the CPU events' starts and ends in one order (at equal times ends first,
-- zero-length events' ends last, outer starts before inner, then event_id), an event's
-- depth the events open at its start, its parent the last start one level up. Two sorts:
--  1. the boundaries in that order: each start's depth, and running sums of the GPU
--     time and activities launched (an event's GPU total is the sum between its start
--     and the first boundary after it that closes its level: everything started in
--     between nests in it, at any depth);
--  2. per thread and level, by that order: each event's start, then the starts of its
--     direct children (one level deeper, before the next start on its level), then its
--     closing boundary; a running count of the starts numbers each event's group.

CREATE OR REPLACE TEMP TABLE _ia_ev AS
WITH g AS (
    SELECT launch_event_id AS event_id, sum(dur_ns) AS gpu_ns, count(*) AS n
    FROM kernels
    WHERE run = $run AND launch_event_id IS NOT NULL AND dur_ns IS NOT NULL AND launch_ts_ns IS NOT NULL
    GROUP BY launch_event_id
), th AS (
    SELECT pid, tid, CAST(row_number() OVER () AS INTEGER) AS th
    FROM (SELECT DISTINCT pid, coalesce(tid, '') AS tid FROM cpu_events WHERE run = $run)
)
SELECT t.th, e.event_id, e.ts_ns, e.end_ns, e.dur_ns, e.level, e.name,
       coalesce(g.gpu_ns, 0) AS gpu_ns, coalesce(g.n, 0) AS n,
       CASE WHEN e.ts_ns < i.marker_end_ns THEN i.iteration END AS iteration
FROM cpu_events e
JOIN th t ON t.pid IS NOT DISTINCT FROM e.pid AND t.tid = coalesce(e.tid, '')
LEFT JOIN g ON g.event_id = e.event_id
ASOF LEFT JOIN (SELECT * FROM iterations WHERE run = $run) i ON e.ts_ns >= i.start_ns
WHERE e.run = $run;

-- 1. Every boundary in the report's order; pos numbers them per thread. A start carries
-- its duration and own launches, and the running sums before it; an end the sums after it.
CREATE OR REPLACE TEMP TABLE _ia_b AS
SELECT th, pos, event_id, is_start, dur_ns, gpu_ns,
       CAST(open_after - CAST(is_start AS INTEGER) AS INTEGER) AS lvl,
       cg - gpu_ns AS cg, cn - n AS cn
FROM (
    SELECT th, event_id, ord = 1 AS is_start, dur_ns, gpu_ns, n,
           row_number() OVER w AS pos,
           sum(CASE ord WHEN 1 THEN 1 ELSE -1 END) OVER w AS open_after,
           sum(gpu_ns) OVER w AS cg, sum(n) OVER w AS cn
    FROM (SELECT th, ts_ns AS t, CAST(1 AS TINYINT) AS ord, -end_ns AS tie, event_id, dur_ns, gpu_ns, n FROM _ia_ev
          UNION ALL
          SELECT th, end_ns, CAST(CASE WHEN dur_ns > 0 THEN 0 ELSE 2 END AS TINYINT), 0, event_id, 0, 0, 0 FROM _ia_ev)
    WINDOW w AS (PARTITION BY th ORDER BY t, ord, tie, event_id ROWS UNBOUNDED PRECEDING));

-- 2. Per thread and level: a start (kind 0) at its depth, a start as a child (kind 1)
-- one level up, an end (kind 2) at the depth it leaves. Each event's group: its start,
-- its direct children, the end that closes it.
CREATE OR REPLACE TEMP TABLE _ia_call AS
WITH x AS (
    SELECT th, lvl, pos, CAST(0 AS TINYINT) AS kind, event_id, dur_ns, gpu_ns, cg, cn FROM _ia_b WHERE is_start
    UNION ALL
    SELECT th, lvl - 1, pos, CAST(1 AS TINYINT), NULL, dur_ns, gpu_ns, NULL, NULL FROM _ia_b WHERE is_start AND lvl > 0
    UNION ALL
    SELECT th, lvl, pos, CAST(2 AS TINYINT), NULL, NULL, NULL, cg, cn FROM _ia_b WHERE NOT is_start
), grp AS (
    SELECT *, count(event_id) OVER (PARTITION BY th, lvl ORDER BY pos ROWS UNBOUNDED PRECEDING) AS g
    FROM x
)
SELECT max(event_id) AS event_id,
       coalesce(sum(dur_ns) FILTER (WHERE kind = 1), 0) AS child_ns,
       max(gpu_ns) FILTER (WHERE kind = 0) + coalesce(sum(gpu_ns) FILTER (WHERE kind = 1), 0) AS gpu_self_ns,
       max(cg) FILTER (WHERE kind = 2) - max(cg) FILTER (WHERE kind = 0) AS gpu_total_ns,
       max(cn) FILTER (WHERE kind = 2) - max(cn) FILTER (WHERE kind = 0) AS kernels
FROM grp
GROUP BY th, lvl, g;

DELETE FROM op_iteration_totals WHERE run = $run;
INSERT INTO op_iteration_totals
SELECT $run, e.iteration, e.level, e.name, count(*), sum(e.dur_ns), sum(e.dur_ns - c.child_ns),
       sum(c.gpu_total_ns), sum(c.gpu_self_ns), sum(c.kernels)
FROM _ia_ev e JOIN _ia_call c USING (event_id)
GROUP BY e.iteration, e.level, e.name;

DROP TABLE _ia_ev;
DROP TABLE _ia_b;
DROP TABLE _ia_call;
