-- name: energy_summary
-- topic: energy
-- description: Energy of an iteration (or of any window) from the power log
--   paired with the trace (method.md section 6): the energy counter's delta and
--   the integral of power over the window (both, and their difference), idle
--   power, static energy (idle power x duration), dynamic energy (integrated -
--   static) and mean power. The counter is interpolated between its update
--   points (power_counter_updates: it steps every ~100 ms however often it is
--   read). note warns when the window is shorter than the sensors' update period
--   and when counter and integral are more than 10% apart (the sensors' +/-5%
--   each), and says how the log was aligned with the trace.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all with a power log when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: from the first iteration's start to the last one's end); the steady one when absent
--   start_ns BIGINT = NULL: window start on the trace's timeline, ns (with end_ns, instead of an iteration)
--   end_ns BIGINT = NULL: window end, ns
--   power_run RUN = NULL: power log to use when the trace has several
--   gpu INTEGER = NULL: GPU index in the log (default: the trace run's own GPU, view run_gpu, when the log has it, else the lowest)
--   idle_power_w DOUBLE >= 0 = NULL: idle power to use instead of the log's
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL for a start_ns/end_ns window, and for the whole trace with iteration=all)
--   power_run VARCHAR: power log used
--   gpu INTEGER: GPU index
--   window_ns BIGINT: window duration, ns
--   energy_counter_j DOUBLE: NVML total-energy counter delta over the window (interpolated between the counter's update points), J
--   energy_integrated_j DOUBLE: integral of power over the window, J
--   difference_j DOUBLE: energy_counter_j - energy_integrated_j, J
--   idle_power_w DOUBLE: idle (static) power used, W
--   static_j DOUBLE: idle_power_w x window, J
--   dynamic_j DOUBLE: energy_integrated_j - static_j, J
--   mean_power_w DOUBLE: energy_integrated_j / window, W
--   samples BIGINT: power samples inside the window (those with a power)
--   note VARCHAR: alignment, idle power source, and warnings
-- requires:
--   trace_power_pairs: a power log aligned with the run (tracedb ingest LOG --pair-with RUN)
WITH window_checked AS (
    -- one end of a window alone was ignored (end_ns) or gave no energy (start_ns) without a word
    SELECT CASE WHEN ($start_ns IS NULL) <> ($end_ns IS NULL)
                    THEN error('start_ns and end_ns go together: give both (a window) or neither')
                WHEN $end_ns <= $start_ns THEN error(format('end_ns {} is not after start_ns {}', $end_ns, $start_ns))
                ELSE true END AS ok
), win AS (
    SELECT run, iteration, 'iteration' AS label, start_ns AS s, end_ns AS e
    FROM iteration_gpu_time JOIN iterations USING (run, iteration)
    WHERE $start_ns IS NULL AND ($run IS NULL OR run = $run) AND (SELECT ok FROM window_checked)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
    UNION ALL       -- iteration=all: the whole trace, first iteration start to last iteration end
    SELECT run, NULL, 'trace', min(start_ns), max(end_ns)
    FROM iterations
    WHERE $start_ns IS NULL AND $iteration = 'all' AND ($run IS NULL OR run = $run)
      AND run IN (SELECT run FROM iteration_gpu_time)
    GROUP BY run
    UNION ALL
    SELECT run, NULL, 'window', $start_ns, $end_ns FROM runs
    WHERE $start_ns IS NOT NULL AND kind = 'trace' AND ($run IS NULL OR run = $run) AND (SELECT ok FROM window_checked)
), en AS (
    SELECT * FROM energy_of_windows('win', $power_run, $gpu)
), n AS (
    SELECT en.run, en.label, en.s, en.e, count(coalesce(p.instant_power_w, p.power_w, p.average_power_w)) AS samples
    FROM en LEFT JOIN power p ON p.run = en.power_run AND p.gpu = en.gpu AND p.ts_ns BETWEEN en.ps AND en.pe
    GROUP BY en.run, en.label, en.s, en.e
)
SELECT run, iteration, power_run, gpu, e - s AS window_ns,
       energy_counter_j, energy_integrated_j, energy_counter_j - energy_integrated_j AS difference_j,
       coalesce($idle_power_w, idle_power_w) AS idle_power_w,
       coalesce($idle_power_w, idle_power_w) * (e - s) / 1e9 AS static_j,
       energy_integrated_j - coalesce($idle_power_w, idle_power_w) * (e - s) / 1e9 AS dynamic_j,
       energy_integrated_j / ((e - s) / 1e9) AS mean_power_w,
       samples,
       concat_ws('; ',
         CASE WHEN energy_integrated_j IS NULL THEN 'the window is not inside the power log' END,
         CASE WHEN counter_period_ns IS NULL THEN 'no energy counter in this log' END,
         CASE WHEN e - s < counter_period_ns THEN 'window (' || round((e - s) / 1e6, 1)
              || ' ms) is shorter than the energy counter''s update period (' || CAST(round(counter_period_ns / 1e6) AS BIGINT)
              || ' ms): repeat the iteration or lengthen the window before trusting energy_counter_j' END,
         CASE WHEN abs(energy_counter_j - energy_integrated_j) > 0.1 * energy_counter_j
              THEN 'the energy counter and the power integral are ' || round(100 * abs(energy_counter_j - energy_integrated_j) / energy_counter_j)
              || '% apart, beyond the sensors'' +/-5% each: neither measures this window (too short for sensors that update every '
              || CAST(round(greatest(coalesce(counter_period_ns, 0), coalesce(power_period_ns, 0)) / 1e6) AS BIGINT)
              || ' ms); use iteration=all or a window of many steps' END,
         CASE WHEN e - s < power_period_ns THEN 'window is shorter than the power reading''s update period ('
              || CAST(round(power_period_ns / 1e6) AS BIGINT) || ' ms): the integral interpolates between readings' END,
         'aligned: ' || method || ' (' || alignment || ')',
         'idle power: ' || CASE WHEN $idle_power_w IS NOT NULL THEN 'given' ELSE idle_source END) AS note
FROM en JOIN n USING (run, label, s, e)
ORDER BY run, iteration NULLS LAST, s;
