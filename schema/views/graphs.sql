-- includes:

-- CUDA graphs as a shape of their own: a graph launch (cudaGraphLaunch,
-- cuGraphLaunch, XLA's command buffers: `cuGraphLaunch (CudaGraph:N)`) runs many
-- nodes under one correlation id, so per-kernel measures that compare a kernel with
-- its own launch call (launch delay, kernels shorter than their launch) do not
-- apply to its nodes. Documented in docs/schema.md.

-- Whether a launch call's name is a CUDA graph launch.
CREATE OR REPLACE MACRO is_graph_launch(launch_name) AS
    coalesce(contains(lower(launch_name), 'graphlaunch'), false);

-- One row per CUDA graph launch seen in a trace, with its nodes (the GPU activity
-- that carries the launch's correlation id).
--
-- @column run                  trace run
-- @column launch_event_id      the graph launch call (events.event_id)
-- @column launch_name          its name (cudaGraphLaunch, cuGraphLaunch (CudaGraph:6) ...)
-- @column iteration            iteration of the launch (kernels.iteration)
-- @column launch_ts_ns         start of the launch call, ns
-- @column launch_end_ns        end of the launch call, ns
-- @column launch_call_ns       the launch call's own host time, ns
-- @column nodes                GPU activities (kernels, memcpy, memset) the launch ran
-- @column kernel_nodes         of those, kernels
-- @column first_node_kernel_id the node that started first (kernels.kernel_id)
-- @column first_node_ns        start of the first node, ns
-- @column last_node_end_ns     end of the last node, ns
-- @column launch_delay_ns      first node start - launch call end, ns: the graph's launch delay
--                              (negative when the GPU starts the graph before the call returns)
-- @column span_ns              last_node_end_ns - first_node_ns, ns
-- @column node_sum_ns          summed duration of the nodes, ns
CREATE OR REPLACE VIEW graph_launches AS
SELECT run, launch_event_id, any_value(launch_name) AS launch_name, min(iteration) AS iteration,
       min(launch_ts_ns) AS launch_ts_ns, min(launch_end_ns) AS launch_end_ns,
       min(launch_end_ns) - min(launch_ts_ns) AS launch_call_ns,
       count(*) AS nodes, count(*) FILTER (kind = 'kernel') AS kernel_nodes,
       arg_min(kernel_id, (ts_ns, kernel_id)) AS first_node_kernel_id,
       min(ts_ns) AS first_node_ns, max(ts_ns + coalesce(dur_ns, 0)) AS last_node_end_ns,
       min(ts_ns) - min(launch_end_ns) AS launch_delay_ns,
       max(ts_ns + coalesce(dur_ns, 0)) - min(ts_ns) AS span_ns,
       CAST(sum(coalesce(dur_ns, 0)) AS BIGINT) AS node_sum_ns
FROM kernels
WHERE is_graph_launch(launch_name) AND launch_event_id IS NOT NULL AND ts_ns IS NOT NULL
GROUP BY run, launch_event_id;

-- Per iteration: how much of the step already runs as CUDA graph nodes, and what
-- is left around the graphs: the launch calls' own host time and the GPU time
-- between consecutive graph replays (gaps on the GPU where no node of a graph runs
-- between one replay's last node and the next replay's first).
--
-- @column run                 trace run
-- @column iteration           iteration
-- @column kernels             kernels of the iteration
-- @column graph_kernels       of those, nodes of a graph launch
-- @column graph_kernel_pct    100 * graph_kernels / kernels, %
-- @column graph_launches      graph launches in the iteration
-- @column launch_call_ns      summed host time of those launch calls, ns
-- @column between_replays_ns  summed positive gaps between one graph's last node and the next graph's first, ns
-- @column eager_kernels       kernels launched one by one (not graph nodes)
CREATE OR REPLACE VIEW iteration_graphs AS
WITH g AS (
    SELECT run, iteration, count(*) AS launches, CAST(sum(launch_call_ns) AS BIGINT) AS call_ns,
           CAST(sum(greatest(gap, 0)) AS BIGINT) AS between_ns
    FROM (SELECT *, first_node_ns - lag(last_node_end_ns) OVER (PARTITION BY run, iteration ORDER BY first_node_ns) AS gap
          FROM graph_launches)
    GROUP BY ALL
), k AS (
    SELECT run, iteration, count(*) AS kernels, count(*) FILTER (is_graph_launch(launch_name)) AS graph_kernels
    FROM kernels WHERE kind = 'kernel' AND ts_ns IS NOT NULL AND iteration IS NOT NULL GROUP BY ALL
)
SELECT k.run, k.iteration, k.kernels, k.graph_kernels, 100.0 * k.graph_kernels / k.kernels AS graph_kernel_pct,
       coalesce(g.launches, 0) AS graph_launches, coalesce(g.call_ns, 0) AS launch_call_ns,
       coalesce(g.between_ns, 0) AS between_replays_ns, k.kernels - k.graph_kernels AS eager_kernels
FROM k LEFT JOIN g USING (run, iteration);
