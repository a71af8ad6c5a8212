-- rule: sensor_window_too_short
-- description: The energy of a window shorter than the power sensor's update
--   period is an interpolation, not a measurement (energy_summary's window vs
--   the update periods of the energy counter and the power reading,
--   power_sensors). Value: the window over the longer update period.
-- threshold: 1
-- unit: x the sensor update period
-- fires: below
-- severity: medium
-- next: energy_summary
-- requires:
--   report_energy_summary.window_ns: a power log aligned with the run (tracedb ingest LOG --pair-with RUN)
-- suggestion: Measure energy over many iterations (a window of several sensor periods: profile more
--   steps, or use energy_summary with start_ns/end_ns over a longer span) and divide by their number.
SELECT e.run, e.iteration,
       e.window_ns / greatest(coalesce(p.counter_period_ns, 0), coalesce(p.power_period_ns, 0)) AS value,
       format('the {:.1f} ms window of iteration {} is {:.2f}x the sensor update period ({:.0f} ms: energy counter {}, power reading {}); {} power samples inside it',
              e.window_ns / 1e6, e.iteration,
              e.window_ns / greatest(coalesce(p.counter_period_ns, 0), coalesce(p.power_period_ns, 0)),
              greatest(coalesce(p.counter_period_ns, 0), coalesce(p.power_period_ns, 0)) / 1e6,
              CASE WHEN p.counter_period_ns IS NULL THEN 'none' ELSE format('{:.0f} ms', p.counter_period_ns / 1e6) END,
              CASE WHEN p.power_period_ns IS NULL THEN 'none' ELSE format('{:.0f} ms', p.power_period_ns / 1e6) END,
              e.samples) AS evidence
FROM report_energy_summary e JOIN power_sensors p ON p.run = e.power_run AND p.gpu = e.gpu
WHERE ($run IS NULL OR e.run = $run)
  AND greatest(coalesce(p.counter_period_ns, 0), coalesce(p.power_period_ns, 0)) > 0;
