-- name: kernel_flops
-- topic: FLOPs
-- description: Hardware-counted FLOPs of each kernel: of a trace run with CUPTI
--   range-profiler counters (source cupti), or of an ncu run, matched to a
--   trace or not (source ncu). tensor_flops are the tensor-path math ops
--   (sm__ops_path_tensor_src_*; on Volta, HMMA instructions x 512);
--   fp64/fp32/fp16_flops the CUDA-core SASS add, mul and fma thread
--   instructions, an FMA counted twice. The counters come from the flop_* rows
--   of metric_sources. With a trace, the op and pass of the kernel.
-- parameters:
--   run RUN = NULL: the counters' run (trace run with CUPTI counters, or ncu run), or a trace run an ncu run is matched to (all when absent)
-- columns:
--   run VARCHAR: run holding the counters (trace run for cupti, ncu run for ncu)
--   source VARCHAR: cupti | ncu
--   kernel_id BIGINT: kernel id in that run
--   trace_run VARCHAR: trace run of the kernel (NULL: an ncu run matched to no trace)
--   trace_kernel_id BIGINT: the kernel in the trace run
--   iteration INTEGER: trace iteration
--   name VARCHAR: kernel name
--   op_name VARCHAR: framework op the kernel's work belongs to
--   pass VARCHAR: forward | backward | optimizer
--   tensor_flops DOUBLE: tensor-path FLOPs (NULL: not counted)
--   fp64_flops DOUBLE: CUDA-core fp64 FLOPs (NULL: not counted)
--   fp32_flops DOUBLE: CUDA-core fp32 FLOPs (NULL: not counted)
--   fp16_flops DOUBLE: CUDA-core fp16 FLOPs (NULL: not counted)
--   total_flops DOUBLE: the sum of those counted
--   counters VARCHAR: the counters used
-- requires:
--   counters: hardware counters (an ncu report, or a trace taken with the CUPTI range profiler)
-- engines: duckdb, spark
SELECT c.run, CASE WHEN m.trace_run = c.run THEN 'cupti' ELSE 'ncu' END AS source, c.kernel_id,
       m.trace_run, m.trace_kernel_id, t.iteration, k.name, o.op_name, o.pass,
       c.tensor_flops, c.fp64_flops, c.fp32_flops, c.fp16_flops,
       coalesce(c.tensor_flops, 0) + coalesce(c.fp64_flops, 0) + coalesce(c.fp32_flops, 0)
           + coalesce(c.fp16_flops, 0) AS total_flops,
       c.counters
FROM kernel_flop_counters c
JOIN kernels k ON k.run = c.run AND k.kernel_id = c.kernel_id
LEFT JOIN (SELECT trace_run, ncu_run, trace_kernel_id, ncu_kernel_id FROM (
               SELECT trace_run, ncu_run, trace_kernel_id, ncu_kernel_id,
                      row_number() OVER (PARTITION BY ncu_run, ncu_kernel_id
                                         ORDER BY CASE WHEN trace_run = ncu_run THEN 0 ELSE 1 END, trace_run) AS k
               FROM matches) x
           WHERE k = 1) m
  ON m.ncu_run = c.run AND m.ncu_kernel_id = c.kernel_id
LEFT JOIN kernels t ON t.run = m.trace_run AND t.kernel_id = m.trace_kernel_id
LEFT JOIN kernel_flop_ops o ON o.run = m.trace_run AND o.kernel_id = m.trace_kernel_id
WHERE $run IS NULL OR c.run = $run OR m.trace_run = $run
ORDER BY c.run, coalesce(k.seq, c.kernel_id), c.kernel_id;
