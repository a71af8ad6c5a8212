-- name: eager_phase_stats
-- topic: TF queue
-- description: Distribution of each eager execution phase over the op nodes
--   of a run (eager_phases): min, mean, median, 95th percentile and max of
--   enqueue, queue wait, dequeue, CPU and GPU execution time.
-- parameters:
--   run RUN = NULL: TensorFlow trace run (all when absent)
-- columns:
--   run VARCHAR: trace run
--   mode VARCHAR: async | sync
--   phase VARCHAR: enqueue | queue_wait | dequeue | cpu_exec | gpu_exec
--   nodes BIGINT: op nodes with a value
--   min_ns BIGINT: minimum, ns
--   mean_ns DOUBLE: mean, ns
--   p50_ns DOUBLE: median, ns
--   p95_ns DOUBLE: 95th percentile, ns
--   max_ns BIGINT: maximum, ns
-- requires:
--   eager_mode: TensorFlow eager execution events (EagerExecute, EagerKernelExecute)
WITH l AS (
    UNPIVOT (SELECT run, mode, enqueue_ns AS enqueue, queue_wait_ns AS queue_wait, dequeue_ns AS dequeue,
                    cpu_exec_ns AS cpu_exec, gpu_exec_ns AS gpu_exec FROM eager_nodes
             WHERE $run IS NULL OR run = $run)
    ON enqueue, queue_wait, dequeue, cpu_exec, gpu_exec INTO NAME phase VALUE ns
)
SELECT run, mode, phase, count(ns) AS nodes, CAST(min(ns) AS BIGINT) AS min_ns, round(avg(ns), 1) AS mean_ns,
       quantile_cont(ns, 0.5) AS p50_ns, quantile_cont(ns, 0.95) AS p95_ns, CAST(max(ns) AS BIGINT) AS max_ns
FROM l GROUP BY run, mode, phase
ORDER BY run, CASE phase WHEN 'enqueue' THEN 1 WHEN 'queue_wait' THEN 2 WHEN 'dequeue' THEN 3
                         WHEN 'cpu_exec' THEN 4 ELSE 5 END;
