-- name: utilization_levels
-- description: Multi-level GPU utilization of an iteration (method.md section
--   3): total time, GPU kernel time and GPU utilization from the trace; SMSP
--   elapsed, active and issue cycles, tensor core active cycles and
--   instructions summed over the iteration's kernels from the matched ncu
--   report; the five levels relative to the kernels' SMSP elapsed cycles and
--   scaled to the whole iteration by GPU utilization (*_iter). Hopper's
--   warpgroup MMA (gmma) is counted with the other tensor ops (metric_sources
--   says how); levels that cannot be computed are NULL and note says why.
-- steady: run
-- parameters:
--   run VARCHAR = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (the steady one when absent)
--   batch_size INTEGER = NULL: samples per iteration, for samples_per_s
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   total_ns BIGINT: iteration duration, ns
--   kernel_busy_ns BIGINT: time with at least one kernel running (union over streams), ns
--   kernel_sum_ns BIGINT: plain sum of kernel durations, ns
--   gpu_util_pct DOUBLE: kernel_busy_ns / total_ns, %
--   gpu_event_sum_ns BIGINT: GPU kernel time as the seed paper aggregates it: durations of all GPU events (kernels, memcpy, memset) summed, ns
--   gpu_event_util_pct DOUBLE: gpu_event_sum_ns / total_ns, % (above 100 when GPU events overlap)
--   samples_per_s DOUBLE: batch_size / total time, samples/s
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
SELECT run, iteration, total_ns, kernel_busy_ns, kernel_sum_ns, round(gpu_util_pct, 2) AS gpu_util_pct,
       gpu_event_sum_ns, round(gpu_event_util_pct, 2) AS gpu_event_util_pct,
       CAST($batch_size AS DOUBLE) / (total_ns / 1e9) AS samples_per_s,
       ncu_run, matched_kernels, round(matched_time_pct, 2) AS matched_time_pct,
       smsp_cycles_elapsed, smsp_cycles_active, smsp_issue_cycles, tc_active_cycles, tc_inst,
       round(smsp_active_pct, 2) AS smsp_active_pct, round(issue_slot_pct, 2) AS issue_slot_pct,
       round(tc_active_pct, 3) AS tc_active_pct, round(tc_issue_pct, 3) AS tc_issue_pct,
       round(smsp_active_pct_iter, 2) AS smsp_active_pct_iter, round(issue_slot_pct_iter, 2) AS issue_slot_pct_iter,
       round(tc_active_pct_iter, 3) AS tc_active_pct_iter, round(tc_issue_pct_iter, 3) AS tc_issue_pct_iter,
       round(tc_issue_bound_pct, 3) AS tc_issue_bound_pct, round(tc_active_bound_pct, 3) AS tc_active_bound_pct,
       note
FROM iteration_utilization
WHERE ($run IS NULL OR run = $run)
  AND (iteration = $iteration OR ($iteration IS NULL AND steady))
ORDER BY run, iteration;
