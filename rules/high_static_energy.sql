-- rule: high_static_energy
-- description: Most of the iteration's energy is the GPU's idle (static) power
--   drawn over the window, not work: the GPU is paid for while it waits. Value:
--   static_j over the integrated energy (energy_summary).
-- threshold: 50
-- unit: % of the energy
-- fires: above
-- severity: low
-- next: energy_summary
-- requires:
--   report_energy_summary.energy_integrated_j: a power log aligned with the run (tracedb ingest LOG --pair-with RUN)
-- suggestion: Raise GPU utilization (see host_bound, data_loader_wait) so the idle power is spread
--   over more samples; energy per sample falls with it.
SELECT run, iteration, 100.0 * static_j / energy_integrated_j AS value,
       format('{:.2f} J of the {:.2f} J of iteration {} ({:.1f}%) is idle power ({:.1f} W) over the {:.2f} ms window; mean power {:.1f} W',
              static_j, energy_integrated_j, iteration, 100.0 * static_j / energy_integrated_j, idle_power_w,
              window_ns / 1e6, mean_power_w) AS evidence
FROM report_energy_summary
WHERE energy_integrated_j > 0 AND ($run IS NULL OR run = $run);
