-- rule: energy_sources_disagree
-- description: The two measures of the iteration's energy disagree beyond the
--   sensors' accuracy: NVML's total-energy counter (interpolated between its
--   update points, power_counter_updates) and the integral of the power readings
--   (power_integral: instant power where the log has it), over energy_summary's
--   window. NVML states each within +/-5%, so more than 10% apart means neither
--   number measures this window: it is too short for the sensors (readings updated
--   every ~100 ms sample a load that changes faster). The evidence compares the two
--   over the whole log too: agreeing there, the sensors are sound and the window is
--   what is wrong. Value: |counter - integral| / counter over the window.
-- threshold: 10
-- unit: % of the counter's energy in the window
-- fires: above
-- severity: medium
-- next: energy_summary
-- requires:
--   report_energy_summary.energy_counter_j: a power log with the energy counter, aligned with the run
-- suggestion: Trust energy_counter_j over windows of several counter update periods (energy_summary
--   with iteration=all, or a start_ns/end_ns window over many steps) and divide by the steps; treat
--   energy_integrated_j of short windows as a rough figure.
WITH pr AS (
    SELECT e.run, e.iteration, e.power_run, e.gpu, e.window_ns, e.energy_counter_j, e.energy_integrated_j
    FROM report_energy_summary e
    WHERE ($run IS NULL OR e.run = $run) AND e.energy_counter_j > 0 AND e.energy_integrated_j IS NOT NULL
), span AS (
    SELECT u.run AS power_run, u.gpu, min(u.ts_ns) AS s, max(u.ts_ns) AS e,
           arg_min(u.energy_j, u.ts_ns) AS c0, arg_max(u.energy_j, u.ts_ns) AS c1, count(*) AS updates
    FROM power_counter_updates u WHERE u.run IN (SELECT power_run FROM pr) GROUP BY ALL
), integ AS (
    SELECT sp.*, energy_at(i0.cum_j, i0.ts_ns, i0.p_w, i0.next_ts, i0.next_p, sp.s) AS i0j, i0.power_field
    FROM span sp ASOF LEFT JOIN power_integral i0 ON i0.run = sp.power_run AND i0.gpu = sp.gpu AND sp.s >= i0.ts_ns
), whole AS (
    SELECT g.*, energy_at(i1.cum_j, i1.ts_ns, i1.p_w, i1.next_ts, i1.next_p, g.e) - g.i0j AS integral_j,
           g.c1 - g.c0 AS counter_j
    FROM integ g ASOF LEFT JOIN power_integral i1 ON i1.run = g.power_run AND i1.gpu = g.gpu AND g.e >= i1.ts_ns
)
SELECT pr.run, pr.iteration, 100.0 * abs(pr.energy_counter_j - pr.energy_integrated_j) / pr.energy_counter_j AS value,
       format('over the {:.1f} ms window of iteration {} the energy counter gives {:.2f} J and the integral of the {} power readings {:.2f} J: {:.1f}% apart (the sensors are within +/-5% each; the counter updates every {:.0f} ms)',
              pr.window_ns / 1e6, pr.iteration, pr.energy_counter_j, w.power_field, pr.energy_integrated_j,
              100.0 * abs(pr.energy_counter_j - pr.energy_integrated_j) / pr.energy_counter_j,
              p.counter_period_ns / 1e6)
       || CASE WHEN w.counter_j > 0 THEN
              format('; over the whole log ({:.2f} s, {} counter updates) they are {:.1f}% apart ({:.1f} J and {:.1f} J)',
                     (w.e - w.s) / 1e9, w.updates, 100.0 * abs(w.counter_j - w.integral_j) / w.counter_j,
                     w.counter_j, w.integral_j) ELSE '' END AS evidence
FROM pr LEFT JOIN whole w USING (power_run, gpu)
LEFT JOIN power_sensors p ON p.run = pr.power_run AND p.gpu = pr.gpu;
