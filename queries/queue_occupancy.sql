-- name: queue_occupancy
-- topic: TF queue
-- description: Nodes waiting in the TensorFlow eager scheduling queue over
--   time, as a step series: one row per change (a node entering at its
--   enqueue end, leaving at its dequeue start). Sync runs have no queue: they
--   give one row saying so.
-- parameters:
--   run RUN = NULL: TensorFlow trace run (all when absent)
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration holding ts_ns (NULL outside iterations)
--   ts_ns BIGINT: time of the change, ns (NULL for a sync run)
--   nodes_waiting BIGINT: nodes in the queue from ts_ns on (NULL for a sync run)
--   note VARCHAR: set for sync runs
-- requires:
--   eager_mode: TensorFlow eager execution events (EagerExecute, EagerKernelExecute)
WITH ch AS (
    SELECT run, least(enqueue_end_ns, dequeue_start_ns) AS t, 1 AS d FROM eager_nodes WHERE mode = 'async'
    UNION ALL
    SELECT run, dequeue_start_ns, -1 FROM eager_nodes WHERE mode = 'async'
), g AS (SELECT run, t, sum(d) AS d FROM ch GROUP BY run, t)
SELECT g.run, CASE WHEN g.t <= i.end_ns THEN i.iteration END AS iteration, g.t AS ts_ns,
       CAST(sum(g.d) OVER (PARTITION BY g.run ORDER BY g.t ROWS UNBOUNDED PRECEDING) AS BIGINT) AS nodes_waiting,
       NULL::VARCHAR AS note
FROM g ASOF LEFT JOIN iterations i ON i.run = g.run AND g.t >= i.start_ns
WHERE $run IS NULL OR g.run = $run
UNION ALL
SELECT run, NULL, NULL, NULL, 'sync mode: ops are enqueued and executed on the Python thread; there is no scheduling queue'
FROM eager_mode WHERE mode = 'sync' AND ($run IS NULL OR run = $run)
ORDER BY run, ts_ns;
