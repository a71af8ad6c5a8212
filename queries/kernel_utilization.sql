-- name: kernel_utilization
-- topic: ncu levels
-- description: One row per matched kernel of a trace run: name, framework op,
--   layer type (layer_rules), duration, and the kernel's own levels relative to
--   its SMSP elapsed cycles (the distributions behind utilization_levels).
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all matched ones when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   kernel_id BIGINT: trace kernel (event id)
--   ncu_id BIGINT: ncu report ID
--   name VARCHAR: kernel name in the trace
--   op_name VARCHAR: innermost framework op that launched it
--   layer_type VARCHAR: layer type by layer_rules
--   ts_ns BIGINT: start, ns
--   dur_ns BIGINT: duration in the trace, ns
--   smsp_active_pct DOUBLE: SMSP active / elapsed cycles, %
--   issue_slot_pct DOUBLE: issue / elapsed cycles, %
--   tc_active_pct DOUBLE: tensor pipe active / elapsed cycles, %
--   tc_issue_pct DOUBLE: tensor instructions / elapsed cycles, %
--   tc_issue_bound_pct DOUBLE: tensor instructions / issued instructions, % (N/I)
--   tc_active_bound_pct DOUBLE: tensor pipe active / SMSP active cycles, % (C/A)
--   score DOUBLE: match score
-- requires:
--   matches: ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)
-- engines: duckdb, spark
SELECT run, iteration, kernel_id, ncu_id, trace_name AS name, op_name, layer_type, ts_ns, dur_ns,
       round(smsp_active_pct, 3) AS smsp_active_pct, round(issue_slot_pct, 3) AS issue_slot_pct,
       round(tc_active_pct, 3) AS tc_active_pct, round(tc_issue_pct, 3) AS tc_issue_pct,
       round(tc_issue_bound_pct, 3) AS tc_issue_bound_pct, round(tc_active_bound_pct, 3) AS tc_active_bound_pct,
       round(score, 4) AS score
FROM kernel_levels
WHERE ($run IS NULL OR run = $run) AND ($iteration IS NULL OR iteration = $iteration)
ORDER BY run, ts_ns;
