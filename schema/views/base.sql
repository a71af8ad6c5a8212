-- includes:

-- Shared building blocks (macros and views) used by the derivation and by
-- the saved reports. They live in the database file, so the DuckDB CLI and
-- notebooks can use them too. Documented in docs/schema.md.

-- GPU activity kind of a trace category (current and old Kineto spellings); NULL if none.
CREATE OR REPLACE MACRO gpu_activity_kind(cat) AS
    CASE lower(cat)
        WHEN 'kernel' THEN 'kernel'
        WHEN 'gpu_memcpy' THEN 'memcpy' WHEN 'memcpy' THEN 'memcpy'
        WHEN 'gpu_memset' THEN 'memset' WHEN 'memset' THEN 'memset'
    END;

-- µs as JSON number text -> integer ns, exactly. The common "123.456" form is
-- read as an integer with the point removed; anything else goes through DECIMAL.
CREATE OR REPLACE MACRO us_text_to_ns(t) AS
    CASE WHEN t[-4] = '.' AND NOT contains(t, 'e') AND NOT contains(t, 'E') THEN TRY_CAST(replace(t, '.', '') AS BIGINT)
         ELSE CAST(round(TRY_CAST(t AS DECIMAL(38, 4)) * 1000) AS BIGINT) END;

-- µs as a double -> integer ns: the whole µs and the fraction apart, so the
-- fraction's rounding error (at most 2^-11 µs below 2^43 µs) never reaches the
-- ns: exact for a JSON number of at most 3 decimals below 2^43 µs, which is what
-- the fast load reads this way (ingest/trace.py sends the rest down the exact path).
-- NULL for NaN, Infinity and beyond 2^53 µs.
CREATE OR REPLACE MACRO us_double_to_ns(d) AS
    CASE WHEN abs(d) < 9007199254740992
         THEN CAST(floor(d) AS BIGINT) * 1000 + CAST(round((d - floor(d)) * 1000) AS BIGINT) END;

-- A correlation or external id too large for BIGINT (its JSON text, an integer
-- beyond 64 bits) -> a negative stand-in derived from that text, so the two
-- events that share it still link; NULL for anything else.
CREATE OR REPLACE MACRO id_stand_in(t) AS
    CASE WHEN regexp_full_match(t, '-?[0-9]{19,}') THEN -1 - CAST(hash(t) >> 2 AS BIGINT) END;

-- A correlation or external id's text `t`, cast to BIGINT as `n`, that names no
-- event: a fraction (DuckDB's cast rounds 1.5 to 2, another event's id), text that
-- is not a number, or a float too large for BIGINT (not an integer beyond 64 bits
-- written out: id_stand_in). Text DuckDB casts to an integer (hex 0x1e) stays.
CREATE OR REPLACE MACRO id_unusable(t, n) AS
    CASE WHEN n IS NULL THEN t IS NOT NULL AND id_stand_in(t) IS NULL
         WHEN contains(t, '.') OR contains(t, 'e') OR contains(t, 'E')
         THEN coalesce(TRY_CAST(t AS DOUBLE) <> n, false)
         ELSE false END;

-- A kernel that converts tensors between the NCHW and NHWC memory layouts
-- (cuDNN's nchwToNhwc / nhwcToNchw): a copy around a convolution, not the
-- convolution's math (layout_conversions counts it; no_tensor_cores leaves it out).
CREATE OR REPLACE MACRO is_layout_conversion(name) AS
    regexp_matches(name, '(?i)nchw_?to_?nhwc|nhwc_?to_?nchw|nchw2nhwc|nhwc2nchw');

-- Runtime or driver API call (the launch side of a correlation id).
CREATE OR REPLACE MACRO is_launch_category(cat) AS
    lower(cat) IN ('cuda_runtime', 'cuda_driver', 'runtime', 'driver');

-- Framework operator (PyTorch aten ops, old Kineto "Operator").
CREATE OR REPLACE MACRO is_framework_op_category(cat) AS
    lower(cat) IN ('cpu_op', 'operator');

-- A digest of the rows aggregated (an aggregate: r, each row's fields that count, as
-- one value), whatever their order: what stored totals carry of the rules or formulas
-- they were made under (layer_rules_digest, kernel_class_rules_digest,
-- flop_formulas_digest), so that they are read only while those are as they were.
CREATE OR REPLACE MACRO rows_digest(r) AS
    md5(coalesce(string_agg(CAST(r AS VARCHAR), chr(10) ORDER BY CAST(r AS VARCHAR)), ''));

-- What an interval [start_ns, end_ns) adds to the union of those before it in start order,
-- ns: its part past prev_end_ns, the latest end before it (NULL: none). Summed over a sort
-- of the intervals, the union's length without forming its islands.
CREATE OR REPLACE MACRO union_step_ns(start_ns, end_ns, prev_end_ns) AS
    greatest(0, end_ns - greatest(start_ns, coalesce(prev_end_ns, start_ns)));

-- interval_islands(rows): the islands of the intervals of rows (the name of a table, view
-- or CTE in scope with run, iteration, start_ns, end_ns, kernel_id): per run and
-- iteration, each maximal stretch of their union, as gpu_busy_intervals forms its own (by
-- start, end and id, an island where a start passes the ends before).
CREATE OR REPLACE MACRO interval_islands(rows) AS TABLE
SELECT run, iteration, min(start_ns) AS start_ns, max(end_ns) AS end_ns
FROM (SELECT *, sum(CASE WHEN start_ns > prev_end_ns THEN 1 ELSE 0 END) OVER (
                    PARTITION BY run, iteration ORDER BY start_ns, end_ns, kernel_id ROWS UNBOUNDED PRECEDING) AS island
      FROM (SELECT *, max(end_ns) OVER (PARTITION BY run, iteration ORDER BY start_ns, end_ns, kernel_id
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end_ns
            FROM query_table(rows)))
GROUP BY run, iteration, island;

-- The runs whose GPU time an ingest with --op-totals stored (kernel_iteration_totals,
-- their whole-trace row): iteration_gpu_time, run_kernel_busy, iteration_kernel_overlap,
-- system_metrics and transfers read their rows instead of sweeping their kernels.
--
-- @column run  trace run with a whole-trace row in kernel_iteration_totals
CREATE OR REPLACE VIEW kernel_stored_runs AS
SELECT DISTINCT run FROM kernel_iteration_totals WHERE iteration IS NULL;

-- gpu_activity_sweep_of(walked_only): the view gpu_activity_sweep (below); when walked_only,
-- of the runs not in kernel_stored_runs alone, the others left out at the kernels' scan
-- (a filter on the view's run does not reach it through the sorts).
CREATE OR REPLACE MACRO gpu_activity_sweep_of(walked_only) AS TABLE
WITH k AS (
    SELECT run, iteration, kind, ts_ns AS start_ns, ts_ns + dur_ns AS end_ns, kernel_id
    FROM kernels WHERE ts_ns IS NOT NULL AND iteration IS NOT NULL
      AND NOT (walked_only AND run IN (SELECT run FROM kernel_stored_runs))
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

-- GPU activity of each (run, iteration) by start, each with the latest end of
-- those before it: the sweep that the union of the intervals reads
-- (gpu_busy_intervals: an island starts where start_ns passes prev_end_ns);
-- iteration_gpu_time sums its length the same way (each interval adds what
-- reaches beyond prev_end_ns) in a sort of its own. Kernels alone (activity =
-- 'kernels') and all GPU activity: kernels, memcpy and memset (activity = 'all').
--
-- @column activity     'kernels': kernels alone; 'all': kernels, memcpy and memset
-- @column run          trace run
-- @column iteration    iteration the activity was launched in (kernels.iteration)
-- @column start_ns     start of the activity, ns
-- @column end_ns       end of the activity, ns
-- @column prev_end_ns  the latest end of the activities before it (by start, then end, then
--                      kernel_id) of its activity, run and iteration, ns; NULL for the first
-- @column kernel_id    the activity (kernels.kernel_id): the last sort key, so that the
--                      islands' sort puts activities with one start and end in this order too
CREATE OR REPLACE VIEW gpu_activity_sweep AS SELECT * FROM gpu_activity_sweep_of(false);

-- gpu_busy_intervals_of(walked_only): the view gpu_busy_intervals (below); when walked_only,
-- of the runs not in kernel_stored_runs alone (gpu_activity_sweep_of).
CREATE OR REPLACE MACRO gpu_busy_intervals_of(walked_only) AS TABLE
WITH islands AS (
    SELECT *, sum(CASE WHEN start_ns > prev_end_ns THEN 1 ELSE 0 END) OVER (
                  PARTITION BY activity, run, iteration ORDER BY start_ns, end_ns, kernel_id ROWS UNBOUNDED PRECEDING)
                  AS island
    FROM gpu_activity_sweep_of(walked_only)
)
SELECT activity, run, iteration, min(start_ns) AS start_ns, max(end_ns) AS end_ns, max(end_ns) - min(start_ns) AS dur_ns
FROM islands
GROUP BY activity, run, iteration, island;

-- Union of the GPU activity intervals of each (run, iteration) over all streams:
-- one row per maximal busy interval, for kernels alone (activity = 'kernels')
-- and for all GPU activity: kernels, memcpy and memset (activity = 'all').
-- Gaps-and-islands over gpu_activity_sweep.
--
-- @column activity   'kernels': the intervals of kernels alone; 'all': of kernels, memcpy and memset
-- @column run        trace run
-- @column iteration  iteration the activity was launched in (kernels.iteration)
-- @column start_ns   start of the busy interval (the earliest start of its activities), ns
-- @column end_ns     end of the busy interval (the latest end of its activities), ns
-- @column dur_ns     end_ns - start_ns, ns
CREATE OR REPLACE VIEW gpu_busy_intervals AS SELECT * FROM gpu_busy_intervals_of(false);

-- Union of the kernel intervals of each (run, iteration) over all streams
-- (METHOD.md section 3's K): the kernels' rows of gpu_busy_intervals.
--
-- @columns_from gpu_busy_intervals
CREATE OR REPLACE VIEW kernel_busy_intervals AS
SELECT run, iteration, start_ns, end_ns, dur_ns FROM gpu_busy_intervals WHERE activity = 'kernels';

-- Time with at least one kernel running of each trace run, its iterations' kernels
-- together (kernel_busy_intervals summed per run): the stored whole-trace row of a run
-- in kernel_stored_runs, the sweep of the others. flop_utilization's whole trace reads it.
--
-- @column run      trace run (one with kernels launched in an iteration)
-- @column busy_ns  kernel_busy_intervals' dur_ns summed over the run, ns
CREATE OR REPLACE VIEW run_kernel_busy AS
SELECT run, CAST(kernel_busy_ns AS HUGEINT) AS busy_ns FROM kernel_iteration_totals
WHERE iteration IS NULL AND kernel_busy_ns IS NOT NULL
UNION ALL
SELECT run, sum(dur_ns) FROM gpu_busy_intervals_of(true) WHERE activity = 'kernels' GROUP BY run;

-- The batch size each run recorded: its metadata's batch_size (a trace's
-- top-level member, which tracedb.capture writes, or the capture manifest's that
-- the ingest of its folder adds). Reports that give samples_per_s use it where
-- they are given no batch_size.
--
-- @column run          run
-- @column batch_size   samples per iteration the run recorded (NULL: none, or not a positive whole number)
CREATE OR REPLACE VIEW run_batch_size AS
SELECT run, CASE WHEN n > 0 AND n = floor(n) AND n < 2147483648 THEN CAST(n AS INTEGER) END AS batch_size
FROM (SELECT run, TRY_CAST(metadata->>'batch_size' AS DOUBLE) AS n FROM runs);

-- The steady iteration of each trace run: the first whose duration is within
-- 5% of the median of the iterations after it (the last one when none is).
--
-- @column run              trace run
-- @column iteration        iteration (iterations.iteration)
-- @column dur_ns           the iteration's duration (iterations.dur_ns), ns
-- @column median_after_ns  median duration of the run's iterations that start after
--                          this one, ns (the last iteration: its own dur_ns)
-- @column steady           true for the run's steady iteration, false for the others
CREATE OR REPLACE VIEW iteration_steadiness AS
WITH later AS (
    -- a window, not a self-join: 2,800 iterations took 1 s as a join, 0.01 s so
    SELECT run, iteration, dur_ns,
           coalesce(median(dur_ns) OVER (PARTITION BY run ORDER BY start_ns
                                         RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING),
                    dur_ns) AS median_after_ns
    FROM iterations
), flagged AS (
    SELECT *, abs(dur_ns - median_after_ns) <= 0.05 * median_after_ns AS stable FROM later
)
SELECT run, iteration, dur_ns, median_after_ns,
       iteration = (SELECT min(f2.iteration) FROM flagged f2
                    WHERE f2.run = flagged.run AND f2.stable) AS steady
FROM flagged;

-- Whether iteration_gpu_time reads a kernel of this run and iteration: always, unless
-- reports.run has set the DuckDB variable tracedb_gpu_time_iterations ({lo, hi, runs:
-- MAP of run -> iteration}) for a report that reads only one iteration of each run
-- (compare_runs: each run's steady one; windows.py). Its kernels are swept by
-- iteration, so the rows of those iterations come out the same; the other
-- iterations, and every iteration of a run without an entry, read as no GPU time.
-- lo and hi span every run's iteration: constants the kernels' scan skips row
-- groups with (a join with the steady flag cannot reach that scan: compare_runs
-- swept all 2,800 iterations of a 10 GB trace for one, 3.8 s).
CREATE OR REPLACE MACRO in_gpu_time_iteration(run, iteration) AS
    getvariable('tracedb_gpu_time_iterations') IS NULL
    OR (iteration BETWEEN getvariable('tracedb_gpu_time_iterations').lo AND getvariable('tracedb_gpu_time_iterations').hi
        AND iteration = getvariable('tracedb_gpu_time_iterations').runs[run]);

-- GPU time of each iteration (method.md section 3, first level): total time,
-- time with at least one kernel running (the union of kernel intervals over all
-- streams, kernel_busy_intervals), the plain sum of kernel durations, idle time,
-- GPU utilization and the steady flag; beside them the GPU time as the seed
-- paper aggregates it (all GPU events: kernels, memcpy and memset), as a plain
-- sum and as a union. gpu_utilization and iteration_utilization read it. The runs of
-- kernel_stored_runs are read from kernel_iteration_totals (stored at ingest with
-- --op-totals), the others swept.
--
-- @column run                 trace run
-- @column iteration           iteration (iterations.iteration)
-- @column steady              true for the run's steady iteration (iteration_steadiness)
-- @column total_ns            the iteration's duration (iterations.dur_ns), ns
-- @column kernel_busy_ns      time with at least one kernel launched in the iteration running,
--                             any stream (sum of its kernel_busy_intervals), ns
-- @column kernel_sum_ns       plain sum of the durations of the kernels launched in the
--                             iteration (overlapping kernels counted each), ns
-- @column gpu_event_sum_ns    plain sum of the durations of all GPU activity (kernels, memcpy,
--                             memset) launched in the iteration, ns
-- @column gpu_event_busy_ns   time with any GPU activity (kernels, memcpy, memset) launched in the
--                             iteration running (its union over streams), ns
-- @column kernels             number of kernels launched in the iteration
-- @column idle_ns             total_ns - kernel_busy_ns, ns
-- @column gpu_util_pct        100 * kernel_busy_ns / total_ns, %
-- @column gpu_event_util_pct  100 * gpu_event_sum_ns / total_ns, % (the seed paper's plain sum:
--                             may pass 100 when activity overlaps)
CREATE OR REPLACE VIEW iteration_gpu_time AS
WITH k AS (       -- the runs not stored at ingest (kernel_stored_runs): swept
    SELECT run, iteration, kind, ts_ns AS start_ns, ts_ns + dur_ns AS end_ns, kernel_id
    FROM kernels WHERE ts_ns IS NOT NULL AND iteration IS NOT NULL AND in_gpu_time_iteration(run, iteration)
      AND run NOT IN (SELECT run FROM kernel_stored_runs)
), busy AS (
    -- the union's length without forming its islands: each interval adds what reaches
    -- beyond the latest end before it (gpu_activity_sweep's prev_end_ns). Here in one
    -- sort for both activities: a kernel's latest earlier kernel end is the FILTERed
    -- max over the same order (gpu_activity_sweep's two sorts took 2.4-2.8 s on a 10 GB
    -- trace's 2.5 M kernels, this one 1.5-2.0 s; a list_reduce per iteration took 0.6 s,
    -- but 19 s where one iteration held them all: its steps are the longest list's length)
    SELECT run, iteration,
           sum(union_step_ns(start_ns, end_ns, prev_kernel_end_ns)) FILTER (kind = 'kernel') AS busy_ns,
           sum(union_step_ns(start_ns, end_ns, prev_end_ns)) AS all_busy_ns
    FROM (SELECT *, max(end_ns) FILTER (kind = 'kernel') OVER w AS prev_kernel_end_ns, max(end_ns) OVER w AS prev_end_ns
          FROM k
          WINDOW w AS (PARTITION BY run, iteration ORDER BY start_ns, end_ns, kernel_id
                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW))
    GROUP BY run, iteration
    UNION ALL       -- the stored runs' rows
    SELECT run, iteration, kernel_busy_ns, gpu_event_busy_ns FROM kernel_iteration_totals
    WHERE iteration IS NOT NULL AND in_gpu_time_iteration(run, iteration)
), ksum AS (
    SELECT run, iteration, sum(dur_ns) FILTER (kind = 'kernel') AS sum_ns, count(*) FILTER (kind = 'kernel') AS n,
           sum(dur_ns) AS all_sum_ns
    FROM kernels WHERE iteration IS NOT NULL AND in_gpu_time_iteration(run, iteration)
      AND run NOT IN (SELECT run FROM kernel_stored_runs)
    GROUP BY run, iteration
    UNION ALL
    SELECT run, iteration, kernel_sum_ns, kernels, gpu_event_sum_ns FROM kernel_iteration_totals
    WHERE iteration IS NOT NULL AND in_gpu_time_iteration(run, iteration)
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

-- The iteration of every timed event: GPU activity by the iteration it was
-- launched in, everything else by time (start within [start_ns, end_ns]).
-- A view rather than a stored column: an UPDATE of millions of event rows
-- would cost more than the rest of the ingest.
--
-- @column run        trace run
-- @column event_id   the event (events.event_id): every event with a start, but metadata (ph M)
-- @column iteration  GPU activity: the iteration it was launched in (kernels.iteration);
--                    other events: the iteration whose window (iterations.start_ns to end_ns)
--                    holds the event's start; NULL when none does
CREATE OR REPLACE VIEW event_iterations AS
SELECT e.run, e.event_id,
       CASE WHEN k.kernel_id IS NOT NULL THEN k.iteration
            WHEN e.ts_ns <= i.end_ns THEN i.iteration END AS iteration
FROM (SELECT run, event_id, ts_ns FROM events WHERE ph <> 'M' AND ts_ns IS NOT NULL) e
ASOF LEFT JOIN iterations i ON e.run = i.run AND e.ts_ns >= i.start_ns
LEFT JOIN kernels k ON k.run = e.run AND k.kernel_id = e.event_id AND k.ts_ns IS NOT NULL;
