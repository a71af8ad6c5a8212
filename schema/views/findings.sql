-- includes: base, graphs

-- Building blocks of the finding rules (rules/*.sql, tracedb advise).
-- Documented in docs/reports.md ("findings").
--
-- A rule that sweeps the kernels or events sums them per iteration in a macro here
-- (host_bound_starved, tiny_kernel_sums, fusion_sums, data_loader_sums, sync_sums,
-- layout_sums), which the rule reads and which an ingest with --op-totals runs over the
-- whole run once (schema/load/finding_aggregates.sql) into finding_iteration_totals.
-- With iteration=all (every_p) a rule reads the stored rows of the runs that have
-- them (finding_stored) and the macros sweep only the other runs' iterations
-- (finding_windows with walked_only): the same sums, and the same rows. advise says
-- which (the rules' $stored: finding_reads_stored).

-- The runs whose per-iteration sums an ingest stored (finding_iteration_totals).
--
-- @column run  trace run with rows in finding_iteration_totals
CREATE OR REPLACE VIEW finding_stored_runs AS
SELECT DISTINCT run FROM finding_iteration_totals;

-- Whether a rule reads the sums stored at ingest (finding_iteration_totals) instead of
-- sweeping: every iteration (every_p, it_p NULL) of one run (run_p) that has them, as
-- its caller says (stored: advise.evaluate_every binds $stored for a run of
-- finding_stored_runs). A constant, so that the sweeps it turns off are not planned.
CREATE OR REPLACE MACRO finding_reads_stored(run_p, it_p, every_p, stored) AS
    coalesce(stored AND every_p AND it_p IS NULL AND run_p IS NOT NULL, false);

-- The iterations a finding rule looks at, without their GPU time: iteration it_p of
-- each trace run (run_p, or every run when NULL), or the steady one when it_p is NULL,
-- or every iteration when every_p; with walked_only, none when the rule reads the run's
-- sums stored (finding_stored): the iterations its sweep walks.
CREATE OR REPLACE MACRO finding_windows(run_p, it_p, every_p := false, stored := false, walked_only := false) AS TABLE
SELECT i.run, i.iteration, i.start_ns, i.marker_end_ns, i.end_ns, i.dur_ns
FROM iterations i
WHERE (run_p IS NULL OR i.run = run_p) AND (i.iteration = it_p OR (it_p IS NULL AND every_p))
  AND NOT (walked_only AND finding_reads_stored(run_p, it_p, every_p, stored))
UNION ALL           -- the steady one: a window over every iteration, planned away unless asked for
SELECT i.run, i.iteration, i.start_ns, i.marker_end_ns, i.end_ns, i.dur_ns
FROM iterations i JOIN iteration_steadiness s USING (run, iteration)
WHERE (run_p IS NULL OR i.run = run_p) AND it_p IS NULL AND NOT every_p AND s.steady;

-- The stored sums (finding_iteration_totals) a rule reads: every iteration of run_p when
-- finding_reads_stored; no rows otherwise.
CREATE OR REPLACE MACRO finding_stored(run_p, it_p, every_p := false, stored := false) AS TABLE
SELECT * FROM finding_iteration_totals
WHERE finding_reads_stored(run_p, it_p, every_p, stored) AND run = run_p;

-- The iterations a finding rule looks at: iteration it_p of each trace run
-- (run_p, or every run when NULL), or the steady one when it_p is NULL, or every
-- iteration when every_p (advise.evaluate_every: the rules' $every), with the
-- step marker's window and the GPU time of iteration_gpu_time (read from
-- finding_stored when the rule reads the run's sums stored: its kernels not swept).
CREATE OR REPLACE MACRO finding_iterations(run_p, it_p, every_p := false, stored := false) AS TABLE
SELECT w.run, w.iteration, w.start_ns, w.marker_end_ns, w.end_ns, w.dur_ns,
       g.kernel_busy_ns, g.idle_ns, g.gpu_util_pct
FROM finding_windows(run_p, it_p, every_p := every_p) w
JOIN (SELECT run, iteration, kernel_busy_ns, idle_ns, gpu_util_pct
      FROM finding_stored(run_p, it_p, every_p := every_p, stored := stored)
      UNION ALL
      SELECT run, iteration, kernel_busy_ns, idle_ns, gpu_util_pct FROM iteration_gpu_time
      WHERE NOT finding_reads_stored(run_p, it_p, every_p, stored)      -- (constants: its kernels' scan
        AND (run_p IS NULL OR run = run_p) AND (it_p IS NULL OR iteration = it_p)) g   -- reads those alone)
  USING (run, iteration);

-- iteration_graphs of the iterations a finding rule looks at (finding_iterations' run_p,
-- it_p, every_p): read from finding_stored when the rule reads the run's sums stored.
CREATE OR REPLACE MACRO finding_graphs(run_p, it_p, every_p := false, stored := false) AS TABLE
SELECT run, iteration, graph_of_kernels AS kernels, graph_kernels, graph_kernel_pct, graph_launches,
       graph_launch_call_ns AS launch_call_ns, graph_between_replays_ns AS between_replays_ns,
       graph_eager_kernels AS eager_kernels
FROM finding_stored(run_p, it_p, every_p := every_p, stored := stored) WHERE graph_of_kernels IS NOT NULL
UNION ALL
SELECT * FROM iteration_graphs
WHERE NOT finding_reads_stored(run_p, it_p, every_p, stored)
  AND (run_p IS NULL OR run = run_p) AND (it_p IS NULL OR iteration = it_p);

-- The evidence's "most:" text: the three names of the largest time in a list of
-- {name, ns} (kernel names cut to the function before its template or arguments),
-- each with its time in ms, largest first; NULL for an empty list.
CREATE OR REPLACE MACRO top_names_text(l) AS
    nullif(array_to_string(list_transform(
        list_slice(list_sort(list_transform(l, lambda x: {'ns': x.ns, 'name': x.name}), 'DESC'), 1, 3),
        lambda x: coalesce(nullif(regexp_extract(x.name, '(\w+)[<(]', 1), ''), left(x.name, 60))
             || ' (' || round(x.ns / 1e6, 2) || ' ms)'), '; '), '');

-- host_bound's sweep: per iteration of finding_windows(walked_only) with GPU activity that
-- has its launch call, the time within it with no GPU activity (kernel, memcpy, memset)
-- running on any stream and none launched and not yet started (starved_ns). Each activity
-- is pending from its launch (q) to its start (s) and busy to its end (e), clipped to the
-- iteration. Where every activity has q <= s <= e, that is the iteration less the union of
-- the [q, e) (one sort); elsewhere (a GPU clock ahead of the host's) the two counts are
-- swept over every boundary, as the rule first did (the same numbers where both apply).
CREATE OR REPLACE MACRO host_bound_starved(run_p, it_p, every_p := false, stored := false) AS TABLE
WITH it AS (
    SELECT * FROM finding_windows(run_p, it_p, every_p := every_p, stored := stored, walked_only := true)
), k AS (
    SELECT k.run, k.iteration, greatest(least(k.launch_end_ns, k.ts_ns), it.start_ns) AS q, k.ts_ns AS s,
           least(k.ts_ns + k.dur_ns, it.end_ns) AS e
    FROM kernels k JOIN it USING (run, iteration)
    WHERE k.ts_ns IS NOT NULL AND k.launch_end_ns IS NOT NULL
), kind AS (        -- per iteration with activity: whether the union stands for the two counts
    SELECT run, iteration, bool_and(q <= s AND s <= e) AS nested FROM k GROUP BY ALL
), covered AS (     -- the union's length: each interval adds what reaches beyond the ends before it
    SELECT run, iteration, sum(union_step_ns(q, e, prev_e)) AS covered_ns
    FROM (SELECT k.*, max(e) OVER (PARTITION BY run, iteration ORDER BY q, e ROWS BETWEEN UNBOUNDED PRECEDING
                                                                           AND 1 PRECEDING) AS prev_e
          FROM k JOIN kind USING (run, iteration) WHERE kind.nested)
    GROUP BY ALL
), kb AS (          -- the other iterations: every boundary
    SELECT k.* FROM k JOIN kind USING (run, iteration) WHERE NOT kind.nested
), ib AS (
    SELECT it.* FROM it JOIN kind USING (run, iteration) WHERE NOT kind.nested
), ev AS (       -- +1/-1: activity running (busy), activity launched and not started (pending)
    SELECT run, iteration, s AS t, 1 AS busy, 0 AS pend FROM kb UNION ALL
    SELECT run, iteration, e, -1, 0 FROM kb UNION ALL
    SELECT run, iteration, q, 0, 1 FROM kb UNION ALL
    SELECT run, iteration, s, 0, -1 FROM kb UNION ALL
    SELECT run, iteration, start_ns, 0, 0 FROM ib UNION ALL
    SELECT run, iteration, end_ns, 0, 0 FROM ib
), pts AS (
    SELECT run, iteration, t, sum(busy) AS busy, sum(pend) AS pend FROM ev GROUP BY ALL
), st AS (
    SELECT run, iteration, t,          -- (t is unique in its iteration: one window, one sort)
           sum(busy) OVER w AS busy, sum(pend) OVER w AS pend, lead(t) OVER w AS nt
    FROM pts WINDOW w AS (PARTITION BY run, iteration ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT it.run, it.iteration,
       coalesce(sum(st.nt - st.t) FILTER (st.busy = 0 AND st.pend = 0 AND st.t >= it.start_ns
                                           AND st.nt <= it.end_ns), 0) AS starved_ns
FROM ib it LEFT JOIN st USING (run, iteration)
GROUP BY it.run, it.iteration
UNION ALL
SELECT it.run, it.iteration, it.end_ns - it.start_ns - c.covered_ns
FROM it JOIN covered c USING (run, iteration);

-- tiny_kernels' sweep: per iteration of finding_windows(walked_only) with kernels that
-- have their launch calls, the kernels (n), those shorter than their launch call (tiny,
-- tiny_ns), all their time (all_ns), the median launch call and short kernel, the waits of
-- the short kernels' streams for their launches (waited_ns), and the GPU idle in those
-- waits merged over streams (lost_ns; NULL when none): where every activity of the
-- iteration has a duration, the waits' union with the activity less the activity's, in one
-- sort; elsewhere (an activity without its end) the merged waits joined with the islands
-- of gpu_busy_intervals, as the rule first did (the same numbers where both apply).
CREATE OR REPLACE MACRO tiny_kernel_sums(run_p, it_p, every_p := false, stored := false) AS TABLE
WITH it AS (
    SELECT * FROM finding_windows(run_p, it_p, every_p := every_p, stored := stored, walked_only := true)
), k AS (       -- with the stream's idle before it when its launch call started after the stream's
                -- previous kernel ended (idle_breakdown's waiting_on_host): the GPU waited for the launch
    SELECT k.run, k.iteration, k.ts_ns, k.dur_ns, k.launch_end_ns - k.launch_ts_ns AS launch_ns,
           is_graph_launch(k.launch_name) AS node,
           CASE WHEN k.launch_ts_ns > prev_end AND k.ts_ns > prev_end THEN k.ts_ns - prev_end ELSE 0 END AS waited_ns
    FROM (SELECT k.*, max(k.ts_ns + k.dur_ns) OVER (PARTITION BY k.run, k.iteration, k.stream ORDER BY k.ts_ns, k.kernel_id
                                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
          FROM kernels k JOIN it USING (run, iteration)
          WHERE k.kind = 'kernel' AND k.ts_ns IS NOT NULL) k
    WHERE k.launch_end_ns IS NOT NULL AND k.dur_ns IS NOT NULL
), waits AS (     -- the stretches a short kernel's stream waited for its launch call
    SELECT run, iteration, ts_ns - waited_ns AS s, ts_ns AS e FROM k WHERE NOT node AND dur_ns < launch_ns AND waited_ns > 0
), act AS (       -- all GPU activity (kernels, memcpy, memset) of the iterations with such waits
    SELECT a.run, a.iteration, a.ts_ns AS start_ns, a.ts_ns + a.dur_ns AS end_ns, a.kernel_id
    FROM kernels a JOIN (SELECT DISTINCT run, iteration FROM waits) USING (run, iteration)
    WHERE a.ts_ns IS NOT NULL
), plain AS (     -- iterations whose activity all has a duration (>= 0): the union of its intervals is
                  -- what gpu_busy_intervals' islands cover
    SELECT run, iteration, bool_and(coalesce(end_ns >= start_ns, false)) AS plain FROM act GROUP BY ALL
), u AS (         -- there, the GPU idle in the waits, |waits U activity| - |activity|, in one sort (each
                  -- interval adds what reaches beyond the ends before it, of all and of the activity)
    SELECT run, iteration,
           sum(union_step_ns(s, e, prev_all))
             - coalesce(sum(union_step_ns(s, e, prev_busy)) FILTER (busy), 0) AS lost_ns
    FROM (SELECT *, max(e) OVER w AS prev_all, max(e) FILTER (busy) OVER w AS prev_busy
          FROM (SELECT x.run, x.iteration, x.s, x.e, x.busy
                FROM (SELECT run, iteration, s, e, false AS busy FROM waits
                      UNION ALL SELECT run, iteration, start_ns, end_ns, true FROM act) x
                JOIN plain USING (run, iteration) WHERE plain.plain)
          WINDOW w AS (PARTITION BY run, iteration ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
    GROUP BY ALL
), act_other AS (  -- elsewhere the activity of those iterations
    SELECT a.* FROM act a JOIN plain USING (run, iteration) WHERE NOT plain.plain
), b AS (         -- its islands, those of gpu_busy_intervals (activity 'all') of those iterations only
    SELECT * FROM interval_islands('act_other')
), waits_other AS (   -- and their waits (no id: waits with one start and end are one island either way)
    SELECT run, iteration, s AS start_ns, e AS end_ns, 0 AS kernel_id
    FROM waits JOIN plain USING (run, iteration) WHERE NOT plain.plain
), wu AS (        -- merged over streams
    SELECT run, iteration, start_ns AS s, end_ns AS e FROM interval_islands('waits_other')
), lost AS (        -- of the merged waits, the time no GPU activity (kernel, memcpy, memset) ran
    SELECT wu.run, wu.iteration,
           any_value(wu.e - wu.s) - coalesce(sum(least(wu.e, b.end_ns) - greatest(wu.s, b.start_ns))
                                                     FILTER (b.start_ns IS NOT NULL), 0) AS lost_ns
    FROM (SELECT *, row_number() OVER () AS id FROM wu) wu
    LEFT JOIN b ON b.run = wu.run AND b.iteration = wu.iteration AND b.start_ns < wu.e AND b.end_ns > wu.s
    GROUP BY wu.run, wu.iteration, wu.id
), l AS (
    SELECT run, iteration, sum(lost_ns) AS lost_ns FROM lost GROUP BY ALL
    UNION ALL
    SELECT run, iteration, lost_ns FROM u
), g AS (
    SELECT run, iteration, count(*) AS n, count(*) FILTER (NOT node AND dur_ns < launch_ns) AS tiny,
           sum(dur_ns) FILTER (NOT node AND dur_ns < launch_ns) AS tiny_ns, sum(dur_ns) AS all_ns,
           median(launch_ns) FILTER (NOT node) AS launch_p50,
           median(dur_ns) FILTER (NOT node AND dur_ns < launch_ns) AS tiny_p50,
           coalesce(sum(waited_ns) FILTER (NOT node AND dur_ns < launch_ns), 0) AS waited_ns
    FROM k GROUP BY ALL
)
SELECT g.*, l.lost_ns FROM g LEFT JOIN l USING (run, iteration);

-- fusion_candidates' sweep: per iteration of finding_windows(walked_only) with kernels,
-- their launches and time, and the sequence of three short elementwise or reduction
-- kernels in a row on a stream that repeats most (a, b, c; NULL when none): its runs (n),
-- its kernels' time (ns) and its runs' spans (span_ns).
CREATE OR REPLACE MACRO fusion_sums(run_p, it_p, every_p := false, stored := false) AS TABLE
WITH it AS (
    SELECT * FROM finding_windows(run_p, it_p, every_p := every_p, stored := stored, walked_only := true)
), names AS (      -- the regular expression once per kernel name, not per kernel
    SELECT name, regexp_matches(name,
               '(?i)gemm|nvjet|xmma|cutlass|cublas|conv|implicit|wgrad|dgrad|fprop|nchw_?to_?nhwc|nhwc_?to_?nchw|nccl')
               AS unfusible
    FROM (SELECT DISTINCT name FROM kernels WHERE kind = 'kernel' AND (run_p IS NULL OR run = run_p)
                                              AND NOT finding_reads_stored(run_p, it_p, every_p, stored))
), k AS (
    SELECT k.run, k.iteration, k.stream, k.name, k.ts_ns, k.dur_ns,
           k.dur_ns < 20000 AND NOT n.unfusible AS fusible, k.kernel_id
    FROM kernels k JOIN it USING (run, iteration) LEFT JOIN names n ON n.name = k.name
    WHERE k.kind = 'kernel' AND k.dur_ns IS NOT NULL AND k.ts_ns IS NOT NULL
), tri AS (
    SELECT run, iteration, name AS a, lead(name, 1) OVER w AS b, lead(name, 2) OVER w AS c,
           dur_ns + lead(dur_ns, 1) OVER w + lead(dur_ns, 2) OVER w AS seq_ns,
           lead(ts_ns + dur_ns, 2) OVER w - ts_ns AS span_ns,
           fusible AND lead(fusible, 1) OVER w AND lead(fusible, 2) OVER w AS ok
    FROM k WINDOW w AS (PARTITION BY run, iteration, stream ORDER BY ts_ns, kernel_id)   -- (a run's kernel ids are unique)
), seqs AS (
    SELECT run, iteration, a, b, c, count(*) AS n, sum(seq_ns) AS ns, sum(span_ns) AS span_ns
    FROM tri WHERE ok AND NOT (a = b AND b = c)
    GROUP BY run, iteration, a, b, c
    QUALIFY row_number() OVER (PARTITION BY run, iteration ORDER BY count(*) DESC, sum(seq_ns) DESC, a, b, c) = 1
), tot AS (
    SELECT run, iteration, count(*) AS launches, sum(dur_ns) AS all_ns FROM k GROUP BY run, iteration
)
SELECT t.run, t.iteration, t.launches, t.all_ns, s.a, s.b, s.c, s.n, s.ns, s.span_ns
FROM tot t LEFT JOIN seqs s USING (run, iteration);

-- data_loader_wait's sweep: per iteration of finding_windows(walked_only) with a
-- DataLoader call (`enumerate(DataLoader)#...__next__`), the calls, their time within it
-- (len_ns) and the time in them no kernel of the iteration ran (idle_ns).
CREATE OR REPLACE MACRO data_loader_sums(run_p, it_p, every_p := false, stored := false) AS TABLE
WITH it AS (
    SELECT * FROM finding_windows(run_p, it_p, every_p := every_p, stored := stored, walked_only := true)
), dl AS (
    SELECT it.run, it.iteration, e.event_id, greatest(e.ts_ns, it.start_ns) AS s,
           least(e.ts_ns + e.dur_ns, it.end_ns) AS e
    FROM events e JOIN it ON e.run = it.run AND e.ts_ns < it.end_ns AND e.ts_ns + e.dur_ns > it.start_ns
    WHERE e.ph = 'X' AND e.name LIKE 'enumerate(DataLoader)%'
), dk AS (         -- the kernels of the iterations with a call
    SELECT k.run, k.iteration, k.ts_ns AS start_ns, k.ts_ns + k.dur_ns AS end_ns, k.kernel_id
    FROM kernels k JOIN (SELECT DISTINCT run, iteration FROM dl) USING (run, iteration)
    WHERE k.kind = 'kernel' AND k.ts_ns IS NOT NULL
), b AS (          -- kernel_busy_intervals of those iterations only: their islands
    SELECT * FROM interval_islands('dk')
), idle AS (        -- each DataLoader call minus the kernel busy intervals inside it
    SELECT dl.run, dl.iteration, dl.event_id, any_value(dl.e - dl.s) AS len,
           coalesce(sum(least(dl.e, b.end_ns) - greatest(dl.s, b.start_ns)) FILTER (b.start_ns IS NOT NULL), 0) AS busy
    FROM dl LEFT JOIN b
      ON b.run = dl.run AND b.iteration = dl.iteration AND b.start_ns < dl.e AND b.end_ns > dl.s
    GROUP BY dl.run, dl.iteration, dl.event_id
)
SELECT run, iteration, count(*) AS calls, sum(len) AS len_ns, sum(len - busy) AS idle_ns FROM idle GROUP BY ALL;

-- sync_in_step's sweep: per iteration of finding_windows(walked_only) with calls that
-- block the host until the GPU catches up inside the step marker, their number (n),
-- their time (ns), the GPU idle they caused (lost_ns) and the calls by name with their
-- counts (calls).
CREATE OR REPLACE MACRO sync_sums(run_p, it_p, every_p := false, stored := false) AS TABLE
WITH it AS (
    SELECT * FROM finding_windows(run_p, it_p, every_p := every_p, stored := stored, walked_only := true)
), s AS (
    SELECT it.run, it.iteration, e.name, e.ts_ns AS s0, e.ts_ns + e.dur_ns AS e1, e.dur_ns
    FROM events e JOIN it ON e.run = it.run AND e.ts_ns >= it.start_ns AND e.ts_ns < it.marker_end_ns
    WHERE e.ph = 'X' AND e.name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize',
                                     'cudaMemcpy', 'cuCtxSynchronize', 'cuStreamSynchronize',
                                     'cuEventSynchronize', 'cuMemcpy', 'cuMemcpyDtoH_v2', 'cuMemcpyHtoD_v2')
), upto AS (        -- no call's next activity starts after an activity at or after the last call's end
                    -- (per run; none when a run has none such launched in its iterations or the next
                    -- one): later activity is read by no call, and the latest end before a call does
                    -- not depend on it
    SELECT CASE WHEN count(n.ts_ns) = count(*) THEN max(n.ts_ns) END AS ts_ns
    FROM (SELECT run, max(e1) AS e1, min(iteration) AS lo, max(iteration) + 1 AS hi FROM s GROUP BY run) c
    LEFT JOIN LATERAL (SELECT min(k.ts_ns) AS ts_ns FROM kernels k
                       WHERE k.run = c.run AND k.iteration BETWEEN c.lo AND c.hi AND k.ts_ns >= c.e1
                         AND k.dur_ns IS NOT NULL AND k.ts_ns + k.dur_ns > (SELECT min(start_ns) FROM it)) n ON true
), a AS (           -- the run's GPU activity near the iterations (what ends before the first one
                    -- starts cannot reach a call inside it; the next activity within a minute, and
                    -- not after upto), with the latest end so far
    SELECT k.run, k.ts_ns, max(k.ts_ns + k.dur_ns) OVER (PARTITION BY k.run ORDER BY k.ts_ns, k.kernel_id
                                                          ROWS UNBOUNDED PRECEDING) AS last_end
    FROM kernels k
    WHERE k.ts_ns IS NOT NULL AND k.dur_ns IS NOT NULL AND k.run IN (SELECT run FROM it)
      AND NOT finding_reads_stored(run_p, it_p, every_p, stored)
      AND k.ts_ns + k.dur_ns > (SELECT min(start_ns) FROM it)
      AND k.ts_ns < (SELECT max(end_ns) FROM it) + 60000000000
      AND k.ts_ns <= coalesce((SELECT ts_ns FROM upto), k.ts_ns)
), c AS (           -- each call: the GPU idle it caused
    SELECT s.*, before.last_end, after.ts_ns AS next_start,
           CASE WHEN after.ts_ns IS NOT NULL       -- no activity after it: no cost seen
                THEN greatest(0, least(after.ts_ns - greatest(coalesce(before.last_end, s.s0), s.s0), s.dur_ns))
                END AS lost_ns
    FROM s
    ASOF LEFT JOIN a AS before ON before.run = s.run AND s.e1 > before.ts_ns
    ASOF LEFT JOIN a AS after ON after.run = s.run AND s.e1 <= after.ts_ns
)
SELECT run, iteration, sum(n) AS n, sum(dur_ns) AS ns, sum(lost_ns) AS lost_ns,
       string_agg(name || ' x' || n, ', ' ORDER BY n DESC, name) AS calls
FROM (SELECT run, iteration, name, count(*) AS n, sum(dur_ns) AS dur_ns, sum(coalesce(lost_ns, 0)) AS lost_ns
      FROM c GROUP BY ALL)
GROUP BY ALL;

-- layout_conversions' sweep: per iteration of finding_windows(walked_only) with kernels,
-- their time (all_ns), the NCHW<->NHWC conversion kernels' time (conv_ns; NULL when none),
-- the rank by time of the largest of them among the iteration's kernel names, and their
-- launches.
CREATE OR REPLACE MACRO layout_sums(run_p, it_p, every_p := false, stored := false) AS TABLE
WITH it AS (
    SELECT * FROM finding_windows(run_p, it_p, every_p := every_p, stored := stored, walked_only := true)
), names AS (      -- the regular expression once per kernel name, not per kernel
    SELECT name, is_layout_conversion(name) AS conversion
    FROM (SELECT DISTINCT name FROM kernels WHERE kind = 'kernel' AND (run_p IS NULL OR run = run_p)
                                              AND NOT finding_reads_stored(run_p, it_p, every_p, stored))
), k AS (
    SELECT k.run, k.iteration, k.name, k.dur_ns, n.conversion
    FROM kernels k JOIN it USING (run, iteration) LEFT JOIN names n ON n.name = k.name
    WHERE k.kind = 'kernel' AND k.dur_ns IS NOT NULL
), by_name AS (     -- each kernel name's time, to say where the conversions rank
    SELECT run, iteration, name, any_value(conversion) AS conversion, sum(dur_ns) AS ns,
           rank() OVER (PARTITION BY run, iteration ORDER BY sum(dur_ns) DESC) AS rank
    FROM k GROUP BY run, iteration, name
)
SELECT run, iteration, sum(ns) AS all_ns, sum(ns) FILTER (conversion) AS conv_ns,
       min(rank) FILTER (conversion) AS best_rank,
       (SELECT count(*) FROM k WHERE k.run = b.run AND k.iteration = b.iteration AND k.conversion) AS launches
FROM by_name b GROUP BY run, iteration;
