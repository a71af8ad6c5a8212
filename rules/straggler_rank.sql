-- rule: straggler_rank
-- description: One rank arrives last at the collectives and the others wait for
--   it: straggler_ranks names it per iteration. Value: the wait it
--   caused as a share of the iteration.
-- threshold: 5
-- unit: % of the iteration
-- fires: above
-- severity: high
-- next: straggler_ranks
-- requires:
--   report_straggler_ranks.wait_caused_ns: collectives joined across the ranks of a job (straggler_ranks report)
--   runs.job: jobs of rank traces (tracedb ingest DIR)
-- suggestion: Look at that rank's trace (host_bound, data_loader_wait, its GPU's clocks and power):
--   uneven data, a slower host or a throttled GPU make a straggler.
SELECT r.run, s.iteration, 100.0 * s.wait_caused_ns / s.step_ns AS value,
       format('rank {} of job {} arrived last in {} of {} collectives; the others waited {:.2f} ms for it ({:.1f}% of the {:.2f} ms step, {:.1f}% of all skew)',
              s.rank, s.job, s.calls_last, s.calls, s.wait_caused_ns / 1e6, 100.0 * s.wait_caused_ns / s.step_ns,
              s.step_ns / 1e6, s.wait_share_pct) AS evidence
FROM report_straggler_ranks s JOIN runs r ON r.job = s.job AND r.rank = s.rank
WHERE s.step_ns > 0 AND ($run IS NULL OR r.run = $run);
