-- name: kernel_metrics
-- topic: ncu levels
-- description: One row per matched kernel of a trace run: the trace side
--   (correlation id, timing, stream, framework op, iteration), the ncu side
--   (report ID, name as ncu printed it), the match score, and the counters of
--   method.md sections 3 and 7 under stable names (ncu_kernel_metrics), with
--   the ncu counter that fed each. Reads the matched_kernels view.
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   ncu_run RUN = NULL: ncu run (all matched to `run` when absent)
--   min_score DOUBLE = 0: leave out pairs scored below this
-- columns:
--   run VARCHAR: trace run
--   ncu_run VARCHAR: ncu run
--   correlation BIGINT: the trace kernel's correlation id
--   ncu_id BIGINT: the ncu report's "ID" of the kernel
--   score DOUBLE: match score (0..1)
--   trace_name VARCHAR: kernel name in the trace
--   ncu_name VARCHAR: kernel name as ncu printed it
--   op_name VARCHAR: innermost framework op that launched it
--   iteration INTEGER: trace iteration
--   stream BIGINT: CUDA stream
--   ts_ns BIGINT: start in the trace, ns
--   dur_ns BIGINT: duration in the trace, ns
--   gpu_time_ns DOUBLE: duration under ncu (replayed), ns
--   smsp_cycles_elapsed DOUBLE: SMSP elapsed cycles, summed over SMSPs
--   smsp_cycles_active DOUBLE: SMSP cycles with a warp resident
--   smsp_issue_active DOUBLE: SMSP cycles that issued an instruction
--   smsp_inst_issued DOUBLE: warp instructions issued
--   tc_cycles_active DOUBLE: tensor pipe active cycles (SMSP cycles)
--   tc_inst DOUBLE: tensor pipe warp instructions
--   l1_hit_sectors_ld DOUBLE: L1 load hit sectors (32 B)
--   l2_hit_sectors_read DOUBLE: L2 read hit sectors
--   l2_hit_sectors_write DOUBLE: L2 write hit sectors
--   dram_sectors_read DOUBLE: DRAM sectors read
--   dram_sectors_write DOUBLE: DRAM sectors written
--   shared_wavefronts_ld DOUBLE: shared memory load wavefronts
--   shared_wavefronts_st DOUBLE: shared memory store wavefronts
--   tc_cycles_active_source VARCHAR: ncu counter behind tc_cycles_active
--   tc_inst_source VARCHAR: ncu counter behind tc_inst
-- requires:
--   matches: ncu kernels matched to the run (tracedb ingest REPORT --pair-with RUN, or tracedb match)
-- engines: duckdb, spark
SELECT run, ncu_run, correlation, ncu_id, round(score, 4) AS score, trace_name, ncu_name, op_name,
       iteration, stream, ts_ns, dur_ns, gpu_time_ns, smsp_cycles_elapsed, smsp_cycles_active,
       smsp_issue_active, smsp_inst_issued, tc_cycles_active, tc_inst, l1_hit_sectors_ld,
       l2_hit_sectors_read, l2_hit_sectors_write, dram_sectors_read, dram_sectors_write,
       shared_wavefronts_ld, shared_wavefronts_st, tc_cycles_active_source, tc_inst_source
FROM matched_kernels
WHERE ($run IS NULL OR run = $run) AND ($ncu_run IS NULL OR ncu_run = $ncu_run)
  AND score >= $min_score
ORDER BY run, ncu_run, ts_ns;
