-- rule: unmatched_kernels
-- description: Trace kernels without ncu counters: the counter-based levels
--   (utilization_levels, kernel_utilization) describe only the matched part of
--   the iteration, and a report paired with the wrong run matches little.
--   Value: share of the matched iteration's kernel time without a partner.
-- threshold: 5
-- unit: % of kernel time
-- fires: above
-- severity: medium
-- next: match_quality
-- requires:
--   report_match_quality.time_covered_pct: an ncu report matched to the run (tracedb ingest REPORT --pair-with RUN)
-- suggestion: Profile the same step of the same workload with ncu (same model, batch and precision),
--   pair it with --pair-with, and check match_quality; kernels ncu skipped (--kernel-name filters,
--   -c limits) stay unmatched.
SELECT run, iteration, 100.0 - time_covered_pct AS value,
       format('{} of {} trace kernels and {} of {} kernels of ncu run {} have no partner; the matched ones cover {:.1f}% of the kernel time',
              unmatched_trace, trace_kernels, unmatched_ncu, ncu_kernels, ncu_run, time_covered_pct) AS evidence
FROM report_match_quality
WHERE time_covered_pct IS NOT NULL AND ($run IS NULL OR run = $run);
