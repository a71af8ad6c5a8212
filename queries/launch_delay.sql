-- name: launch_delay
-- topic: single GPU
-- description: CUDA launch delay: kernel start minus the end of the runtime
--   or driver call that launched it (cudaLaunchKernel, cuLaunchKernel[Ex],
--   cudaGraphLaunch ... whatever call carries the correlation id), per
--   kernel, or its distribution per launch call (by=launch). A CUDA graph
--   launch (cudaGraphLaunch, cuGraphLaunch: graph_launches) counts once, by its
--   first node: its other nodes wait for their place in the graph, not for the
--   launch, so they have no launch delay of their own and are left out.
-- iteration_all: absent
-- parameters:
--   run RUN = NULL: trace run (all when absent)
--   iteration INTEGER = NULL: iteration (all when absent)
--   by VARCHAR = 'kernel': one of kernel | launch: a row per kernel, within each iteration in the order of the trace file (kernel_id, not start time), or per launch call name
-- columns:
--   run VARCHAR: trace run
--   iteration INTEGER: iteration
--   launch_name VARCHAR: the launching call
--   kernel_id BIGINT: kernel (NULL when by=launch)
--   name VARCHAR: kernel name (NULL when by=launch)
--   stream BIGINT: stream (NULL when by=launch)
--   kernels BIGINT: kernels in the row (a graph launch: its first node only)
--   delay_ns BIGINT: kernel start - launch call end, ns (median when by=launch)
--   mean_ns DOUBLE: mean delay, ns
--   p95_ns DOUBLE: 95th percentile of the delay, ns
--   max_ns BIGINT: largest delay, ns
-- requires:
--   kernels: GPU kernels
-- engines: duckdb, spark
WITH gf AS (         -- the first node of each graph launch, as graph_launches has it, in plain
                    -- SQL on kernels (Spark runs this report too, on lakes with no graph)
    SELECT run, launch_event_id, min(ts_ns) AS first_ns FROM kernels
    WHERE coalesce(lower(launch_name) LIKE '%graphlaunch%', false) AND ts_ns IS NOT NULL
      AND launch_event_id IS NOT NULL AND ($run IS NULL OR run = $run)
    GROUP BY run, launch_event_id
), g AS (
    SELECT k.run, min(k.kernel_id) AS first_node_kernel_id
    FROM kernels k JOIN gf ON gf.run = k.run AND gf.launch_event_id = k.launch_event_id AND k.ts_ns = gf.first_ns
    GROUP BY k.run, k.launch_event_id
), k AS (
    SELECT k.run, k.iteration, k.launch_name, k.kernel_id, k.name, k.stream, k.ts_ns - k.launch_end_ns AS d
    FROM kernels k LEFT JOIN g ON g.run = k.run AND g.first_node_kernel_id = k.kernel_id
    WHERE k.launch_end_ns IS NOT NULL AND k.ts_ns IS NOT NULL
      AND ($run IS NULL OR k.run = $run) AND ($iteration IS NULL OR k.iteration = $iteration)
      AND (NOT coalesce(lower(k.launch_name) LIKE '%graphlaunch%', false) OR g.first_node_kernel_id IS NOT NULL)
)
SELECT run, iteration, launch_name, kernel_id, name, stream, 1 AS kernels, d AS delay_ns,
       d AS mean_ns, d AS p95_ns, d AS max_ns
FROM k WHERE $by = 'kernel'
UNION ALL
SELECT run, iteration, launch_name, NULL, NULL, NULL, count(*), CAST(median(d) AS BIGINT), round(avg(d), 1),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY d), max(d)
FROM k WHERE $by = 'launch' GROUP BY run, iteration, launch_name
-- by=kernel rows in the trace file's order (kernel_id: an integer key, where the launch
-- call's name made the sort of 2.5 M kernels twice as long); by=launch rows by call name
ORDER BY run, iteration, kernel_id, launch_name;
