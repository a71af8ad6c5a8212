-- name: utilization_levels
-- topic: ncu levels
-- description: Multi-level GPU utilization of an iteration (method.md section
--   3): total time, GPU kernel time and GPU utilization from the trace; SMSP
--   elapsed, active and issue cycles, tensor core active cycles and
--   instructions summed over the iteration's kernels from the matched ncu
--   report; the five levels relative to the kernels' SMSP elapsed cycles and
--   scaled to the whole iteration by GPU utilization (*_iter). Hopper's
--   warpgroup MMA (gmma) is counted with the other tensor ops (metric_sources
--   says how); levels that cannot be computed are NULL and note says why.
-- steady: run
-- iteration_all: sql
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration VARCHAR = NULL: iteration number, or all (every iteration and a whole-trace row with iteration NULL: the iterations together, their times summed, so a GPU tail that runs into the next iteration counts in both, and the counters of all their matched kernels); the steady one when absent
--   batch_size INTEGER > 0 = NULL: samples per iteration, for samples_per_s (default: the batch size the run recorded, view run_batch_size)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration (NULL: the whole trace, with iteration=all)
--   total_ns BIGINT: iteration duration, ns
--   kernel_busy_ns BIGINT: time with at least one kernel running (union over streams), ns
--   kernel_sum_ns BIGINT: plain sum of kernel durations, ns
--   gpu_util_pct DOUBLE: kernel_busy_ns / total_ns, %
--   gpu_event_sum_ns BIGINT: GPU kernel time as the seed paper aggregates it: durations of all GPU events (kernels, memcpy, memset) summed, ns
--   gpu_event_util_pct DOUBLE: gpu_event_sum_ns / total_ns, % (above 100 when GPU events overlap)
--   samples_per_s DOUBLE: batch_size / total time (x the iterations in the whole-trace row), samples/s
--   ncu_run VARCHAR: ncu run whose counters are used
--   matched_kernels BIGINT: kernels of the iteration with counters
--   matched_time_pct DOUBLE: their share of the iteration's kernel time, %
--   smsp_cycles_elapsed DOUBLE: E, SMSP elapsed cycles summed over kernels and SMSPs, cycles
--   smsp_cycles_active DOUBLE: A, SMSP cycles with at least one warp resident, cycles
--   smsp_issue_cycles DOUBLE: I, SMSP cycles that issued an instruction, cycles
--   tc_active_cycles DOUBLE: C, tensor pipe active cycles (SMSP cycles), cycles
--   tc_inst DOUBLE: N, tensor pipe warp instructions, instructions
--   smsp_active_pct DOUBLE: A / E, %
--   issue_slot_pct DOUBLE: I / E, %
--   tc_active_pct DOUBLE: C / E, %
--   tc_issue_pct DOUBLE: N / E, %
--   smsp_active_pct_iter DOUBLE: gpu_util_pct x A / E, % of the iteration
--   issue_slot_pct_iter DOUBLE: gpu_util_pct x I / E, % of the iteration
--   tc_active_pct_iter DOUBLE: gpu_util_pct x C / E, % of the iteration
--   tc_issue_pct_iter DOUBLE: gpu_util_pct x N / E, % of the iteration
--   tc_issue_bound_pct DOUBLE: N / issued instructions, % (tensor instructions among all issued)
--   tc_active_bound_pct DOUBLE: C / A, % (tensor pipe active among SMSP active cycles)
--   note VARCHAR: why levels are NULL, coverage, and the counters used
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
WITH per AS (
    SELECT run, iteration, total_ns, kernel_busy_ns, kernel_sum_ns, gpu_util_pct, gpu_event_sum_ns,
           gpu_event_util_pct, ncu_run, matched_kernels, matched_ns, matched_time_pct, smsp_cycles_elapsed,
           smsp_cycles_active, smsp_issue_cycles, tc_active_cycles, tc_inst, inst_issued, smsp_active_pct,
           issue_slot_pct, tc_active_pct, tc_issue_pct, smsp_active_pct_iter, issue_slot_pct_iter, tc_active_pct_iter,
           tc_issue_pct_iter, tc_issue_bound_pct, tc_active_bound_pct, note
    FROM iteration_utilization
    WHERE ($run IS NULL OR run = $run)
      AND CASE WHEN $iteration = 'all' THEN true WHEN $iteration IS NULL THEN steady
           -- a CASE: DuckDB folds it once $iteration is bound, and pushes the iteration to the scans
           ELSE iteration = CAST($iteration AS INTEGER) END
), whole AS (       -- iteration=all: the iterations together (iteration NULL); a counter is
                    -- summed over the iterations with matched kernels, NULL unless each has it
    SELECT run, sum(total_ns) AS total_ns, sum(kernel_busy_ns) AS kernel_busy_ns, sum(kernel_sum_ns) AS kernel_sum_ns,
           100.0 * sum(kernel_busy_ns) / nullif(sum(total_ns), 0) AS g, sum(gpu_event_sum_ns) AS gpu_event_sum_ns,
           any_value(ncu_run) AS ncu_run, count(*) AS iterations,
           CAST(sum(matched_kernels) AS BIGINT) AS matched_kernels, sum(matched_ns) AS matched_ns,
           CASE WHEN count(smsp_cycles_elapsed) = count(*) FILTER (WHERE matched_kernels > 0) THEN sum(smsp_cycles_elapsed) END AS e,
           CASE WHEN count(smsp_cycles_active) = count(*) FILTER (WHERE matched_kernels > 0) THEN sum(smsp_cycles_active) END AS a,
           CASE WHEN count(smsp_issue_cycles) = count(*) FILTER (WHERE matched_kernels > 0) THEN sum(smsp_issue_cycles) END AS i,
           CASE WHEN count(inst_issued) = count(*) FILTER (WHERE matched_kernels > 0) THEN sum(inst_issued) END AS ii,
           CASE WHEN count(tc_active_cycles) = count(*) FILTER (WHERE matched_kernels > 0) THEN sum(tc_active_cycles) END AS tc,
           CASE WHEN count(tc_inst) = count(*) FILTER (WHERE matched_kernels > 0) THEN sum(tc_inst) END AS tn
    FROM per WHERE $iteration = 'all' GROUP BY run
), r AS (
    SELECT run, iteration, total_ns, kernel_busy_ns, kernel_sum_ns, gpu_util_pct, gpu_event_sum_ns,
           gpu_event_util_pct, ncu_run, matched_kernels, matched_time_pct, smsp_cycles_elapsed, smsp_cycles_active,
           smsp_issue_cycles, tc_active_cycles, tc_inst, smsp_active_pct, issue_slot_pct, tc_active_pct, tc_issue_pct,
           smsp_active_pct_iter, issue_slot_pct_iter, tc_active_pct_iter, tc_issue_pct_iter, tc_issue_bound_pct,
           tc_active_bound_pct, note, 1 AS iterations
    FROM per
    UNION ALL
    SELECT run, CAST(NULL AS INTEGER), CAST(total_ns AS BIGINT), CAST(kernel_busy_ns AS BIGINT), CAST(kernel_sum_ns AS BIGINT), g,
           CAST(gpu_event_sum_ns AS BIGINT), 100.0 * gpu_event_sum_ns / nullif(total_ns, 0), ncu_run, matched_kernels,
           100.0 * matched_ns / nullif(kernel_sum_ns, 0), e, a, i, tc, tn,
           100.0 * a / e, 100.0 * i / e, 100.0 * tc / e, 100.0 * tn / e,
           g * a / e, g * i / e, g * tc / e, g * tn / e,
           100.0 * tn / nullif(ii, 0), 100.0 * tc / nullif(a, 0),
           concat_ws('; ', 'every iteration (' || iterations || ') together',
               CASE WHEN ncu_run IS NULL THEN 'no ncu run matched to this trace run'
                    WHEN matched_kernels = 0 THEN 'no kernel of the iterations matched'
                    ELSE concat_ws('; ',
                         CASE WHEN e IS NULL OR a IS NULL OR i IS NULL OR tc IS NULL OR tn IS NULL
                              THEN 'some counters missing (see each iteration''s note)' END,
                         CASE WHEN 100.0 * matched_ns / nullif(kernel_sum_ns, 0) < 99
                              THEN 'counters cover ' || round(100.0 * matched_ns / nullif(kernel_sum_ns, 0), 1)
                                   || '% of kernel time: the levels are those kernels''' END,
                         'ncu ' || ncu_run) END),
           iterations
    FROM whole
)
SELECT run, iteration, total_ns, kernel_busy_ns, kernel_sum_ns, round(gpu_util_pct, 2) AS gpu_util_pct,
       gpu_event_sum_ns, round(gpu_event_util_pct, 2) AS gpu_event_util_pct,
       CAST(coalesce($batch_size, b.batch_size) AS DOUBLE) * iterations / (total_ns / 1e9) AS samples_per_s,
       ncu_run, matched_kernels, round(matched_time_pct, 2) AS matched_time_pct,
       smsp_cycles_elapsed, smsp_cycles_active, smsp_issue_cycles, tc_active_cycles, tc_inst,
       round(smsp_active_pct, 2) AS smsp_active_pct, round(issue_slot_pct, 2) AS issue_slot_pct,
       round(tc_active_pct, 3) AS tc_active_pct, round(tc_issue_pct, 3) AS tc_issue_pct,
       round(smsp_active_pct_iter, 2) AS smsp_active_pct_iter, round(issue_slot_pct_iter, 2) AS issue_slot_pct_iter,
       round(tc_active_pct_iter, 3) AS tc_active_pct_iter, round(tc_issue_pct_iter, 3) AS tc_issue_pct_iter,
       round(tc_issue_bound_pct, 3) AS tc_issue_bound_pct, round(tc_active_bound_pct, 3) AS tc_active_bound_pct,
       note
FROM r LEFT JOIN run_batch_size b USING (run)
ORDER BY run, iteration NULLS LAST;
