-- rule: straggler_rank
-- description: One rank arrives late at the collective that gates the step,
--   iteration after iteration, beyond the job's own noise (job_stragglers):
--   the others wait for it and the job's step is that much longer. Value: the
--   step time the job loses to it (the median over the iterations of its
--   lateness beyond the job's typical skew) as a share of the step.
-- threshold: 2
-- unit: % of the step
-- fires: above
-- severity: high
-- next: straggler_ranks
-- requires:
--   report_straggler_ranks.cost_ns: collectives joined across the ranks of a job (straggler_ranks report)
--   runs.job: jobs of rank traces (tracedb ingest DIR)
-- suggestion: Look at that rank's trace (host_bound, data_loader_wait, its GPU's clocks and power):
--   uneven data, a slower host or a throttled GPU make a straggler. The other ranks' exposed
--   communication and synchronizations are their wait for it: fix this rank first.
SELECT r.run, s.iteration, g.cost_pct AS value,
       format('rank {} of job {} arrives {:.2f} ms after the first rank at the collective that gates the step ({} of process group {}) in {} of {} iterations, against a typical skew of {:.2f} ms (deviation {:.2f} ms): the job loses {:.1f} ms ± {:.1f} ms a step to it ({:.1f}% of the {:.2f} ms step)',
              g.rank, g.job, g.lateness_ns / 1e6, s.gating_collective, s.gating_process_group, g.late_iterations,
              g.iterations, g.typical_skew_ns / 1e6, g.noise_ns / 1e6, g.cost_ns / 1e6, g.cost_err_ns / 1e6,
              g.cost_pct, g.step_ns / 1e6) AS evidence
FROM report_straggler_ranks s
JOIN job_stragglers g ON g.job = s.job AND g.rank = s.rank AND g.straggler
JOIN runs r ON r.job = s.job AND r.rank = s.rank
WHERE s.iteration IS NOT NULL AND ($run IS NULL OR r.run = $run);
