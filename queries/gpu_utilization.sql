-- name: gpu_utilization
-- topic: single GPU
-- description: GPU utilization per run and iteration (method.md section 3, high
--   level): the share of the iteration during which at least one kernel runs.
--   Kernel time is the union of the iteration's kernel intervals over all
--   streams (view kernel_busy_intervals); the plain sum is given beside it,
--   and the seed paper's GPU kernel time: all GPU events (kernels, memcpy,
--   memset), summed (gpu_event_sum_ns) and as a union (gpu_event_busy_ns).
--   `steady` marks the steady iteration: the first whose duration is within 5%
--   of the median of the iterations after it (view iteration_steadiness).
-- parameters:
--   run RUN = NULL: run to report on (all runs when absent)
--   batch_size INTEGER > 0 = NULL: samples per iteration; gives samples_per_s (default: the batch size the run recorded, view run_batch_size)
-- columns:
--   run VARCHAR: run name
--   iteration INTEGER: step number
--   total_ns BIGINT: iteration duration (marker start to later of marker end and last GPU activity end), ns
--   kernel_busy_ns BIGINT: time with at least one kernel running, ns
--   kernel_sum_ns BIGINT: plain sum of kernel durations, ns
--   gpu_event_sum_ns BIGINT: durations of all GPU events (kernels, memcpy, memset) summed, ns
--   gpu_event_busy_ns BIGINT: time with at least one GPU event running (union), ns
--   gpu_event_util_pct DOUBLE: 100 * gpu_event_sum_ns / total_ns, % (the seed's GPU utilization; above 100 when events overlap)
--   kernels BIGINT: number of kernels launched in the iteration
--   idle_ns BIGINT: total_ns - kernel_busy_ns, ns
--   gpu_util_pct DOUBLE: 100 * kernel_busy_ns / total_ns, %
--   steady BOOLEAN: true on the run's steady iteration
--   samples_per_s DOUBLE: batch_size / total time, samples/s (NULL without a batch size)
-- requires:
--   iterations: iterations (step markers: ProfilerStep#N, step_num)
-- engines: duckdb, spark
SELECT run, iteration, total_ns, kernel_busy_ns, kernel_sum_ns, gpu_event_sum_ns, gpu_event_busy_ns,
       gpu_event_util_pct, kernels, idle_ns, gpu_util_pct, steady,
       CAST(coalesce($batch_size, b.batch_size) AS DOUBLE) / (total_ns / 1e9) AS samples_per_s
FROM iteration_gpu_time LEFT JOIN run_batch_size b USING (run)
WHERE $run IS NULL OR run = $run
ORDER BY run, iteration;
