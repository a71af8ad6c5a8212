-- rule: low_issue_efficiency
-- description: While kernels run, the SM sub-partitions issue an instruction in
--   few of their cycles (issue slot utilization I/E of utilization_levels): the
--   kernels stall on memory, latency or synchronization rather than compute.
--   Value: the GPU time of the matched kernels whose SMSPs issued in under 20% of
--   their elapsed cycles (kernel_utilization's issue_slot_pct), as a share of the
--   iteration: the time spent stalled, the most that fusing or retiling them can
--   win (a memory-bound kernel at full bandwidth stalls too, and cannot be made
--   faster). Graded by it: high from 10%, medium from 3%.
-- threshold: 5
-- unit: % of the iteration (GPU time in stalled kernels)
-- fires: above
-- severity: medium
-- next: utilization_levels
-- requires:
--   report_kernel_utilization.issue_slot_pct: ncu counters matched to the run (tracedb ingest REPORT --pair-with RUN)
-- suggestion: Look at the kernels with the most time and the lowest issue_slot_pct in top_kernels;
--   fuse memory-bound elementwise chains (torch.compile), raise occupancy with larger tiles/batches.
WITH k AS (
    SELECT run, iteration, name, dur_ns, issue_slot_pct, issue_slot_pct < 20 AS low
    FROM report_kernel_utilization
    WHERE issue_slot_pct IS NOT NULL AND ($run IS NULL OR run = $run) AND ($iteration IS NULL OR iteration = $iteration)
), by_name AS (
    SELECT run, iteration, name, sum(dur_ns) AS ns FROM k WHERE low GROUP BY ALL
), top AS (
    SELECT run, iteration, top_names_text(list({'name': name, 'ns': ns})) AS names FROM by_name GROUP BY ALL
), g AS (
    SELECT run, iteration, coalesce(sum(dur_ns) FILTER (low), 0) AS low_ns, count(*) FILTER (low) AS n_low,
           count(*) AS n, sum(dur_ns) AS all_ns
    FROM k GROUP BY ALL
)
SELECT g.run, g.iteration, 100.0 * g.low_ns / i.dur_ns AS value,
       format('{:.2f} ms ({} of {} matched kernels) ran with their SMSPs issuing in under 20% of their cycles: {:.2f}% of the {:.2f} ms iteration, {:.1f}% of the matched kernel time{}{}',
              g.low_ns / 1e6, g.n_low, g.n, 100.0 * g.low_ns / i.dur_ns, i.dur_ns / 1e6, 100.0 * g.low_ns / g.all_ns,
              coalesce('; over all of them SMSPs issued in ' || round(u.issue_slot_pct, 1) || '% of their cycles', ''),
              coalesce('; most: ' || top.names, '')) AS evidence,
       CASE WHEN 100.0 * g.low_ns / i.dur_ns >= 10 THEN 'high'
            WHEN 100.0 * g.low_ns / i.dur_ns >= 3 THEN 'medium' ELSE 'low' END AS severity
FROM g JOIN iterations i USING (run, iteration) LEFT JOIN top USING (run, iteration)
LEFT JOIN (SELECT run, iteration, issue_slot_pct FROM iteration_utilization) u USING (run, iteration)
WHERE i.dur_ns > 0;
