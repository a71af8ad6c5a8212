-- rule: low_issue_efficiency
-- description: While kernels run, the SM sub-partitions issue an instruction in
--   few of their cycles (issue slot utilization I/E of utilization_levels): the
--   kernels stall on memory, latency or synchronization rather than compute.
--   Value: issue slots used over the kernels' elapsed cycles.
-- threshold: 20
-- unit: % of SMSP cycles
-- fires: below
-- severity: medium
-- next: utilization_levels
-- requires:
--   report_utilization_levels.issue_slot_pct: ncu counters matched to the run (tracedb ingest REPORT --pair-with RUN)
-- suggestion: Look at the kernels with the most time and the lowest issue_slot_pct in top_kernels;
--   fuse memory-bound elementwise chains (torch.compile), raise occupancy with larger tiles/batches.
SELECT run, iteration, issue_slot_pct AS value,
       format('SMSPs issued in {:.1f}% of their cycles while kernels ran (SMSP active {:.1f}%, tensor pipes active {:.2f}%), over {} matched kernels covering {:.1f}% of kernel time',
              issue_slot_pct, smsp_active_pct, tc_active_pct, matched_kernels, matched_time_pct) AS evidence
FROM report_utilization_levels
WHERE issue_slot_pct IS NOT NULL AND ($run IS NULL OR run = $run);
