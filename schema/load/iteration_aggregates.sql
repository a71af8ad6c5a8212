-- Per-iteration aggregates of one trace run, stored at ingest so that the reports that
-- read them answer iteration=all without sweeping every event (docs/benchmarks.md,
-- "Reports with iteration=all"). Runs after derive_trace.sql, in the ingest's
-- transaction; $run is the run.
-- reads: cpu_events, kernels and iterations of the run
-- creates: _ia_ev, _ia_th, _ia_nm, _ia_call, _ia_mk, _ia_bounds, _ia_b, _ia_sum (each dropped once read), the variable tracedb_ia_streaming (reset); rows of op_iteration_totals
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
--  2. by thread, level and order: a start's parent is the last start one level up
--     before it, and the boundary that closes an event is the first end at its level
--     after its start, so the last start at that level before the end is the event.
-- Each call hands its duration and own GPU time to its parent's key, and its GPU total
-- to its own key: what is summed per key is small, and no step groups by event.

CREATE OR REPLACE TEMP TABLE _ia_ev AS
SELECT pid, coalesce(tid, '') AS tid, event_id, ts_ns, end_ns, dur_ns, level, name
FROM cpu_events WHERE run = $run;

-- Threads, and the calls' level and name, as small numbers for the sorts.
CREATE OR REPLACE TEMP TABLE _ia_th AS
SELECT pid, tid, CAST(row_number() OVER () AS INTEGER) AS th FROM (SELECT DISTINCT pid, tid FROM _ia_ev);
CREATE OR REPLACE TEMP TABLE _ia_nm AS
SELECT level, name, CAST(row_number() OVER () AS INTEGER) AS nm FROM (SELECT DISTINCT level, name FROM _ia_ev);

-- Each call narrow: thread, times, name, and the GPU activity its own launches made.
CREATE OR REPLACE TEMP TABLE _ia_call AS
WITH g AS (
    SELECT launch_event_id AS event_id, CAST(sum(dur_ns) AS BIGINT) AS gpu_ns, count(*) AS n
    FROM kernels
    WHERE run = $run AND launch_event_id IS NOT NULL AND dur_ns IS NOT NULL AND launch_ts_ns IS NOT NULL
    GROUP BY launch_event_id
)
SELECT t.th, e.event_id, e.ts_ns, e.end_ns, e.dur_ns, m.nm, coalesce(g.gpu_ns, 0) AS gpu_ns, coalesce(g.n, 0) AS n
FROM _ia_ev e
JOIN _ia_th t ON t.pid IS NOT DISTINCT FROM e.pid AND t.tid = e.tid
JOIN _ia_nm m ON m.level = e.level AND m.name IS NOT DISTINCT FROM e.name
LEFT JOIN g ON g.event_id = e.event_id;

DROP TABLE _ia_ev;          -- (each table dropped once read: the ingest's peak memory)

-- 1. Every boundary in the report's order (per thread: at equal times ends, then starts
-- by later end first, then zero-length events' ends; then event_id), numbered by pos,
-- with running sums: the depth, and the GPU time and activities launched. A start
-- carries its name, duration and own launches, and the sums before it; an end the
-- depth it leaves and the sums after it. Each thread also gets every step marker's
-- start (before the events at its time), counted: a call's iteration is the last marker
-- started at or before it, where the call starts before that marker's end (the report's
-- ASOF join, without sorting the calls by time once more).
-- Two forms of the same rows, by the threads DuckDB runs on (the other form's branch is
-- pruned when the statement is planned):
-- - up to 4 threads: the rows sorted once, the sums DuckDB's streaming window over them
--   (one pass on one thread; across threads, where every thread's starts and ends
--   cancel and only differences within a thread are read). 1 GB trace pinned to 2
--   cores of the 16-core host: 1.36 s wall, 1.65 CPU s;
-- - more: a window partitioned by thread, whose sort and sums run on every thread.
--   Pinned to 2 cores 2.13 s, 3.97 CPU s; the 10 GB trace on 16 cores 6.9 s against
--   15.4 s for the streaming form.
SET VARIABLE tracedb_ia_streaming = CAST(current_setting('threads') AS INTEGER) <= 4;

CREATE OR REPLACE TEMP TABLE _ia_mk AS
SELECT iteration, start_ns, marker_end_ns, row_number() OVER (ORDER BY start_ns, iteration) AS mk
FROM iterations WHERE run = $run;

CREATE OR REPLACE TEMP VIEW _ia_bounds AS
SELECT th, ts_ns AS t, -end_ns AS tie, event_id, CAST(1 AS TINYINT) AS kind, nm, dur_ns, gpu_ns, n
FROM _ia_call
UNION ALL
SELECT th, end_ns, CASE WHEN dur_ns > 0 THEN -9223372036854775808 ELSE 9223372036854775807 END,
       event_id, CAST(0 AS TINYINT), NULL, 0, 0, 0
FROM _ia_call
UNION ALL
SELECT t.th, m.start_ns, -9223372036854775808, -1, CAST(2 AS TINYINT), NULL, 0, 0, 0
FROM _ia_th t, _ia_mk m;

CREATE OR REPLACE TEMP TABLE _ia_b AS
SELECT b.th, b.pos, b.kind = 1 AS is_start, CASE WHEN b.t < m.marker_end_ns THEN m.iteration END AS iteration,
       b.nm, b.dur_ns, b.gpu_ns,
       CAST(b.open_after - CAST(b.kind = 1 AS INTEGER) AS INTEGER) AS lvl,
       b.cg - b.gpu_ns AS cg, b.cn - b.n AS cn
FROM (
    SELECT th, t, kind, nm, dur_ns, gpu_ns, n,
           row_number() OVER () AS pos,
           sum(CASE kind WHEN 1 THEN 1 WHEN 0 THEN -1 ELSE 0 END) OVER (ROWS UNBOUNDED PRECEDING) AS open_after,
           sum(gpu_ns) OVER (ROWS UNBOUNDED PRECEDING) AS cg, sum(n) OVER (ROWS UNBOUNDED PRECEDING) AS cn,
           sum(CASE kind WHEN 2 THEN 1 ELSE 0 END) OVER (ROWS UNBOUNDED PRECEDING)
             - (th - 1) * (SELECT count(*) FROM _ia_mk) AS mk
    FROM (SELECT * FROM _ia_bounds ORDER BY th, t, tie, event_id)
    WHERE getvariable('tracedb_ia_streaming')
    UNION ALL
    SELECT th, t, kind, nm, dur_ns, gpu_ns, n,
           row_number() OVER w,
           sum(CASE kind WHEN 1 THEN 1 WHEN 0 THEN -1 ELSE 0 END) OVER w,
           sum(gpu_ns) OVER w, sum(n) OVER w,
           sum(CASE kind WHEN 2 THEN 1 ELSE 0 END) OVER w
    FROM _ia_bounds
    WHERE NOT getvariable('tracedb_ia_streaming')
    WINDOW w AS (PARTITION BY th ORDER BY t, tie, event_id ROWS UNBOUNDED PRECEDING)) b
LEFT JOIN _ia_mk m ON m.mk = b.mk
WHERE b.kind <> 2;
DROP VIEW _ia_bounds;
DROP TABLE _ia_call;
DROP TABLE _ia_th;
DROP TABLE _ia_mk;

-- 2. Each call's parent, and the event each end closes, per thread and level; two
-- forms of the same sums, picked as in step 1:
-- - up to 4 threads: the rows sorted by thread, level and pos: a start (kind 0) at its
--   depth, a start as a child (kind 1) one level up, an end (kind 2) at the depth it
--   leaves. There an event's start is followed by its direct children, then by the end
--   that closes it, then by the next start (a child's parent is the last start one
--   level up before it; the first boundary after a start that leaves its level closes
--   it, and no child comes between that end and the next start there). Read in order
--   (streaming windows): running sums of the children's duration and own GPU time, and
--   each end read with the start before it (starts and ends alternate). 1 GB trace
--   pinned to 2 cores: 1.17 s wall, 1.61 CPU s;
-- - more: an ASOF join per thread and level (the last start before a child one level
--   up is its parent; the last start at an end's level, the event it closes), run on
--   every thread. Pinned to 2 cores 1.03 s, 2.03 CPU s; the 10 GB trace on 16 cores
--   4.4 s against 10.6 s for the streaming form.
-- Each call hands its duration and own GPU time to its parent's key, and its GPU total
-- (the sums between its start and its closing end) to its own key: what is summed per
-- key is small, and no step groups by event.
CREATE OR REPLACE TEMP TABLE _ia_sum AS
WITH x AS (
    SELECT th, lvl, pos, CAST(0 AS TINYINT) AS kind, iteration, nm, 0::BIGINT AS dur_ns, 0::BIGINT AS gpu_ns, cg, cn
    FROM _ia_b WHERE is_start
    UNION ALL
    SELECT th, lvl - 1, pos, CAST(1 AS TINYINT), NULL, NULL, dur_ns, gpu_ns, NULL, NULL FROM _ia_b WHERE is_start AND lvl > 0
    UNION ALL
    SELECT th, lvl, pos, CAST(2 AS TINYINT), NULL, NULL, 0, 0, cg, cn FROM _ia_b WHERE NOT is_start
), r AS (
    SELECT kind, iteration, nm, cg, cn,
           sum(dur_ns) OVER (ROWS UNBOUNDED PRECEDING) AS rd, sum(gpu_ns) OVER (ROWS UNBOUNDED PRECEDING) AS rg
    FROM (SELECT * FROM x ORDER BY th, lvl, pos)
), e AS (
    SELECT kind, cg, cn, rd, rg,
           lag(iteration) OVER () AS it0, lag(nm) OVER () AS nm0, lag(cg) OVER () AS cg0, lag(cn) OVER () AS cn0,
           lag(rd) OVER () AS rd0, lag(rg) OVER () AS rg0
    FROM r WHERE kind <> 1
), s AS (
    SELECT th, lvl, pos, iteration, nm, cg, cn FROM _ia_b WHERE is_start
), l AS (
    SELECT th, lvl - 1 AS lvl, pos, dur_ns, gpu_ns, NULL::BIGINT AS cg, NULL::BIGINT AS cn
    FROM _ia_b WHERE is_start AND lvl > 0
    UNION ALL
    SELECT th, lvl, pos, NULL, NULL, cg, cn FROM _ia_b WHERE NOT is_start
)
SELECT it0 AS iteration, nm0 AS nm, sum(rd - rd0) AS child_ns, sum(rg - rg0) AS child_gpu_ns,
       sum(cg - cg0) AS gpu_total_ns, sum(cn - cn0) AS kernels
FROM e WHERE kind = 2 AND getvariable('tracedb_ia_streaming')
GROUP BY it0, nm0
UNION ALL
SELECT x.iteration, x.nm, sum(l.dur_ns), sum(l.gpu_ns), sum(l.cg - x.cg), sum(l.cn - x.cn)
FROM l ASOF JOIN s x ON x.th = l.th AND x.lvl = l.lvl AND l.pos > x.pos
WHERE NOT getvariable('tracedb_ia_streaming')
GROUP BY x.iteration, x.nm;
RESET VARIABLE tracedb_ia_streaming;

DELETE FROM op_iteration_totals WHERE run = $run;
INSERT INTO op_iteration_totals
SELECT $run, o.iteration, m.level, m.name, o.calls, o.cpu_total_ns, o.cpu_total_ns - coalesce(s.child_ns, 0),
       coalesce(s.gpu_total_ns, 0), o.gpu_ns + coalesce(s.child_gpu_ns, 0), coalesce(s.kernels, 0)
FROM (SELECT iteration, nm, count(*) AS calls, sum(dur_ns) AS cpu_total_ns, sum(gpu_ns) AS gpu_ns
      FROM _ia_b WHERE is_start GROUP BY iteration, nm) o
JOIN _ia_nm m USING (nm)
LEFT JOIN _ia_sum s ON s.iteration IS NOT DISTINCT FROM o.iteration AND s.nm = o.nm;

DROP TABLE _ia_b;
DROP TABLE _ia_nm;
DROP TABLE _ia_sum;
