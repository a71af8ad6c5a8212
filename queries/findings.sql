-- name: findings
-- topic: single GPU
-- description: What is wrong with a run, and the numbers that show it: one row
--   per finding of the rules in rules/ (one SQL file each, with a threshold;
--   listed in docs/reports.md), worst first, with the evidence (numbers with
--   units), what to try, and the report to read next. Rules whose data the
--   database lacks (no ncu report, no power log, a single rank) are listed with
--   severity skipped and what they need, never evaluated on a guess;
--   show=all adds the rules that passed (severity ok). A rule's value is what the
--   GPU loses to its cause (idle caused, or the GPU time the cause takes) as a share
--   of the iteration, and its severity follows that value; rules about memory or
--   energy say their own unit. Evidence read from ncu counters of a pairing kept by
--   --force starts with "[FORCED pairing: ...]". With iteration=all the rules that
--   sweep kernels or events read a run's per-iteration sums where an ingest with
--   --op-totals stored them (finding_iteration_totals: the same sums, swept once);
--   other runs are swept. `tracedb advise` prints it.
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration, each rule evaluated once over all of them; a finding is about a step, so no whole-trace row); the steady one when absent
--   thresholds VARCHAR = NULL: RULE=VALUE pairs, comma-separated, replacing the rules' default thresholds
--   show VARCHAR = 'findings': one of findings | all: findings and skipped rules, or every rule checked
-- columns:
--   run VARCHAR: trace run (NULL for a rule skipped over all runs)
--   iteration INTEGER: iteration the rule looked at
--   rule VARCHAR: rule id (rules/RULE.sql)
--   severity VARCHAR: high | medium | low | skipped (data absent) | ok (checked, not fired)
--   value DOUBLE: the rule's measured value, in unit
--   threshold DOUBLE: threshold it was compared with, in unit
--   unit VARCHAR: unit of value and threshold
--   evidence VARCHAR: the numbers behind it, with units (for skipped rules: what they need)
--   suggestion VARCHAR: what to try
--   next_report VARCHAR: the report to read next
-- requires:
--   runs: ingested runs (tracedb ingest FILE --db DB)
-- prepared_by: advise
SELECT run, iteration, rule, severity, value, threshold, unit, evidence, suggestion, next_report
FROM _findings
WHERE ($show = 'all' OR severity <> 'ok')
  AND ($run IS NULL OR run IS NULL OR run = $run)
ORDER BY ord;
