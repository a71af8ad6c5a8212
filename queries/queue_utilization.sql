-- name: queue_utilization
-- topic: TF queue
-- description: Time of an iteration with the eager scheduling queue empty vs
--   non-empty, each split by what runs meanwhile, in priority order when
--   several do: GPU kernel, CPU kernel, dequeuing, memory transfer, else
--   waiting (view activity_segments). Sync runs have no queue: queue_state is
--   no_queue. The rows of an iteration add up to its duration.
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: TensorFlow trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   queue_state VARCHAR: empty | non_empty | no_queue (sync)
--   category VARCHAR: gpu_kernel | cpu_kernel | dequeuing | memory_transfer | waiting
--   dur_ns BIGINT: time, ns
--   share_pct DOUBLE: share of the iteration, %
-- requires:
--   eager_mode: TensorFlow eager execution events (EagerExecute, EagerKernelExecute)
-- engines: duckdb, spark
SELECT s.run, s.iteration,
       CASE WHEN m.mode = 'sync' THEN 'no_queue' WHEN s.queued > 0 THEN 'non_empty' ELSE 'empty' END AS queue_state,
       s.category, CAST(sum(s.dur_ns) AS BIGINT) AS dur_ns,
       round(100.0 * sum(s.dur_ns) / any_value(i.dur_ns), 3) AS share_pct
FROM activity_segments s JOIN eager_mode m USING (run) JOIN iterations i USING (run, iteration)
WHERE ($run IS NULL OR s.run = $run) AND ($iteration IS NULL OR s.iteration = $iteration)
GROUP BY ALL
ORDER BY s.run, s.iteration, queue_state, dur_ns DESC;
